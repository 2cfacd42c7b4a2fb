//! The cache-blocked loop of one product on one thread: `b` packed a `KC x NC` block at a
//! time (it stays in the 1 MiB L2 while every row panel of `a` passes over it), `a` an
//! `MC x KC` block at a time, each `MR x KC` panel of it (in L1) run against every `NR`-column
//! panel of the `b` block. Blocks along `k` continue each output's chain through `dst`.

use super::pack::{pack_a, pack_b, with_buffers};
use super::{Dst, Product, Strided, Tile};

/// Steps of `k` per block at most: a row panel of `a` (`MR x KC`, 16 KiB at 8 rows) stays in
/// L1, a `KC x NC` block of `b` (1 MiB) in the L2 of the AVX-512 machine it was chosen on. On
/// an AVX2 machine with 512 KiB of L2, blocks of 256 x 256, 256 x 512 and 512 x 256 measured
/// the same (docs/PERFORMANCE.md).
const KC: usize = 512;
/// Columns of `b` per block at most.
const NC: usize = 512;
/// Rows of `a` per block at most.
const MC: usize = 192;

/// The largest tile, in values (the edge buffer's size).
const MAX_TILE: usize = 16 * 64;

/// `k` cut into blocks of equal size (the last one shorter by less than a block count), at most
/// `KC`: `784` runs as `4 x 196`, not `3 x 256 + 16`.
fn k_block(k: usize) -> usize {
    k.div_ceil(k.div_ceil(KC))
}

/// One product on this thread, as [`super::sgemm`] describes it.
///
/// # Safety
/// As [`super::sgemm`], and the CPU must have `K`'s features.
pub(super) unsafe fn gemm<K: Tile>(Product { m, n, k, a, b }: Product, Dst { ptr: dst, rs: drs, accumulate }: Dst) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            // SAFETY: dst holds m rows of n, drs apart.
            (0..m).for_each(|i| unsafe { std::slice::from_raw_parts_mut(dst.add(i * drs), n) }.fill(0.0));
        }
        return;
    }
    let kc = k_block(k);
    let nc = (NC / K::NR * K::NR).min(n.div_ceil(K::NR) * K::NR);
    let mc = (MC / K::MR * K::MR).min(m.div_ceil(K::MR) * K::MR);
    with_buffers(mc * kc, kc * nc, |abuf, bbuf| {
        for jc in (0..n).step_by(nc) {
            let nlen = nc.min(n - jc);
            for pc in (0..k).step_by(kc) {
                let klen = kc.min(k - pc);
                let direct = read_in_place(b, m).then(|| b.offset(pc, jc));
                let packed_from = if direct.is_some() { nlen / K::NR * K::NR } else { 0 };
                if packed_from < nlen {
                    // SAFETY: the block is inside b (the caller's contract).
                    unsafe { pack_b(b.offset(pc, jc + packed_from), klen, nlen - packed_from, K::NR, &mut bbuf[packed_from * klen..]) };
                }
                for ic in (0..m).step_by(mc) {
                    let mlen = mc.min(m - ic);
                    // SAFETY: the block is inside a.
                    unsafe { pack_a(a.offset(ic, pc), mlen, klen, K::MR, abuf) };
                    let load = accumulate || pc > 0;
                    // SAFETY: the block's rows and columns are inside dst.
                    unsafe { block::<K>(mlen, nlen, klen, abuf, (bbuf, direct), dst.add(ic * drs + jc), drs, load) };
                }
            }
        }
    });
}

/// Whether to read `b`'s panels in place rather than pack them: where `b` is row-major (the
/// tile loads its rows as they are), and few row panels of `a` (`m <= MC`) share each packed
/// panel, so packing would cost a share of the time (W3's batch of 128: 3-5%). Not when its
/// rows are a multiple of 4 KiB apart: the tile's loads then fall in one L1 set and ran up
/// to 1.9x slower (`[512, 256] @ [256, 1024]`). Any other `b` is packed, and so is a last
/// panel of fewer than `NR` columns.
pub(super) fn read_in_place(b: Strided, m: usize) -> bool {
    b.cs == 1 && m <= MC && (b.rs * 4) % 4096 != 0
}

/// The packed `mlen x klen` block of `a` times the `klen x nlen` block of `b` into `c`, tile
/// by tile. `b`'s panels are packed in `bbuf` (`[jr / NR][klen][NR]`), or read in place from a
/// row-major `direct` block where they are whole. Tiles past the edges go through a buffer
/// (their extra rows and columns, computed from the packing's zeros, are dropped).
///
/// # Safety
/// The CPU must have `K`'s features; `abuf` holds the packed block of `a`, `bbuf` the packed
/// panels of `b` (all, or without `direct` only the last partial one), `c` `mlen` rows of
/// `nlen`, `ldc` apart.
#[allow(clippy::too_many_arguments)]
unsafe fn block<K: Tile>(
    mlen: usize,
    nlen: usize,
    klen: usize,
    abuf: &[f32],
    (bbuf, direct): (&[f32], Option<Strided>),
    c: *mut f32,
    ldc: usize,
    load: bool,
) {
    let mut edge = [0f32; MAX_TILE];
    for jr in (0..nlen).step_by(K::NR) {
        let cols = K::NR.min(nlen - jr);
        let (bp, ldb) = match direct {
            Some(b) if cols == K::NR => (b.offset(0, jr).ptr, b.rs as usize),
            _ => (bbuf[jr * klen..].as_ptr(), K::NR),
        };
        for ir in (0..mlen).step_by(K::MR) {
            let rows = K::MR.min(mlen - ir);
            let ap = abuf[ir * klen..].as_ptr();
            // SAFETY: (ir, jr) is inside c's block.
            let ct = unsafe { c.add(ir * ldc + jr) };
            if load && ir + K::MR < mlen {
                // The next tile's chains start at c's values: on their way while this one runs.
                prefetch_tile(ct.wrapping_add(K::MR * ldc), K::MR.min(mlen - ir - K::MR), cols, ldc);
            }
            if rows == K::MR && cols == K::NR {
                // SAFETY: a whole tile of c; the panels hold klen steps.
                unsafe { K::run(klen, ap, (bp, ldb), ct, ldc, load) };
                continue;
            }
            for r in 0..rows {
                if load {
                    // SAFETY: row r's first `cols` values are inside c.
                    unsafe { std::ptr::copy_nonoverlapping(ct.add(r * ldc), edge.as_mut_ptr().add(r * K::NR), cols) };
                }
            }
            // SAFETY: `edge` holds MR x NR <= MAX_TILE values.
            unsafe { K::run(klen, ap, (bp, ldb), edge.as_mut_ptr(), K::NR, load) };
            for r in 0..rows {
                // SAFETY: as above.
                unsafe { std::ptr::copy_nonoverlapping(edge.as_ptr().add(r * K::NR), ct.add(r * ldc), cols) };
            }
        }
    }
}

/// Asks for the cache lines of a `rows x cols` tile of `c` (a hint: no access, no fault).
fn prefetch_tile(c: *const f32, rows: usize, cols: usize, ldc: usize) {
    (0..rows).for_each(|r| super::super::prefetch::lines(c.wrapping_add(r * ldc), cols));
}
