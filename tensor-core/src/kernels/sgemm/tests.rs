//! The product's bits against its definition — one `mul_add` chain per output over `p` in
//! order, from `+0` or from `dst` — at every SIMD level, on one thread and on two, for edges
//! of every tile and block size, transposed and strided operands, and special values.

use super::{sgemm, Strided};
use crate::kernels::simd::{set_max_level, Level, LEVEL_CAPS};

/// The definition, one output at a time.
fn reference(m: usize, n: usize, k: usize, a: Strided, b: Strided, dst: &mut [f32], drs: usize, accumulate: bool) {
    for i in 0..m {
        for j in 0..n {
            let mut c = if accumulate { dst[i * drs + j] } else { 0.0 };
            for p in 0..k {
                // SAFETY: (i, p) and (p, j) are inside the test's buffers.
                c = unsafe { a.at(i, p).mul_add(b.at(p, j), c) };
            }
            dst[i * drs + j] = c;
        }
    }
}

fn values(len: usize, seed: u64) -> Vec<f32> {
    crate::kernels::test_values(len, seed).iter().map(|&v| v as f32).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|v| v.to_bits()).collect()
}

/// One case: `a` stored `[m, k]` (or `[k, m]` read transposed), with `pad` extra elements per
/// stored row (a strided view); likewise `b`; `dst` with `pad` extra per row, which must stay
/// untouched. Compared at every level, on 1 and 2 threads.
fn check_with(m: usize, n: usize, k: usize, ta: bool, tb: bool, pad: usize, accumulate: bool, a: &[f32], b: &[f32]) {
    let (a_rows, a_cols) = if ta { (k, m) } else { (m, k) };
    let (b_rows, b_cols) = if tb { (n, k) } else { (k, n) };
    assert!(a.len() >= a_rows * (a_cols + pad) && b.len() >= b_rows * (b_cols + pad));
    let sa = Strided { ptr: a.as_ptr(), rs: (a_cols + pad) as isize, cs: 1 };
    let sb = Strided { ptr: b.as_ptr(), rs: (b_cols + pad) as isize, cs: 1 };
    let (sa, sb) = (if ta { sa.t() } else { sa }, if tb { sb.t() } else { sb });
    let drs = n + pad;
    let start = values(m * drs, 7);
    let mut want = start.clone();
    reference(m, n, k, sa, sb, &mut want, drs, accumulate);
    let _caps = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
    for level in [Level::Baseline, Level::Avx2, Level::Avx512] {
        set_max_level(level);
        for threads in [1, 2] {
            let mut got = start.clone();
            // SAFETY: the operands and dst are the buffers checked above.
            unsafe { sgemm(m, n, k, sa, sb, got.as_mut_ptr(), drs, accumulate, threads) };
            assert_eq!(bits(&got), bits(&want), "{m}x{n}x{k} ta={ta} tb={tb} pad={pad} acc={accumulate} {level:?} threads={threads}");
        }
    }
    set_max_level(Level::Avx512);
}

fn check(m: usize, n: usize, k: usize, ta: bool, tb: bool, pad: usize, accumulate: bool) {
    let a = values((m.max(k) + 1) * (m.max(k) + pad), 1);
    let b = values((n.max(k) + 1) * (n.max(k) + pad), 2);
    check_with(m, n, k, ta, tb, pad, accumulate, &a, &b);
}

#[test]
fn the_definition_at_every_edge_of_tiles_and_blocks() {
    // Tiles: 4x8 (portable), 6x16 (AVX2), 12x32 (AVX-512), one either side of each.
    for (m, n) in [(1, 1), (3, 7), (5, 9), (7, 15), (11, 17), (12, 32), (13, 31), (25, 33), (6, 16)] {
        for k in [1, 2, 9] {
            check(m, n, k, false, false, 0, false);
        }
    }
    // Blocks: k across KC = 256 (and its equal split), m across MC = 192, n across NC = 512.
    check(5, 33, 257, false, false, 0, false);
    check(13, 17, 513, false, false, 0, false);
    check(193, 35, 9, false, false, 0, false);
    check(7, 513, 5, false, false, 0, false);
    check(25, 1041, 3, false, false, 0, false);
}

