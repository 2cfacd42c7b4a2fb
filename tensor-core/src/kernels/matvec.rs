//! A row vector times a row-major matrix, `[k] @ [k, n]`: a dense layer on one input.
//!
//! `gemm` runs these products with its matrix-vector kernel, which keeps the output in memory
//! and loads, updates and stores all of it once per row of the matrix. Here the outputs stay
//! in registers: blocks of `NB` columns, two blocks per pass over the rows, each output a
//! product of the first row and then one fused multiply-add per further row, in row order —
//! the order of gemm's kernel, so the bits are the same as before (tested against gemm).
//! A partial last block is computed as the full block that ends at `n` (it overlaps the one
//! before; overlapping outputs are computed twice, identically).

use super::simd::multiversion;
use crate::math::{Float, Num};
use std::any::TypeId;
use std::mem::MaybeUninit;

/// True when [`matvec`] computes this `[1, k] @ [k, n]` product of element type `T`: on a CPU
/// with FMA, floats,
/// and shapes gemm does not hand to its dot-product kernels (`n >= 2`, `k >= 3`).
pub(super) fn applies<T: Num>(m: usize, k: usize, n: usize) -> bool {
    // With FMA only, as conv_direct (the C library's `fma` can pick another of several NaNs).
    super::simd::level() >= super::simd::Level::Avx2 && T::DTYPE.is_float() && m == 1 && k >= 3 && n >= 2
}

/// `dst = a @ b` for `a` `[k]` and `b` row-major `[k, n]`, when [`applies`]; false (and `dst`
/// to be written again) when a NaN arose: which of several NaNs a fused multiply-add returns
/// depends on its operands' order in the instruction, so those products stay with gemm.
pub(super) fn matvec<T: Num>(a: &[T], b: &[T], n: usize, dst: &mut [MaybeUninit<T>]) -> bool {
    // SAFETY (of the casts): the TypeId says T is the type cast to.
    unsafe {
        if TypeId::of::<T>() == TypeId::of::<f32>() {
            matvec_float(cast::<T, f32>(a), cast::<T, f32>(b), n, &mut *(dst as *mut [MaybeUninit<T>] as *mut [MaybeUninit<f32>]))
        } else if TypeId::of::<T>() == TypeId::of::<f64>() {
            matvec_float(cast::<T, f64>(a), cast::<T, f64>(b), n, &mut *(dst as *mut [MaybeUninit<T>] as *mut [MaybeUninit<f64>]))
        } else {
            unreachable!("matvec on {:?}: `applies` admits floats only", T::DTYPE);
        }
    }
}

/// Whether a value of `s` is NaN.
fn any_nan<F: Float>(s: &[F]) -> bool {
    s.iter().fold(false, |seen, v| seen | v.is_nan_value())
}

/// # Safety
/// `T` and `U` must be the same type.
unsafe fn cast<T, U>(s: &[T]) -> &[U] {
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const U, s.len()) }
}

fn matvec_float<F: Float>(a: &[F], b: &[F], n: usize, dst: &mut [MaybeUninit<F>]) -> bool {
    matvec_blocks(a, b, n, dst);
    // A NaN output is the only trace of a NaN operand (checking the n outputs is cheaper than
    // scanning the k * n weights); gemm then computes the product again.
    // SAFETY: matvec_blocks wrote all n outputs.
    !any_nan(unsafe { &*(&dst[..n] as *const [MaybeUninit<F>] as *const [F]) })
}

multiversion! {
    fn matvec_blocks<F: Float>(a: &[F], b: &[F], n: usize, dst: &mut [MaybeUninit<F>]) = matvec_body;
}

#[inline(always)]
fn matvec_body<F: Float>(a: &[F], b: &[F], n: usize, dst: &mut [MaybeUninit<F>]) {
    // Four AVX-512 vectors per block: two blocks keep eight accumulator chains in flight.
    let lanes = 64 / std::mem::size_of::<F>();
    match (n >= 4 * lanes, std::mem::size_of::<F>()) {
        (true, 4) => blocks::<F, 64>(a, b, n, dst),
        (true, _) => blocks::<F, 32>(a, b, n, dst),
        (false, _) if n >= 16 => blocks::<F, 16>(a, b, n, dst),
        (false, _) if n >= 8 => blocks::<F, 8>(a, b, n, dst),
        (false, _) if n >= 4 => blocks::<F, 4>(a, b, n, dst),
        _ => blocks::<F, 2>(a, b, n, dst),
    }
}

/// Every block of `NB` columns (`n >= NB`), two per pass; the last one ends at `n`.
#[inline(always)]
fn blocks<F: Float, const NB: usize>(a: &[F], b: &[F], n: usize, dst: &mut [MaybeUninit<F>]) {
    let count = n.div_ceil(NB);
    let start = |i: usize| (i * NB).min(n - NB);
    let mut i = 0;
    while i + 1 < count {
        pass::<F, NB, 2>(a, b, n, [start(i), start(i + 1)], dst);
        i += 2;
    }
    if i < count {
        pass::<F, NB, 1>(a, b, n, [start(i)], dst);
    }
}

/// Columns `s..s + NB` for each start `s`, over all rows of `b`.
#[inline(always)]
fn pass<F: Float, const NB: usize, const P: usize>(a: &[F], b: &[F], n: usize, starts: [usize; P], dst: &mut [MaybeUninit<F>]) {
    let row = |p: usize, s: usize| -> &[F; NB] { b[p * n + s..][..NB].try_into().expect("NB values") };
    // The first row's products, as gemm's kernel starts (a product, not a multiply-add on 0).
    let mut acc: [[F; NB]; P] = std::array::from_fn(|j| std::array::from_fn(|c| a[0].mul_plain(row(0, starts[j])[c])));
    for (p, &av) in a.iter().enumerate().skip(1) {
        for (j, acc) in acc.iter_mut().enumerate() {
            let r = row(p, starts[j]);
            for c in 0..NB {
                acc[c] = av.mul_add(r[c], acc[c]);
            }
        }
    }
    for (j, acc) in acc.iter().enumerate() {
        for (d, &v) in dst[starts[j]..][..NB].iter_mut().zip(acc) {
            d.write(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(len: usize, seed: u32) -> Vec<f32> {
        (0..len as u32).map(|i| ((i.wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 2000) as f32 / 997.0 - 1.0).collect()
    }

    fn via_gemm(a: &[f32], b: &[f32], k: usize, n: usize) -> Vec<u32> {
        let mut out = vec![0.0f32; n];
        let (am, bm) = (super::super::matmul::MatRef::new(a, 1, k), super::super::matmul::MatRef::new(b, k, n));
        super::super::matmul::gemm_into(am, bm, &mut out, false, 1);
        out.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn gives_gemms_bits() {
        if !(std::arch::is_x86_feature_detected!("fma")) {
            return; // gemm multiplies and adds separately without FMA; this kernel never does
        }
        for (k, n) in [(400, 120), (120, 84), (84, 10), (3, 2), (5, 3), (17, 7), (9, 16), (31, 33), (700, 65), (600, 257)] {
            let (a, b) = (values(k, 1), values(k * n, 2));
            let mut out = vec![MaybeUninit::uninit(); n];
            assert!(applies::<f32>(1, k, n));
            assert!(matvec(&a, &b, n, &mut out));
            // SAFETY: matvec wrote all n outputs.
            let got: Vec<u32> = out.iter().map(|v| unsafe { v.assume_init() }.to_bits()).collect();
            assert_eq!(got, via_gemm(&a, &b, k, n), "k={k} n={n}");
        }
    }
}
