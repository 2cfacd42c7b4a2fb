//! `depthwise_rows`' plane for CPUs with AVX-512 (where `depthwise_rows` runs at all: AMD's
//! Zen 4, whose AVX-512 has AVX2's rate, so the tile level there is AVX2): the same 3x3
//! depthwise forward pass, reading the input rows where they lie, with AVX-512's 32 registers
//! and mask registers on vectors of 8.
//!
//! With AVX2's 16 registers `depthwise_rows`' block of eight output rows spills, its loads at
//! a row's edges are slow masked moves, and at stride 2 splitting 16 columns into their even
//! and odd ones takes two shuffles per tap vector, one across the register's halves. Its
//! plane took ~11 cycles a vector of 8 outputs at stride 1 and ~29 at stride 2, for 9
//! multiply-adds (4.5 cycles at the FMA peak). Also, output row `r`'s taps read input rows
//! `r` to `r + 2`, so as a block goes down its input rows only about three rows' chains of
//! fused multiply-adds are under way at once: too few to cover the instruction's latency.
//!
//! Here, at stride 1, a block is 6 output rows by 2 vectors (about six chains under way), at
//! stride 2 it is 8 rows by 1 vector. Accumulators, the 9 weights and the taps stay in the 32
//! registers. A vector whose taps reach past a row's ends loads with masks (its lanes outside
//! the row read nothing and give zeros); a row of padding reads a row of zeros. At stride 2 a
//! two-source permute (`vpermt2ps`) takes the even or odd columns of 16 in one instruction.
//! Alone on one Zen 4 core (`depthwise_rows::tests::timing`): ~7 cycles a vector at stride
//! 1 and ~14 at stride 2 on MobileNetV2's large planes. Blocks written in C the same way ran
//! at 5.0 and 9.0; vectors of 16 ran slower there (7.2 and 9.0).
//!
//! **The bits are `depthwise_rows`' and the general path's**: each output a chain of fused
//! multiply-adds over the taps in `(ki, kj)` order from +0, a padding tap as `fma(w, 0, s)`,
//! then the bias added.
#![cfg(target_arch = "x86_64")]

use super::clamp::Clamp;
use std::arch::x86_64::*;

/// Outputs of one vector.
const LANES: usize = 8;
/// Input rows a block reads at most: `(8 - 1) * 2 + 3`, stride 2's.
const INPUT_ROWS: usize = 17;