#[test]
fn transposed_and_strided_operands() {
    for (ta, tb) in [(true, false), (false, true), (true, true)] {
        check(13, 35, 19, ta, tb, 0, false);
        check(13, 35, 300, ta, tb, 0, false);
    }
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        check(14, 33, 21, ta, tb, 3, false);
    }
}

#[test]
fn accumulate_continues_the_chain_from_dst() {
    check(13, 33, 17, false, false, 0, true);
    check(13, 33, 300, false, true, 2, true);
    check(3, 5, 0, false, false, 0, true);
    check(3, 5, 0, false, false, 0, false);
    // By hand: dst 1, a = [2, 3], b = [4, 5]: fma(3, 5, fma(2, 4, 1)) = 24 (not 1 + 23's
    // rounding, which is the same here, so also a value where the two differ): with dst =
    // 2^24 and a·b = 1 + 1 (two steps of 1), the chain gives 2^24 (each +1 rounds to even,
    // away), a product added afterwards 2^24 + 2.
    let (a, b) = ([2.0f32, 3.0], [4.0f32, 5.0]);
    let mut dst = [1.0f32];
    // SAFETY: 1x2 by 2x1 into 1x1.
    unsafe { sgemm(1, 1, 2, Strided::row_major(&a, 2), Strided::row_major(&b, 1), dst.as_mut_ptr(), 1, true, 1) };
    assert_eq!(dst, [24.0]);
    let big = 16_777_216.0f32;
    let (a, b) = ([1.0f32, 1.0], [1.0f32, 1.0]);
    let mut dst = [big];
    // SAFETY: as above.
    unsafe { sgemm(1, 1, 2, Strided::row_major(&a, 2), Strided::row_major(&b, 1), dst.as_mut_ptr(), 1, true, 1) };
    assert_eq!(dst, [big]);
}

#[test]
fn special_values_propagate_as_the_chain_says() {
    let (m, n, k) = (13, 35, 20);
    let mut a = values(m * k, 1);
    let mut b = values(k * n, 2);
    a[3] = f32::NAN;
    a[k + 5] = f32::INFINITY;
    b[4 * n + 7] = f32::NEG_INFINITY;
    b[9 * n + 2] = -0.0;
    a[2 * k..3 * k].fill(-0.0);
    check_with(m, n, k, false, false, 0, false, &a, &b);
    check_with(m, n, k, false, false, 0, true, &a, &b);
    // By hand: a row of -0 times finite values: fma(-0, 2, fma(-0, 1, +0)) = +0 (the chain
    // starts at +0, and -0 + +0 = +0).
    let mut dst = [f32::NAN];
    // SAFETY: 1x2 by 2x1 into 1x1.
    unsafe { sgemm(1, 1, 2, Strided::row_major(&[-0.0, -0.0], 2), Strided::row_major(&[1.0, 2.0], 1), dst.as_mut_ptr(), 1, false, 1) };
    assert_eq!(dst[0].to_bits(), 0.0f32.to_bits());
    // 0 * inf is NaN in its chain only: rows [1, 0] and [1, 1] by the column [1, inf].
    let mut dst = [0.0f32; 2];
    // SAFETY: 2x2 by 2x1 into 2x1.
    unsafe { sgemm(2, 1, 2, Strided::row_major(&[1.0, 0.0, 1.0, 1.0], 2), Strided::row_major(&[1.0, f32::INFINITY], 1), dst.as_mut_ptr(), 1, false, 1) };
    assert!(dst[0].is_nan());
    assert_eq!(dst[1], f32::INFINITY);
}
