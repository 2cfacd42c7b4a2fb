//! A register tile of fused multiply-add chains: `R` rows (output channels) by `V` vectors of
//! 16 positions, each accumulator a chain over the *taps* in order from zero,
//! `s = w[r, p] * x[off_p + q + l] + s`. The rows' weights are broadcast from a row-major
//! `[rows, taps]` matrix, the inputs read as one contiguous run per tap at the tap's offset.
//!
//! It is the inner loop of the direct convolution (`conv_direct_large`: a tap is
//! `(ci, ki, kj)`, its offset a place in the padded image) and of Winograd's products
//! (`winograd`: a tap is an input channel, its offset the channel's row of transformed tiles),
//! so both compute each output as one chain in tap order: the bits of the scalar
//! `mul_add` chain (`conv_direct::tile`) at every level, and of the `gemm` crate's product
//! where that sums its `k` in one block.

use super::conv_direct::tile;
use crate::math::Float;

/// The taps' offsets in the weight's order and the largest of them, which bounds every read
/// of a tile (with phases the offsets do not rise with the taps).
pub(super) struct Taps {
    pub(super) offsets: Vec<usize>,
    pub(super) reach: usize,
}

impl Taps {
    pub(super) fn new(offsets: Vec<usize>) -> Taps {
        let reach = offsets.iter().copied().max().unwrap_or(0);
        Taps { offsets, reach }
    }
}

/// `conv_direct`'s tile for `rows` channels (at most 6) at wide positions `q..q + len`, into
/// `sums` (`[rows, len]`), by sub-tiles of one 64-byte vector of positions (`len` is a
/// multiple of one).
#[inline(always)]
pub(super) fn portable_tile<T: Float>(xp: &[T], offsets: &[usize], w: &[T], rows: usize, q: usize, len: usize, sums: &mut [T]) {
    // `tile` reads the image at `off + sub` and writes `sums` at `r * len + sub`: shift the
    // image by the tile's start.
    let xp = &xp[q..];
    macro_rules! run {
        ($l:literal) => {
            for sub in (0..len).step_by($l) {
                match rows {
                    1 => tile::<T, 1, $l>(xp, offsets, w, sub, len, sums),
                    2 => tile::<T, 2, $l>(xp, offsets, w, sub, len, sums),
                    3 => tile::<T, 3, $l>(xp, offsets, w, sub, len, sums),
                    4 => tile::<T, 4, $l>(xp, offsets, w, sub, len, sums),
                    5 => tile::<T, 5, $l>(xp, offsets, w, sub, len, sums),
                    _ => tile::<T, 6, $l>(xp, offsets, w, sub, len, sums),
                }
            }
        };
    }
    if std::mem::size_of::<T>() == 4 {
        run!(16)
    } else {
        run!(8)
    }
}

/// `s` as f32 values.
///
/// # Safety
/// `T` must be f32.
pub(super) unsafe fn cast<T>(s: &[T]) -> &[f32] {
    // SAFETY: the caller's: T is f32.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const f32, s.len()) }
}

/// [`cast`] for a mutable slice.
///
/// # Safety
/// `T` must be f32.
pub(super) unsafe fn cast_mut<T>(s: &mut [T]) -> &mut [f32] {
    // SAFETY: the caller's: T is f32.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut f32, s.len()) }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use std::arch::x86_64::*;

    /// The tile of `R` channels by `V` vectors of 16 positions at wide positions `q..`: each
    /// accumulator a chain of `vfmadd` over the taps, `w[r, p] * x[off_p + q + l] + s`, as
    /// `conv_direct::tile`'s `mul_add`. Channels past `rows` repeat the last one (computed,
    /// not stored). Written to `sums` `[R, 16 * V]`.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
    pub(in crate::kernels) unsafe fn tile<const R: usize, const V: usize>(
        xp: &[f32],
        taps: &super::Taps,
        w: &[f32],
        rows: usize,
        q: usize,
        sums: &mut [f32],
    ) {
        let (offsets, patch) = (&taps.offsets, taps.offsets.len());
        // Every read below is in bounds: no offset exceeds the reach, and the weights hold
        // `rows` rows.
        assert!(taps.reach + q + 16 * V <= xp.len() && rows >= 1 && w.len() >= rows * patch && sums.len() >= R * 16 * V);
        let mut wrows = [w.as_ptr(); R];
        for (r, row) in wrows.iter_mut().enumerate() {
            // SAFETY: row min(r, rows - 1) starts inside `w` (checked above).
            *row = unsafe { w.as_ptr().add(r.min(rows - 1) * patch) };
        }
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        for (p, &off) in offsets.iter().enumerate() {
            // SAFETY: off + q + 16 * V <= reach + q + 16 * V <= xp.len().
            let x = unsafe { xp.as_ptr().add(off + q) };
            let mut xv = [_mm512_setzero_ps(); V];
            for (v, xv) in xv.iter_mut().enumerate() {
                // SAFETY: as above.
                *xv = unsafe { _mm512_loadu_ps(x.add(16 * v)) };
            }
            for r in 0..R {
                // SAFETY: p < patch, in the row.
                let wv = _mm512_set1_ps(unsafe { *wrows[r].add(p) });
                for v in 0..V {
                    acc[r][v] = _mm512_fmadd_ps(wv, xv[v], acc[r][v]);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            for (v, &a) in row.iter().enumerate() {
                // SAFETY: (r * V + v) * 16 + 16 <= R * 16 * V <= sums.len().
                unsafe { _mm512_storeu_ps(sums.as_mut_ptr().add((r * V + v) * 16), a) };
            }
        }
    }
}
