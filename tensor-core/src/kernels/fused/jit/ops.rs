//! Each elementwise op as AVX-512 instructions, written from its scalar function in `math`
//! one operation at a time: the same IEEE operations in the same order (a `mul_add` is one
//! `vfmadd`, every other operation one instruction), each `if` a compare and a masked move.
//! Every template reads its operand registers without changing them and returns a new
//! register with the result.

use super::asm::{with_src, z, Asm, Emit, R};
use crate::math::fastmath::{EXP_HI, EXP_LO, EXP_P, LN2_HI, LN2_LO, LOG2E, ROUND_MAGIC, TANH_CLAMP, TANH_P, TANH_Q, TANH_TINY};
use crate::math::{BinaryOp, UnaryOp};
use crate::math::{GELU_C, GELU_K};
use iced_x86::code_asm::*;

// Compare predicates (ordered ones are false when either side is NaN).
const LT: i32 = 0x11;
const LE: i32 = 0x12;
const GT: i32 = 0x1E;
const GE: i32 = 0x1D;
const UNORDERED: i32 = 0x03;
/// Not less-or-equal, true when unordered: `x > 0 || x.is_nan()`.
const NLE_OR_NAN: i32 = 0x06;

const SIGN: u32 = 0x8000_0000;
const MAGNITUDE: u32 = 0x7fff_ffff;

/// True when the op has a template.
pub(super) fn unary_supported(u: UnaryOp) -> bool {
    matches!(
        u,
        UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Relu
            | UnaryOp::Sign
            | UnaryOp::Sqrt
            | UnaryOp::Exp
            | UnaryOp::Tanh
            | UnaryOp::Sigmoid
            | UnaryOp::GeluTanh
    )
}

/// True when the op has a template.
pub(super) fn binary_supported(b: BinaryOp) -> bool {
    matches!(b, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Maximum | BinaryOp::Minimum)
}

/// `u(x)`.
pub(super) fn unary(e: &mut Asm, u: UnaryOp, x: R) -> Emit<R> {
    match u {
        UnaryOp::Neg => bitwise(e, x, SIGN, false),
        UnaryOp::Abs => bitwise(e, x, MAGNITUDE, true),
        UnaryOp::Relu => relu(e, x),
        UnaryOp::Sign => sign(e, x),
        UnaryOp::Sqrt => {
            let d = e.take()?;
            e.a.vsqrtps(z(d), z(x)).ok()?;
            Some(d)
        }
        UnaryOp::Exp => exp(e, x),
        UnaryOp::Tanh => tanh(e, x),
        UnaryOp::Sigmoid => sigmoid(e, x),
        UnaryOp::GeluTanh => gelu_tanh(e, x),
        _ => None,
    }
}

/// `b(x, y)` for registers.
pub(super) fn binary(e: &mut Asm, b: BinaryOp, x: R, y: R) -> Emit<R> {
    let d = e.take()?;
    match b {
        // Given two NaNs the CPU returns its first source's, which is what `Num::add` and
        // `Num::mul` define (`self`'s NaN): `x` goes first.
        BinaryOp::Add => e.a.vaddps(z(d), z(x), z(y)).ok()?,
        BinaryOp::Sub => e.a.vsubps(z(d), z(x), z(y)).ok()?,
        BinaryOp::Mul => e.a.vmulps(z(d), z(x), z(y)).ok()?,
        BinaryOp::Div => e.a.vdivps(z(d), z(x), z(y)).ok()?,
        BinaryOp::Maximum | BinaryOp::Minimum => {
            // `if x.is_nan() || x >= y { x } else { y }` (`<=` for the minimum).
            let keep_x = if b == BinaryOp::Maximum { GE } else { LE };
            e.a.vcmpps(k1, z(x), z(x), UNORDERED).ok()?;
            e.a.vcmpps(k2, z(x), z(y), keep_x).ok()?;
            e.a.korw(k1, k1, k2).ok()?;
            e.a.vblendmps(z(d).k1(), z(y), z(x)).ok()?;
        }
        BinaryOp::Pow => return None,
    }
    Some(d)
}

/// `x` limited to `[lo, hi]` as `math::clamp_value` does: `if x < lo { lo }`, then
/// `if x > hi { hi }` (a NaN stays NaN).
pub(super) fn clamp(e: &mut Asm, x: R, lo: Option<f32>, hi: Option<f32>) -> Emit<R> {
    let d = e.copy(x)?;
    if let Some(lo) = lo {
        set_if(e, d, LT, lo, lo)?;
    }
    if let Some(hi) = hi {
        set_if(e, d, GT, hi, hi)?;
    }
    Some(d)
}

