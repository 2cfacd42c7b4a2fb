//! CPU kernels on ndarray, shared by eager dispatch and the graph executor: the same function
//! computes an op in both modes, so both give the same bits.

mod avx2_rows;
mod channel_bias;
pub(crate) mod clamp;
pub(crate) mod codegen;
pub(crate) mod conv;
mod conv_blocked;
mod conv_direct;
mod conv_direct_large;
mod conv_stem;
pub(crate) mod depthwise;
mod depthwise_channels;
mod depthwise_rows;
mod depthwise_rows_avx512;
pub(crate) mod elementwise;
mod fma_tile;
pub(crate) mod fused;
pub(crate) mod index;
pub(crate) mod layout;
pub(crate) mod matmul;
mod matvec;
pub(crate) mod parallel;
pub(crate) mod pointwise;
mod pointwise_direct;
pub(crate) mod pool;
mod prefetch;
pub(crate) mod random;
pub(crate) mod reduce;
mod scratch;
pub(crate) mod sgemm;
mod shared_out;
pub mod simd;
pub(crate) mod softmax;
mod transpose;
mod weight_cache;
mod winograd;

/// Deterministic test values in [-1, 1) with 24 significant bits (exact in f32 too), so
/// that sums taken in another order round differently.
#[cfg(test)]
pub(crate) fn test_values(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f64 / (1u64 << 24) as f64) * 2.0 - 1.0
        })
        .collect()
}
