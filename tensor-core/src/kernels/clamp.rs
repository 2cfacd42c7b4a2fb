//! A clamp of a convolution's outputs, applied by the kernel in registers before it stores
//! them: a graph's epilogue `maximum(conv, lo)` then `minimum(.., hi)` (ReLU6, as
//! MobileNetV2's `Clip` imports), one of the two, or `clamp(conv, lo, hi)`.
//!
//! Run as the epilogue's fused program, the clamp was a second pass over every output, made
//! one short run at a time (a pointwise layer's 512 positions of a channel): in MobileNetV2 at
//! one thread that pass took ~0.5 ms of the ~2.9 its five `pointwise_direct` layers took
//! (`--profile` with the hook left out, twenty-sixth session). Two instructions per stored
//! vector cost next to nothing.
//!
//! **The bits** are the program's: `Num::maximum(v, lo)` keeps `v` when it is NaN or `v >=
//! lo` (so `-0` stays `-0` against `lo = +0`), and `maxps(lo, v)` returns `v` unless `lo > v`,
//! the same choice; `minimum` and `minps(hi, v)` alike. Bounds that are NaN would differ
//! (`maxps` would return `v`), so they make no clamp (`Clamp::new`). A kernel that does not
//! apply it runs [`Clamp::slice`] on each part of its output as it finishes it.

use crate::math::{Float, Num};

/// `minimum(maximum(v, lo), hi)` for every output `v`; an absent bound is an infinity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Clamp {
    lo: f32,
    hi: f32,
}

impl Clamp {
    /// The clamp to `[lo, hi]` (`None`: no bound), or `None` when a bound is NaN.
    pub(crate) fn new(lo: Option<f32>, hi: Option<f32>) -> Option<Clamp> {
        let (lo, hi) = (lo.unwrap_or(f32::NEG_INFINITY), hi.unwrap_or(f32::INFINITY));
        (!lo.is_nan() && !hi.is_nan()).then_some(Clamp { lo, hi })
    }

    /// One value, as the program computes it.
    pub(crate) fn value(self, v: f32) -> f32 {
        Num::minimum(Num::maximum(v, self.lo), self.hi)
    }

    /// Every value of `v` in place (`T` is f32: a clamp comes from an f32 program only).
    ///
    /// # Panics
    /// When `T` is not f32.
    pub(crate) fn slice<T: Float>(self, v: &mut [T]) {
        assert!(std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>(), "a clamp of f32 outputs");
        // SAFETY: T is f32 (asserted); the cast keeps the slice's length.
        let v = unsafe { super::fma_tile::cast_mut(v) };
        #[cfg(target_arch = "x86_64")]
        if super::simd::machine_level() >= super::simd::Level::Avx2 {
            // SAFETY: the CPU has AVX2, so AVX.
            return unsafe { self.slice_avx(v) };
        }
        v.iter_mut().for_each(|v| *v = self.value(*v));
    }

    /// [`slice`](Self::slice) by vectors of eight.
    ///
    /// # Safety
    /// The CPU must have AVX.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    unsafe fn slice_avx(self, v: &mut [f32]) {
        use std::arch::x86_64::*;
        let mut lanes = v.chunks_exact_mut(8);
        for l in &mut lanes {
            // SAFETY: the CPU has AVX (the caller's); `l` holds eight floats.
            unsafe { _mm256_storeu_ps(l.as_mut_ptr(), self.ymm(_mm256_loadu_ps(l.as_ptr()))) };
        }
        lanes.into_remainder().iter_mut().for_each(|v| *v = self.value(*v));
    }

    /// `after`, with the clamp run first on each part it is handed (`out` the output's start,
    /// `len` its elements): for a kernel that stores without it.
    pub(crate) fn before<'a, T: Float>(
        clamp: Option<Clamp>,
        out: *mut T,
        len: usize,
        after: &'a (dyn Fn(usize, usize) + Sync),
    ) -> impl Fn(usize, usize) + Sync + 'a {
        let dst = super::shared_out::SharedOut::from_ptr(out);
        move |start: usize, n: usize| {
            if let Some(c) = clamp {
                assert!(start + n <= len, "a part of the output");
                // SAFETY: the part is inside the output (asserted) and final, and the kernel
                // hands each part to one thread once, which alone touches it now.
                c.slice(unsafe { std::slice::from_raw_parts_mut(dst.at(start), n) });
            }
            after(start, n)
        }
    }

    /// The clamp of eight lanes, `minps(hi, maxps(lo, v))`.
    ///
    /// # Safety
    /// The CPU must have AVX.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    #[inline]
    pub(crate) unsafe fn ymm(self, v: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        _mm256_min_ps(_mm256_set1_ps(self.hi), _mm256_max_ps(_mm256_set1_ps(self.lo), v))
    }

    /// [`ymm`](Self::ymm) on sixteen lanes: the same instructions' choices, so the same bits.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) unsafe fn zmm(self, v: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        _mm512_min_ps(_mm512_set1_ps(self.hi), _mm512_max_ps(_mm512_set1_ps(self.lo), v))
    }
}