/// `d = if d PRED bound { value } else { d }`.
fn set_if(e: &mut Asm, d: R, pred: i32, bound: f32, value: f32) -> Emit<()> {
    with_src!(e.c(bound), |s| e.a.vcmpps(k1, z(d), s, pred)).ok()?;
    with_src!(e.c(value), |s| e.a.vblendmps(z(d).k1(), z(d), s)).ok()?;
    Some(())
}

/// `x ^ bits` (negation), or `x & bits` with `and` (absolute value).
fn bitwise(e: &mut Asm, x: R, bits: u32, and: bool) -> Emit<R> {
    let d = e.take()?;
    let s = e.bits(bits);
    if and {
        with_src!(s, |s| e.a.vpandd(z(d), z(x), s)).ok()?;
    } else {
        with_src!(s, |s| e.a.vpxord(z(d), z(x), s)).ok()?;
    }
    Some(d)
}

/// `Num::relu`: `if x > 0 || x.is_nan() { x } else { 0 }`.
fn relu(e: &mut Asm, x: R) -> Emit<R> {
    let d = e.take()?;
    with_src!(e.c(0.0), |s| e.a.vcmpps(k1, z(x), s, NLE_OR_NAN)).ok()?;
    e.a.vmovaps(z(d).k1().z(), z(x)).ok()?;
    Some(d)
}

/// `Num::sign` for floats: `if x > 0 { 1 } else if x < 0 { -1 } else { x }`.
fn sign(e: &mut Asm, x: R) -> Emit<R> {
    let d = e.copy(x)?;
    set_if(e, d, GT, 0.0, 1.0)?;
    with_src!(e.c(0.0), |s| e.a.vcmpps(k1, z(x), s, LT)).ok()?;
    with_src!(e.c(-1.0), |s| e.a.vblendmps(z(d).k1(), z(d), s)).ok()?;
    Some(d)
}

/// `p = c[0]`, then `p = p * x + c[i]` (`fastmath::horner`).
fn horner(e: &mut Asm, c: &[f32], x: R) -> Emit<R> {
    let p = e.load_c(c[0])?;
    for &ci in &c[1..] {
        with_src!(e.c(ci), |s| e.a.vfmadd213ps(z(p), z(x), s)).ok()?;
    }
    Some(p)
}

/// `fastmath::exp_f32`.
fn exp(e: &mut Asm, x: R) -> Emit<R> {
    let xc = e.copy(x)?;
    set_if(e, xc, LT, EXP_LO, EXP_LO)?;
    set_if(e, xc, GT, EXP_HI, EXP_HI)?;
    // kf = xc * LOG2E + ROUND_MAGIC
    let kf = e.load_c(LOG2E)?;
    with_src!(e.c(ROUND_MAGIC), |s| e.a.vfmadd213ps(z(kf), z(xc), s)).ok()?;
    // ki = kf.to_bits() - ROUND_MAGIC.to_bits(); k = kf - ROUND_MAGIC
    let ki = e.take()?;
    with_src!(e.bits(ROUND_MAGIC.to_bits()), |s| e.a.vpsubd(z(ki), z(kf), s)).ok()?;
    with_src!(e.c(ROUND_MAGIC), |s| e.a.vsubps(z(kf), z(kf), s)).ok()?;
    // r = (-k) * LN2_LO + ((-k) * LN2_HI + xc), as -(k * c) + y: the same rounding, and
    // the form the compiler gives the eager loop (`vfnmadd`, which does not flip a NaN's
    // sign), so a NaN comes out with the eager loop's sign.
    let hi = e.load_c(LN2_HI)?;
    e.a.vfnmadd213ps(z(hi), z(kf), z(xc)).ok()?;
    let r = e.load_c(LN2_LO)?;
    e.a.vfnmadd213ps(z(r), z(kf), z(hi)).ok()?;
    e.give(hi);
    e.give(xc);
    e.give(kf);
    let p = horner(e, &EXP_P, r)?;
    // y = p * (r * r) + r + 1
    let rr = e.take()?;
    e.a.vmulps(z(rr), z(r), z(r)).ok()?;
    e.a.vfmadd213ps(z(p), z(rr), z(r)).ok()?;
    e.give(rr);
    e.give(r);
    with_src!(e.c(1.0), |s| e.a.vaddps(z(p), z(p), s)).ok()?;
    // y * 2^k through the exponent bits
    e.a.vpslld(z(ki), z(ki), 23).ok()?;
    e.a.vpaddd(z(p), z(p), z(ki)).ok()?;
    e.give(ki);
    // the ends of the range, tested on x itself
    with_src!(e.c(EXP_HI), |s| e.a.vcmpps(k1, z(x), s, GT)).ok()?;
    with_src!(e.c(f32::INFINITY), |s| e.a.vblendmps(z(p).k1(), z(p), s)).ok()?;
    with_src!(e.c(EXP_LO), |s| e.a.vcmpps(k1, z(x), s, LT)).ok()?;
    with_src!(e.c(0.0), |s| e.a.vblendmps(z(p).k1(), z(p), s)).ok()?;
    Some(p)
}

