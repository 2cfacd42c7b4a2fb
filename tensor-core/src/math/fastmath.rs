//! Fast f32 `exp`, `tanh` and `sigmoid`, written without branches (selects only) so that
//! loops over them vectorize. Accuracy (checked by the tests below against f64 over
//! [-100, 100] in steps of 0.001): `exp` within 2 ulp over its range (results below 2^-126
//! flush to 0); `tanh` within 8 ulp (5e-7 absolute, the worst near |x| = 5.9), exactly x
//! for |x| < 4e-4 and ±1 beyond ±7.9; `sigmoid` within 4e-7 absolute.
//!
//! `exp` is the classic Cephes algorithm: reduce `x = k ln2 + r` with a two-part ln2
//! (Cody-Waite), evaluate a degree-6 polynomial in `r`, scale by `2^k` through the exponent
//! bits. `tanh` is the odd rational approximation XLA and Eigen use for f32 (one division, no
//! `exp`), so its results match theirs in accuracy.
//!
//! Polynomials are evaluated with fused multiply-adds (`mul_add`: one rounding each, so one
//! `vfmadd` per step in the AVX2+FMA loops). `mul_add` is correctly rounded on every target
//! (the C library's `fma` where the CPU has none), so every loop that calls these functions
//! gives the same bits — see `kernels::simd`.

// The constants are crate-visible because the fused-program code generator
// (`kernels::fused::jit`) emits these functions instruction by instruction with them.
pub(crate) const LOG2E: f32 = std::f32::consts::LOG2_E;
pub(crate) const LN2_HI: f32 = 0.693_359_4;
pub(crate) const LN2_LO: f32 = -2.121_944_4e-4;
/// Above this, exp overflows f32.
pub(crate) const EXP_HI: f32 = 88.722_83;
/// Below this, exp is under 2^-126 and is flushed to zero (the smallest f32 whose exp is not).
pub(crate) const EXP_LO: f32 = -87.336_54;
/// Adding and subtracting 1.5 * 2^23 rounds an f32 of magnitude < 2^22 to the nearest integer.
pub(crate) const ROUND_MAGIC: f32 = 12_582_912.0;
/// exp's polynomial in `r`, highest degree first (Horner with `mul_add`).
pub(crate) const EXP_P: [f32; 6] = [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5e-1];
/// tanh's numerator and denominator polynomials in `x^2`, highest degree first.
pub(crate) const TANH_P: [f32; 7] = [-2.760_768_5e-16, 2.000_188e-13, -8.604_672e-11, 5.122_297e-8, 1.485_722_4e-5, 6.372_619_3e-4, 4.893_524_6e-3];
pub(crate) const TANH_Q: [f32; 4] = [1.198_258_4e-6, 1.185_347e-4, 2.268_434_6e-3, 4.893_525e-3];
/// Beyond ±this, tanh is ±1 in f32.
pub(crate) const TANH_CLAMP: f32 = 7.905_311;
/// Below this |x|, tanh(x) rounds to x.
pub(crate) const TANH_TINY: f32 = 0.000_4;

/// `c[0]`, then `p * x + c[i]` for each further coefficient (one rounding each).
#[inline(always)]
fn horner(c: &[f32], x: f32) -> f32 {
    let mut p = c[0];
    for &ci in &c[1..] {
        p = p.mul_add(x, ci);
    }
    p
}

/// exp's reduction: `x` clamped to exp's range, then `x = k ln2 + r` with a two-part ln2
/// (Cody-Waite); returns `r` and `k`. Shared with the GPU's fast `exp` (its model in
/// `cuda/fast_math/bounds.rs`), which evaluates `e^r` otherwise.
#[inline(always)]
pub(crate) fn exp_reduce(x: f32) -> (f32, i32) {
    // Selects rather than `clamp` (which must keep NaN and compiles to scalar code); a NaN
    // passes through both and through the arithmetic below.
    let xc = if x < EXP_LO { EXP_LO } else { x };
    let xc = if xc > EXP_HI { EXP_HI } else { xc };
    // k = round(x / ln 2): the rounded value sits in the low mantissa bits of `kf`, which also
    // gives k as an integer without a (saturating, slow) float-to-int conversion.
    let kf = xc.mul_add(LOG2E, ROUND_MAGIC);
    let ki = kf.to_bits() as i32 - ROUND_MAGIC.to_bits() as i32;
    let k = kf - ROUND_MAGIC;
    ((-k).mul_add(LN2_LO, (-k).mul_add(LN2_HI, xc)), ki)
}

/// `y = e^r` scaled by `2^k` into e^x, then exp's ends: inf above its range, 0 below.
#[inline(always)]
pub(crate) fn exp_scale(y: f32, ki: i32, x: f32) -> f32 {
    // y * 2^k by adding k to y's exponent bits: exact while the result is a normal number,
    // which the clamp ensures (at k = 128, xc <= EXP_HI makes r < 0 and y < 1; at k = -126,
    // xc >= EXP_LO makes r >= 0 and y >= 1) — two integer ops instead of two multiplies.
    let y = f32::from_bits((y.to_bits() as i32).wrapping_add(ki << 23) as u32);
    let y = if x > EXP_HI { f32::INFINITY } else { y };
    if x < EXP_LO {
        0.0
    } else {
        y
    }
}