/// What the kernels' tests share: the clamps to run each case with, and the definition's
/// outputs clamped after, as the graph's program clamps them.
#[cfg(test)]
pub(crate) mod testing {
    use super::Clamp;

    /// No clamp, and one that bites on both sides of the test values (in [-1, 1)).
    pub(crate) fn clamps() -> [Option<Clamp>; 2] {
        [None, Clamp::new(Some(-0.25), Some(0.5))]
    }

    /// `values`, each clamped by `clamp` (if any).
    pub(crate) fn clamped(values: Vec<f32>, clamp: Option<Clamp>) -> Vec<f32> {
        values.into_iter().map(|v| clamp.map_or(v, |c| c.value(v))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values where the choices differ: signed zeros, NaN, infinities, the bounds themselves.
    const EDGES: [f32; 10] = [-0.0, 0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 6.0, 5.5, -3.0, 7.0, 1e-40];

    #[test]
    fn a_hand_computed_clamp() {
        let c = Clamp::new(Some(0.0), Some(6.0)).unwrap();
        let mut v = [-1.0f32, 0.5, 6.5, 3.0];
        c.slice(&mut v);
        assert_eq!(v, [0.0, 0.5, 6.0, 3.0]);
        assert_eq!(c.value(-0.0).to_bits(), (-0.0f32).to_bits(), "maximum keeps -0 against +0");
        assert!(c.value(f32::NAN).is_nan());
        assert_eq!(Clamp::new(Some(0.0), None).unwrap().value(1e30), 1e30);
        assert_eq!(Clamp::new(None, Some(6.0)).unwrap().value(-1e30), -1e30);
        assert_eq!(Clamp::new(Some(f32::NAN), Some(6.0)), None);
        assert_eq!(Clamp::new(Some(0.0), Some(f32::NAN)), None);
    }

    #[test]
    fn a_slice_of_any_length_is_clamped_as_each_value() {
        let c = Clamp::new(Some(-0.0), Some(6.0)).unwrap();
        let v: Vec<f32> = (0..37).map(|i| EDGES[i % EDGES.len()] * if i % 3 == 0 { -1.0 } else { 1.0 }).collect();
        let mut out = v.clone();
        c.slice(&mut out);
        let want: Vec<u32> = v.iter().map(|&v| c.value(v).to_bits()).collect();
        assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_vector_clamp_has_the_programs_bits() {
        if !is_x86_feature_detected!("avx") {
            return;
        }
        for (lo, hi) in [(Some(0.0), Some(6.0)), (Some(-0.0), Some(0.0)), (Some(6.0), Some(0.0)), (None, Some(5.5)), (Some(-3.0), None)] {
            let c = Clamp::new(lo, hi).unwrap();
            for chunk in EDGES.chunks(8) {
                let mut lanes = [0.0f32; 8];
                lanes[..chunk.len()].copy_from_slice(chunk);
                let mut out = [0.0f32; 8];
                // SAFETY: the CPU has AVX (checked); both arrays hold 8 lanes.
                unsafe {
                    use std::arch::x86_64::*;
                    _mm256_storeu_ps(out.as_mut_ptr(), c.ymm(_mm256_loadu_ps(lanes.as_ptr())));
                }
                for (v, o) in lanes.iter().zip(out) {
                    let want = Num::minimum(Num::maximum(*v, lo.unwrap_or(f32::NEG_INFINITY)), hi.unwrap_or(f32::INFINITY));
                    assert_eq!(o.to_bits(), want.to_bits(), "{v} in [{lo:?}, {hi:?}]");
                }
            }
            if is_x86_feature_detected!("avx512f") {
                let mut out = [0.0f32; 16];
                let mut lanes = [0.0f32; 16];
                lanes[..EDGES.len()].copy_from_slice(&EDGES);
                // SAFETY: the CPU has AVX-512F (checked); both arrays hold 16 lanes.
                unsafe {
                    use std::arch::x86_64::*;
                    _mm512_storeu_ps(out.as_mut_ptr(), c.zmm(_mm512_loadu_ps(lanes.as_ptr())));
                }
                for (v, o) in lanes.iter().zip(out) {
                    assert_eq!(o.to_bits(), c.value(*v).to_bits(), "{v} in [{lo:?}, {hi:?}], sixteen lanes");
                }
            }
        }
    }
}