/// `fastmath::tanh_f32`.
fn tanh(e: &mut Asm, x: R) -> Emit<R> {
    let xc = e.copy(x)?;
    set_if(e, xc, LT, -TANH_CLAMP, -TANH_CLAMP)?;
    set_if(e, xc, GT, TANH_CLAMP, TANH_CLAMP)?;
    let x2 = e.take()?;
    e.a.vmulps(z(x2), z(xc), z(xc)).ok()?;
    let p = horner(e, &TANH_P, x2)?;
    let q = horner(e, &TANH_Q, x2)?;
    e.give(x2);
    // t = xc * p / q
    e.a.vmulps(z(p), z(xc), z(p)).ok()?;
    e.a.vdivps(z(p), z(p), z(q)).ok()?;
    e.give(q);
    e.give(xc);
    // if |x| > CLAMP { if x > 0 { 1 } else { -1 } } else { t }
    let abs = bitwise(e, x, MAGNITUDE, true)?;
    let one = e.load_c(-1.0)?;
    with_src!(e.c(0.0), |s| e.a.vcmpps(k2, z(x), s, GT)).ok()?;
    with_src!(e.c(1.0), |s| e.a.vblendmps(z(one).k2(), z(one), s)).ok()?;
    with_src!(e.c(TANH_CLAMP), |s| e.a.vcmpps(k1, z(abs), s, GT)).ok()?;
    e.a.vblendmps(z(p).k1(), z(p), z(one)).ok()?;
    e.give(one);
    // if |x| < TINY { x } else { t }
    with_src!(e.c(TANH_TINY), |s| e.a.vcmpps(k1, z(abs), s, LT)).ok()?;
    e.a.vblendmps(z(p).k1(), z(p), z(x)).ok()?;
    e.give(abs);
    Some(p)
}

/// `fastmath::sigmoid_f32`: `1 / (1 + exp(-x))`.
fn sigmoid(e: &mut Asm, x: R) -> Emit<R> {
    let neg = bitwise(e, x, SIGN, false)?;
    let ex = exp(e, neg)?;
    e.give(neg);
    with_src!(e.c(1.0), |s| e.a.vaddps(z(ex), z(ex), s)).ok()?;
    let d = e.load_c(1.0)?;
    e.a.vdivps(z(d), z(d), z(ex)).ok()?;
    e.give(ex);
    Some(d)
}

/// `Float::gelu_tanh` for f32: `0.5 * x * (1 + tanh((x + C * x * x * x) * K))`.
fn gelu_tanh(e: &mut Asm, x: R) -> Emit<R> {
    let t = e.take()?;
    with_src!(e.c(GELU_C as f32), |s| e.a.vmulps(z(t), z(x), s)).ok()?;
    e.a.vmulps(z(t), z(t), z(x)).ok()?;
    e.a.vmulps(z(t), z(t), z(x)).ok()?;
    e.a.vaddps(z(t), z(x), z(t)).ok()?;
    with_src!(e.c(GELU_K as f32), |s| e.a.vmulps(z(t), z(t), s)).ok()?;
    let th = tanh(e, t)?;
    e.give(t);
    with_src!(e.c(1.0), |s| e.a.vaddps(z(th), z(th), s)).ok()?;
    let d = e.take()?;
    with_src!(e.c(0.5), |s| e.a.vmulps(z(d), z(x), s)).ok()?;
    e.a.vmulps(z(d), z(d), z(th)).ok()?;
    e.give(th);
    Some(d)
}

/// A constant as a register operand (for the ops whose first source must be one).
pub(super) fn constant(e: &mut Asm, v: f32) -> Emit<R> {
    e.load_c(v)
}
