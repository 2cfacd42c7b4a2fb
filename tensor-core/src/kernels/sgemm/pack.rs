//! Packing: a block of `a` into panels of `MR` rows (`[panel][p][MR]`) and a block of `b` into
//! panels of `NR` columns (`[panel][p][NR]`), from any strides, so the register tile reads both
//! contiguously. Rows and columns past the matrix's edge are zeros; `k` is never padded.

use super::super::scratch::{with_slot, Slot};
use super::Strided;

/// Values of alignment: a cache line.
const ALIGN: usize = 16;

/// Runs `f` on two buffers of `a_len` and `b_len` values, each starting on a cache line, in
/// this thread's packing scratch (kept between calls: a fresh one would be faulted in).
pub(super) fn with_buffers<R>(a_len: usize, b_len: usize, f: impl FnOnce(&mut [f32], &mut [f32]) -> R) -> R {
    let a_room = a_len.div_ceil(ALIGN) * ALIGN;
    with_slot(Slot::Pack, a_room + b_len + ALIGN, |v: &mut [f32]| {
        let skip = v.as_ptr().align_offset(ALIGN * 4).min(ALIGN);
        let (a, b) = v[skip..].split_at_mut(a_room);
        f(&mut a[..a_len], &mut b[..b_len])
    })
}

/// Packs the `rows x klen` block at `a` into panels of `mr` rows, `out[(panel * klen + p) *
/// mr + r]`, zeros for the rows past `rows`.
///
/// # Safety
/// The block must be inside `a`'s memory; `out` holds `rows.div_ceil(mr) * mr * klen` values.
pub(super) unsafe fn pack_a(a: Strided, rows: usize, klen: usize, mr: usize, out: &mut [f32]) {
    assert!(out.len() >= rows.div_ceil(mr) * mr * klen);
    // The tiles' widths, each with its own loop (its rows' pointers in registers).
    let panel: unsafe fn(Strided, usize, usize, *mut f32) = match mr {
        4 => panel_of::<4>,
        6 => panel_of::<6>,
        8 => panel_of::<8>,
        12 => panel_of::<12>,
        14 => panel_of::<14>,
        16 => panel_of::<16>,
        32 => panel_of::<32>,
        48 => panel_of::<48>,
        64 => panel_of::<64>,
        _ => unreachable!("a tile of {mr} rows or columns"),
    };
    for (p, i0) in (0..rows).step_by(mr).enumerate() {
        // SAFETY: the panel's mr x klen values are inside `out` (asserted), its live rows
        // inside the block.
        unsafe { panel(a.offset(i0, 0), mr.min(rows - i0), klen, out.as_mut_ptr().add(p * klen * mr)) };
    }
}

/// Packs the `klen x cols` block at `b` into panels of `nr` columns, `out[(panel * klen + p) *
/// nr + j]`, zeros for the columns past `cols`: the transposed problem of [`pack_a`].
///
/// # Safety
/// The block must be inside `b`'s memory; `out` holds `cols.div_ceil(nr) * nr * klen` values.
pub(super) unsafe fn pack_b(b: Strided, klen: usize, cols: usize, nr: usize, out: &mut [f32]) {
    // SAFETY: the same block, read as its transpose.
    unsafe { pack_a(b.t(), cols, klen, nr, out) }
}

/// One panel: `out[p * W + r] = x[r, p]` for the `live` rows `r < W` of `x` (zeros for the
/// others) and `p < klen`, read along whichever side of `x` is contiguous.
///
/// # Safety
/// `x`'s `live x klen` values must be live memory, `out` must hold `W * klen`.
unsafe fn panel_of<const W: usize>(x: Strided, live: usize, klen: usize, out: *mut f32) {
    // SAFETY (of every access below): (r, p) with r < live, p < klen is inside x, and
    // p * W + r < W * klen inside out.
    unsafe {
        if live < W {
            std::ptr::write_bytes(out, 0, W * klen);
        }
        if x.cs == 1 && live == W && x.rs > 0 {
            // Rows contiguous: the W x klen block's transpose, by 8 x 8 register transposes
            // with AVX (2-3x faster than a loop over the steps, which made packing a row-major
            // `a` 6% of a product's time).
            let src = std::slice::from_raw_parts(x.ptr, (W - 1) * x.rs as usize + klen);
            let dst = std::slice::from_raw_parts_mut(out.cast::<std::mem::MaybeUninit<f32>>(), W * klen);
            super::super::transpose::transpose_band(src, W, klen, x.rs as usize, dst);
        } else if x.cs == 1 && live == W {
            // The same with rows at a negative stride: W streams read step by step, each
            // step's W values written together.
            let rows: [*const f32; W] = std::array::from_fn(|r| x.ptr.offset(r as isize * x.rs));
            for p in 0..klen {
                let o = out.add(p * W);
                for (r, row) in rows.iter().enumerate() {
                    *o.add(r) = *row.add(p);
                }
            }
        } else if x.rs == 1 {
            // Each step's rows contiguous: a copy per step.
            for p in 0..klen {
                std::ptr::copy_nonoverlapping(x.ptr.offset(p as isize * x.cs), out.add(p * W), live);
            }
        } else {
            for r in 0..live {
                for p in 0..klen {
                    *out.add(p * W + r) = x.at(r, p);
                }
            }
        }
    }
}