/// One output plane `out` `[oh, ow]` of input plane `x` `[h, w]` and the 9 taps of its
/// filter at stride `S` (1 or 2), plus `bias` (not NaN): the output size of a 3x3 kernel at
/// stride `S` with padding `pad` of at most 2. `zeros` (at least `w` of them) stands for a row
/// of padding.
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512VL.
///
/// # Panics
/// If the sizes disagree (a caller's bug).
#[target_feature(enable = "avx512f,avx512vl")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn plane<const S: usize>(
    x: &[f32],
    h: usize,
    w: usize,
    pad: [usize; 2],
    taps: &[f32; 9],
    bias: Option<f32>,
    clamp: Option<Clamp>,
    out: &mut [f32],
    oh: usize,
    ow: usize,
    zeros: &[f32],
) {
    let outputs = |n: usize, p: usize| (n + 2 * p).checked_sub(3).map(|d| d / S + 1);
    let sizes = x.len() == h * w && out.len() == oh * ow && outputs(h, pad[0]) == Some(oh) && outputs(w, pad[1]) == Some(ow);
    assert!(sizes && zeros.len() >= w && (S == 1 || S == 2) && pad[0] <= 2 && pad[1] <= 2, "a plane's sizes");
    debug_assert!(zeros[..w].iter().all(|&z| z.to_bits() == 0), "a row of +0 for the padding");
    let wv = taps.map(|t| _mm256_set1_ps(t));
    // The permutes' indices (see `split`).
    let split = [_mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14), _mm256_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15)];
    let rows_per_block = if S == 1 { 6 } else { 8 };
    let mut oi = 0;
    while oi < oh {
        let rows = rows_per_block.min(oh - oi);
        // The input rows the block reads: a row of padding reads `zeros`.
        let mut input = [zeros.as_ptr(); INPUT_ROWS];
        for (t, r) in input.iter_mut().enumerate().take((rows - 1) * S + 3) {
            let row = (oi * S + t) as isize - pad[0] as isize;
            if row >= 0 && row < h as isize {
                *r = x[row as usize * w..].as_ptr();
            }
        }
        let block = Block { input: &input, split, w, wv: &wv, bias, clamp, o: out[oi * ow..].as_mut_ptr(), ow };
        let step = if S == 1 { 2 * LANES } else { LANES };
        for oj in (0..ow).step_by(step) {
            let col = (S * oj) as isize - pad[1] as isize;
            let pair = oj + LANES < ow;
            // Vectors whose loads all lie inside the rows take plain loads, the others masked.
            let reach = if S == 1 { 8 * if pair { 2 } else { 1 } + 2 } else { 18 };
            let edge = col < 0 || col as usize + reach > w;
            // SAFETY: the rows' pointers start `w`-long rows of `x` or `zeros`; the block's
            // outputs are rows `oi..oi + rows` of `out` (checked sizes) from column `oj` on.
            unsafe {
                macro_rules! shapes {
                    ($edge:literal) => {
                        match (S, rows, pair) {
                            (1, 6, true) => vectors::<6, 1, 2, $edge>(&block, col, oj),
                            (1, 6, false) => vectors::<6, 1, 1, $edge>(&block, col, oj),
                            (1, 5, true) => vectors::<5, 1, 2, $edge>(&block, col, oj),
                            (1, 5, false) => vectors::<5, 1, 1, $edge>(&block, col, oj),
                            (1, 4, true) => vectors::<4, 1, 2, $edge>(&block, col, oj),
                            (1, 4, false) => vectors::<4, 1, 1, $edge>(&block, col, oj),
                            (1, 3, true) => vectors::<3, 1, 2, $edge>(&block, col, oj),
                            (1, 3, false) => vectors::<3, 1, 1, $edge>(&block, col, oj),
                            (1, 2, true) => vectors::<2, 1, 2, $edge>(&block, col, oj),
                            (1, 2, false) => vectors::<2, 1, 1, $edge>(&block, col, oj),
                            (1, _, true) => vectors::<1, 1, 2, $edge>(&block, col, oj),
                            (1, _, false) => vectors::<1, 1, 1, $edge>(&block, col, oj),
                            (_, 8, _) => vectors::<8, 2, 1, $edge>(&block, col, oj),
                            (_, 7, _) => vectors::<7, 2, 1, $edge>(&block, col, oj),
                            (_, 6, _) => vectors::<6, 2, 1, $edge>(&block, col, oj),
                            (_, 5, _) => vectors::<5, 2, 1, $edge>(&block, col, oj),
                            (_, 4, _) => vectors::<4, 2, 1, $edge>(&block, col, oj),
                            (_, 3, _) => vectors::<3, 2, 1, $edge>(&block, col, oj),
                            (_, 2, _) => vectors::<2, 2, 1, $edge>(&block, col, oj),
                            (_, _, _) => vectors::<1, 2, 1, $edge>(&block, col, oj),
                        }
                    };
                }
                if edge {
                    shapes!(true)
                } else {
                    shapes!(false)
                }
            }
        }
        oi += rows;
    }
}

/// A block of output rows: its input rows (zeros for a row of padding), the permutes'
/// indices, the rows' width, the taps, the bias, its first output and the output rows' width.
struct Block<'a> {
    input: &'a [*const f32; INPUT_ROWS],
    /// The permutes' indices of the even and odd columns of 16 (see `plane`).
    split: [__m256i; 2],
    w: usize,
    wv: &'a [__m256; 9],
    bias: Option<f32>,
    clamp: Option<Clamp>,
    o: *mut f32,
    ow: usize,
}

/// The lanes `l` of the 8 columns `col + l` that lie in `0..w`.
fn inside(col: isize, w: usize) -> u8 {
    let first = (-col).clamp(0, LANES as isize) as u32;
    let last = (w as isize - col).clamp(0, LANES as isize) as u32;
    (((1u32 << last) - 1) & !((1u32 << first) - 1)) as u8
}