/// e^x for f32.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    let (r, ki) = exp_reduce(x);
    let p = horner(&EXP_P, r);
    exp_scale(p.mul_add(r * r, r) + 1.0, ki, x)
}

/// tanh(x) for f32: an odd rational approximation `x P(x^2) / Q(x^2)` on [-7.9, 7.9]
/// (beyond, tanh is ±1 in f32), with one division and no `exp` — the form Eigen and XLA use.
#[inline(always)]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    tanh_by(x, |n, q| n / q)
}

/// [`tanh_f32`] with its one quotient `x P / Q` taken by `div` (the GPU's fast `tanh` takes
/// it with an approximate reciprocal; its model in `cuda/fast_math/bounds.rs`).
#[inline(always)]
pub(crate) fn tanh_by(x: f32, div: impl Fn(f32, f32) -> f32) -> f32 {
    const CLAMP: f32 = TANH_CLAMP;
    const TINY: f32 = TANH_TINY;
    let xc = if x < -CLAMP { -CLAMP } else { x };
    let xc = if xc > CLAMP { CLAMP } else { xc };
    let x2 = xc * xc;
    let p = horner(&TANH_P, x2);
    let q = horner(&TANH_Q, x2);
    let t = div(xc * p, q);
    // Beyond the clamp, exactly ±1 (the rational is a few ulp short of it there).
    let t = if x.abs() > CLAMP {
        if x > 0.0 {
            1.0
        } else {
            -1.0
        }
    } else {
        t
    };
    if x.abs() < TINY {
        x
    } else {
        t
    }
}

/// The logistic sigmoid 1 / (1 + e^-x) for f32.
#[inline(always)]
pub(crate) fn sigmoid_f32(x: f32) -> f32 {
    1.0 / (1.0 + exp_f32(-x))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f64) -> f64 {
        let b32 = b as f32;
        let ulp = (f32::from_bits(b32.abs().to_bits() + 1) - b32.abs()) as f64;
        (a as f64 - b).abs() / ulp
    }

    fn sweep() -> impl Iterator<Item = f32> {
        (0..200_001).map(|i| -100.0 + i as f32 * 0.001)
    }

    #[test]
    fn exp_is_within_two_ulp() {
        let mut worst = 0.0f64;
        for x in sweep().filter(|&x| x > EXP_LO && x < EXP_HI) {
            worst = worst.max(ulps(exp_f32(x), (x as f64).exp()));
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
    }

    /// Every f32 in the windows where the exponent-bits scaling meets the ends of the normal
    /// range, and every 4099th f32 across the rest: within 2 ulp of the f64 result, never NaN.
    #[test]
    fn exp_scaling_is_exact_at_the_ends_of_its_range() {
        let floats = |lo: f32, hi: f32, step: usize| {
            let (a, b) = (lo.to_bits(), hi.to_bits());
            let (a, b) = (a.min(b), a.max(b));
            (a..=b).step_by(step).map(f32::from_bits)
        };
        let edges = floats(EXP_LO, EXP_LO + 0.01, 1).chain(floats(EXP_HI - 0.01, EXP_HI, 1));
        let all = floats(-0.0, EXP_LO, 4099).chain(floats(0.0, EXP_HI, 4099));
        for x in edges.chain(all) {
            let (got, want) = (exp_f32(x), (x as f64).exp());
            assert!(got.is_finite() && got >= f32::MIN_POSITIVE, "exp({x}) = {got}");
            assert!(ulps(got, want) <= 2.0, "exp({x}) = {got}, {} ulp from {want}", ulps(got, want));
        }
    }

    #[test]
    fn exp_handles_edges() {
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(100.0), f32::INFINITY);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(-100.0), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
        assert!(exp_f32(88.7).is_finite());
    }

    #[test]
    fn tanh_and_sigmoid_are_accurate() {
        for x in sweep().map(|x| x / 5.0) {
            let t = (x as f64).tanh();
            let s = 1.0 / (1.0 + (-(x as f64)).exp());
            assert!((tanh_f32(x) as f64 - t).abs() <= 5e-7 && ulps(tanh_f32(x), t) <= 8.0 || t.abs() < 1e-30, "tanh({x})");
            assert!((sigmoid_f32(x) as f64 - s).abs() <= 4e-7, "sigmoid({x})");
        }
        assert_eq!(tanh_f32(30.0), 1.0);
        assert_eq!(tanh_f32(-30.0), -1.0);
        assert_eq!(tanh_f32(0.0), 0.0);
        assert_eq!(sigmoid_f32(-200.0), 0.0);
        assert_eq!(sigmoid_f32(200.0), 1.0);
    }
}
