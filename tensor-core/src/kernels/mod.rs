//! CPU kernels on ndarray, shared by eager dispatch and the graph executor: the same function
//! computes an op in both modes, so both give the same bits.

mod channel_bias;
pub(crate) mod codegen;
pub(crate) mod conv;
mod conv_direct;
pub(crate) mod depthwise;
pub(crate) mod elementwise;
pub(crate) mod fused;
pub(crate) mod index;
pub(crate) mod layout;
pub(crate) mod matmul;
mod matvec;
pub(crate) mod parallel;
pub(crate) mod pointwise;
pub(crate) mod pool;
pub(crate) mod random;
pub(crate) mod reduce;
mod scratch;
pub mod simd;
pub(crate) mod softmax;
mod transpose;
mod winograd;
mod winograd_cache;