/// `R` output rows by `V` vectors of 8 columns from output column `oj` of `block`, whose
/// first output reads its tap (0, 0) at column `col` of `input[0]`; lanes past the row's end
/// are not stored.
///
/// # Safety
/// As [`plane`]: each present row holds `w` values; the block's outputs are `R` rows of `ow`
/// from `o`, and the first vector's columns start inside them.
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
unsafe fn vectors<const R: usize, const S: usize, const V: usize, const EDGE: bool>(block: &Block, col: isize, oj: usize) {
    // Tap kj of column oj + l reads column col + kj + S l. At stride 2: the even columns of
    // the 16 from col (kj = 0), their odd ones (kj = 1), the even ones of the 16 from col + 2,
    // each taken by one two-source permute with `split`'s indices.
    let [evens, odds] = block.split;
    // Where each load of vector v starts, and its lanes inside the row (used with EDGE): at
    // stride 1 the taps' 8 columns from col + kj; at stride 2 the 16 from col and from col +
    // 2, in halves.
    let start = |v: usize, i: usize| col + (S * LANES * v) as isize + if S == 1 { i as isize } else { [0, 8, 2, 10][i] as isize };
    let masks: [[u8; 4]; V] = std::array::from_fn(|v| std::array::from_fn(|i| inside(start(v, i), block.w)));
    let mut acc = [[_mm256_setzero_ps(); V]; R];
    // Written out input row by input row (`t` a literal), so which taps each row feeds is
    // known when compiling and the accumulators stay in registers.
    macro_rules! input_row {
        ($t:literal) => {
            if $t < (R - 1) * S + 3 {
                let p = block.input[$t];
                // At stride 1, keeps the row's loads here, next to its multiply-adds:
                // hoisted to the top of the block, every row's taps were live at once and
                // spilled. (At stride 2 the fence cost 3-20% by layer.)
                if S == 1 {
                    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
                }
                let x: [[__m256; 3]; V] = std::array::from_fn(|v| {
                    // SAFETY: the caller's; without EDGE every load lies inside the row, with
                    // it a masked load reads only its lanes inside.
                    let load = |i: usize| unsafe {
                        if EDGE {
                            _mm256_maskz_loadu_ps(masks[v][i], p.wrapping_offset(start(v, i)))
                        } else {
                            _mm256_loadu_ps(p.offset(start(v, i)))
                        }
                    };
                    if S == 1 {
                        [load(0), load(1), load(2)]
                    } else {
                        let (a, b, c, d) = (load(0), load(1), load(2), load(3));
                        [split(a, evens, b), split(a, odds, b), split(c, evens, d)]
                    }
                });
                // Taking t, then kj, in order gives every output its taps in (ki, kj) order:
                // input row t is row ki = t - S r of output row r's taps.
                for kj in 0..3 {
                    for (r, a) in acc.iter_mut().enumerate() {
                        if $t >= S * r && $t - S * r < 3 {
                            for (a, x) in a.iter_mut().zip(&x) {
                                *a = _mm256_fmadd_ps(block.wv[($t - S * r) * 3 + kj], x[kj], *a);
                            }
                        }
                    }
                }
            }
        };
    }
    input_row!(0);
    input_row!(1);
    input_row!(2);
    input_row!(3);
    input_row!(4);
    input_row!(5);
    input_row!(6);
    input_row!(7);
    input_row!(8);
    input_row!(9);
    input_row!(10);
    input_row!(11);
    input_row!(12);
    input_row!(13);
    input_row!(14);
    input_row!(15);
    input_row!(16);
    const _: () = assert!(INPUT_ROWS == 17, "one input_row! per input row a block reads");
    for (r, a) in acc.iter().enumerate() {
        for (v, &a) in a.iter().enumerate() {
            let oj = oj + LANES * v;
            let cols = (block.ow - oj).min(LANES);
            let a = match block.bias {
                Some(b) => _mm256_add_ps(a, _mm256_set1_ps(b)),
                None => a,
            };
            // SAFETY: AVX-512F implies AVX.
            let a = block.clamp.map_or(a, |c| unsafe { c.ymm(a) });
            let at = block.o.wrapping_add(r * block.ow + oj);
            // SAFETY: the first `cols` columns of row `r` from `oj` are the block's outputs.
            unsafe {
                if cols == LANES {
                    _mm256_storeu_ps(at, a);
                } else {
                    _mm256_mask_storeu_ps(at, ((1u32 << cols) - 1) as u8, a);
                }
            }
        }
    }
}

/// `_mm256_permutex2var_ps(a, idx, b)`, as one `vpermt2ps` whatever the compiler knows of
/// its operands. Through the intrinsic, it turned each permute with constant indices into a
/// shuffle and a permute across the register's halves (MobileNetV2's stride-2 layers took
/// 7-14% longer alone), and with indices hidden from it, the permutes of two loads side by
/// side into one 16-lane load and 16-lane permutes (AVX-512's 16-lane permutes take two
/// passes on Zen 4): 96 channels at 112x112 took 184 us instead of 166.
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
fn split(a: __m256, idx: __m256i, b: __m256) -> __m256 {
    let mut r = a;
    // SAFETY: the instruction reads registers only.
    unsafe {
        std::arch::asm!("vpermt2ps {r:y}, {i:y}, {b:y}", r = inout(zmm_reg) r, i = in(zmm_reg) idx, b = in(zmm_reg) b, options(pure, nomem, nostack))
    };
    r
}
