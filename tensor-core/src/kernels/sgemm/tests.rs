//! The product's bits against its definition — one `mul_add` chain per output over `p` in
//! order, from `+0` or from `dst` — at every SIMD level, on one thread and on two, for edges
//! of every tile and block size, transposed and strided operands, and special values.

use super::{sgemm, Dst, Product, Strided};
use crate::kernels::simd::{set_max_level, Level, LEVEL_CAPS};

/// The definition, one output at a time.
fn reference(Product { m, n, k, a, b }: Product, dst: &mut [f32], drs: usize, accumulate: bool) {
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

/// `a @ b` (row-major `m x k` and `k x n`) into (or, with `accumulate`, continued from) the
/// row-major `dst`, on one thread.
fn by_hand(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], dst: &mut [f32], accumulate: bool) {
    assert!(a.len() >= m * k && b.len() >= k * n && dst.len() >= m * n);
    let p = Product { m, n, k, a: Strided::row_major(a, k), b: Strided::row_major(b, n) };
    // SAFETY: the sizes are checked above.
    unsafe { sgemm(p, Dst { ptr: dst.as_mut_ptr(), rs: n, accumulate }, 1) };
}

fn values(len: usize, seed: u64) -> Vec<f32> {
    crate::kernels::test_values(len, seed).iter().map(|&v| v as f32).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|v| v.to_bits()).collect()
}

/// One case: `a` stored `[m, k]` (or `[k, m]` with `ta`, read transposed), with `pad` extra
/// elements per stored row (a strided view); likewise `b`; `dst` with `pad` extra per row, which
/// must stay untouched.
#[derive(Clone, Copy)]
struct Case {
    m: usize,
    n: usize,
    k: usize,
    ta: bool,
    tb: bool,
    pad: usize,
    accumulate: bool,
}

const fn case(m: usize, n: usize, k: usize) -> Case {
    Case { m, n, k, ta: false, tb: false, pad: 0, accumulate: false }
}

/// The case on the values `a` and `b`, compared with the definition at every level, on 1 and
/// 2 threads.
fn check_with(c: Case, a: &[f32], b: &[f32]) {
    let Case { m, n, k, ta, tb, pad, accumulate } = c;
    let (a_rows, a_cols) = if ta { (k, m) } else { (m, k) };
    let (b_rows, b_cols) = if tb { (n, k) } else { (k, n) };
    assert!(a.len() >= a_rows * (a_cols + pad) && b.len() >= b_rows * (b_cols + pad));
    let sa = Strided { ptr: a.as_ptr(), rs: (a_cols + pad) as isize, cs: 1 };
    let sb = Strided { ptr: b.as_ptr(), rs: (b_cols + pad) as isize, cs: 1 };
    let p = Product { m, n, k, a: if ta { sa.t() } else { sa }, b: if tb { sb.t() } else { sb } };
    let drs = n + pad;
    let start = values(m * drs, 7);
    let mut want = start.clone();
    reference(p, &mut want, drs, accumulate);
    let _caps = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
    for level in [Level::Baseline, Level::Avx2, Level::Avx512] {
        set_max_level(level);
        for threads in [1, 2] {
            let mut got = start.clone();
            // SAFETY: the operands and dst are the buffers checked above.
            unsafe { sgemm(p, Dst { ptr: got.as_mut_ptr(), rs: drs, accumulate }, threads) };
            assert_eq!(bits(&got), bits(&want), "{m}x{n}x{k} ta={ta} tb={tb} pad={pad} acc={accumulate} {level:?} threads={threads}");
        }
    }
    set_max_level(Level::Avx512);
}

/// The case on test values.
fn check(c: Case) {
    let side = c.m.max(c.n).max(c.k) + 1;
    check_with(c, &values(side * (side + c.pad), 1), &values(side * (side + c.pad), 2));
}

#[test]
fn the_definition_at_every_edge_of_tiles_and_blocks() {
    // Tiles: 4x8 (portable), 6x16 (AVX2), 12x32 (AVX-512), one either side of each.
    for (m, n) in [(1, 1), (3, 7), (5, 9), (7, 15), (11, 17), (12, 32), (13, 31), (25, 33), (6, 16)] {
        for k in [1, 2, 9] {
            check(case(m, n, k));
        }
    }
    // Blocks: k across KC = 256 (and its equal split), m across MC = 192, n across NC = 512.
    check(case(5, 33, 257));
    check(case(13, 17, 513));
    check(case(193, 35, 9));
    check(case(7, 513, 5));
    check(case(25, 1041, 3));
}

#[test]
fn transposed_and_strided_operands() {
    for (ta, tb) in [(true, false), (false, true), (true, true)] {
        check(Case { ta, tb, ..case(13, 35, 19) });
        check(Case { ta, tb, ..case(13, 35, 300) });
    }
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        check(Case { ta, tb, pad: 3, ..case(14, 33, 21) });
    }
}

#[test]
fn accumulate_continues_the_chain_from_dst() {
    check(Case { accumulate: true, ..case(13, 33, 17) });
    check(Case { tb: true, pad: 2, accumulate: true, ..case(13, 33, 300) });
    check(Case { accumulate: true, ..case(3, 5, 0) });
    check(case(3, 5, 0));
    // By hand: dst = 1, a = [2, 3], b = [4, 5]: fma(3, 5, fma(2, 4, 1)) = 24.
    let mut dst = [1.0f32];
    by_hand(1, 1, 2, &[2.0, 3.0], &[4.0, 5.0], &mut dst, true);
    assert_eq!(dst, [24.0]);
    // Where continuing the chain differs from adding the product afterwards: dst = 2^24 and
    // a = b = [1, 1]. Each step's 2^24 + 1 is a tie and rounds to even, 2^24; the product added
    // afterwards would give 2^24 + 2.
    let big = 16_777_216.0f32;
    let mut dst = [big];
    by_hand(1, 1, 2, &[1.0, 1.0], &[1.0, 1.0], &mut dst, true);
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
    check_with(case(m, n, k), &a, &b);
    check_with(Case { accumulate: true, ..case(m, n, k) }, &a, &b);
    // By hand: a row of -0 times finite values: fma(-0, 2, fma(-0, 1, +0)) = +0 (the chain
    // starts at +0, and -0 + +0 = +0).
    let mut dst = [f32::NAN];
    by_hand(1, 1, 2, &[-0.0, -0.0], &[1.0, 2.0], &mut dst, false);
    assert_eq!(dst[0].to_bits(), 0.0f32.to_bits());
    // 0 * inf is NaN in its chain only: rows [1, 0] and [1, 1] by the column [1, inf].
    let mut dst = [0.0f32; 2];
    by_hand(2, 1, 2, &[1.0, 0.0, 1.0, 1.0], &[1.0, f32::INFINITY], &mut dst, false);
    assert!(dst[0].is_nan());
    assert_eq!(dst[1], f32::INFINITY);
}
