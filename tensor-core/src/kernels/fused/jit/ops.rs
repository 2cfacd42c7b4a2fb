//! Each elementwise op as vector instructions, written from its scalar function in `math`
//! one operation at a time: the same IEEE operations in the same order (a `mul_add` is one
//! `vfmadd`, every other operation one instruction), each `if` a compare and a blend. Every
//! template reads its operand registers without changing them and returns a new register with
//! the result. The same templates serve AVX-512 and AVX2 (`asm`).

use super::asm::{Asm, Emit, Fma, Op2, R, V};
use crate::math::fastmath::{EXP_HI, EXP_LO, EXP_P, LN2_HI, LN2_LO, LOG2E, ROUND_MAGIC, TANH_CLAMP, TANH_P, TANH_Q, TANH_TINY};
use crate::math::{BinaryOp, UnaryOp, GELU_C, GELU_K};

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
        UnaryOp::Neg => bitwise(e, Op2::Xor, x, SIGN),
        UnaryOp::Abs => bitwise(e, Op2::And, x, MAGNITUDE),
        UnaryOp::Relu => relu(e, x),
        UnaryOp::Sign => sign(e, x),
        UnaryOp::Sqrt => {
            let d = e.take()?;
            e.sqrt(d, x)?;
            Some(d)
        }
        UnaryOp::Exp => exp(e, x),
        UnaryOp::Tanh => tanh(e, x),
        UnaryOp::Sigmoid => sigmoid(e, x),
        UnaryOp::GeluTanh => gelu_tanh(e, x),
        _ => None,
    }
}

/// `b(x, y)`.
pub(super) fn binary(e: &mut Asm, b: BinaryOp, x: R, y: R) -> Emit<R> {
    let op = match b {
        // Given two NaNs the CPU returns its first source's, which is what `Num::add` and
        // `Num::mul` define (`self`'s NaN): `x` goes first.
        BinaryOp::Add => Op2::Add,
        BinaryOp::Sub => Op2::Sub,
        BinaryOp::Mul => Op2::Mul,
        BinaryOp::Div => Op2::Div,
        BinaryOp::Maximum => return keep_x_if(e, x, y, GE),
        BinaryOp::Minimum => return keep_x_if(e, x, y, LE),
        BinaryOp::Pow | BinaryOp::Fmod => return None,
    };
    let d = e.take()?;
    e.op2(op, d, x, V::Reg(y))?;
    Some(d)
}

/// `Num::maximum` (`pred` GE) and `Num::minimum` (LE): `if x.is_nan() || x PRED y { x } else { y }`.
fn keep_x_if(e: &mut Asm, x: R, y: R, pred: i32) -> Emit<R> {
    let m = e.cmp(x, V::Reg(x), UNORDERED)?;
    let ordered = e.cmp(x, V::Reg(y), pred)?;
    e.or_masks(m, ordered)?;
    let d = e.copy(y)?;
    e.blend(d, m, V::Reg(x))?;
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
    let b = e.c(bound);
    let m = e.cmp(d, b, pred)?;
    let v = e.c(value);
    e.blend(d, m, v)
}

/// `x ^ bits` (negation) or `x & bits` (absolute value).
fn bitwise(e: &mut Asm, op: Op2, x: R, bits: u32) -> Emit<R> {
    let d = e.take()?;
    e.op2(op, d, x, V::Const(bits))?;
    Some(d)
}

/// `Num::relu`: `if x > 0 || x.is_nan() { x } else { 0 }`.
fn relu(e: &mut Asm, x: R) -> Emit<R> {
    let zero = e.c(0.0);
    let m = e.cmp(x, zero, NLE_OR_NAN)?;
    let d = e.take()?;
    e.keep_or_zero(d, m, x)?;
    Some(d)
}

/// `Num::sign` for floats: `if x > 0 { 1 } else if x < 0 { -1 } else { x }`.
fn sign(e: &mut Asm, x: R) -> Emit<R> {
    let d = e.copy(x)?;
    set_if(e, d, GT, 0.0, 1.0)?;
    let zero = e.c(0.0);
    let m = e.cmp(x, zero, LT)?;
    let minus = e.c(-1.0);
    e.blend(d, m, minus)?;
    Some(d)
}

/// `p = c[0]`, then `p = p * x + c[i]` (`fastmath::horner`).
fn horner(e: &mut Asm, c: &[f32], x: R) -> Emit<R> {
    let p = e.load_c(c[0])?;
    for &ci in &c[1..] {
        let ci = e.c(ci);
        e.fma(Fma::MulAdd, p, x, ci)?;
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
    let magic = e.c(ROUND_MAGIC);
    e.fma(Fma::MulAdd, kf, xc, magic)?;
    // ki = kf.to_bits() - ROUND_MAGIC.to_bits(); k = kf - ROUND_MAGIC
    let ki = e.take()?;
    e.op2(Op2::SubI, ki, kf, V::Const(ROUND_MAGIC.to_bits()))?;
    e.op2(Op2::Sub, kf, kf, magic)?;
    // r = (-k) * LN2_LO + ((-k) * LN2_HI + xc), as -(k * c) + y: the same rounding, and
    // the form the compiler gives the eager loop (`vfnmadd`, which does not flip a NaN's
    // sign), so a NaN comes out with the eager loop's sign.
    let hi = e.load_c(LN2_HI)?;
    e.fma(Fma::NegMulAdd, hi, kf, V::Reg(xc))?;
    let r = e.load_c(LN2_LO)?;
    e.fma(Fma::NegMulAdd, r, kf, V::Reg(hi))?;
    e.give(hi);
    e.give(xc);
    e.give(kf);
    let p = horner(e, &EXP_P, r)?;
    // y = p * (r * r) + r + 1
    let rr = e.take()?;
    e.op2(Op2::Mul, rr, r, V::Reg(r))?;
    e.fma(Fma::MulAdd, p, rr, V::Reg(r))?;
    e.give(rr);
    e.give(r);
    let one = e.c(1.0);
    e.op2(Op2::Add, p, p, one)?;
    // y * 2^k through the exponent bits
    e.shift_left(ki, ki, 23)?;
    e.op2(Op2::AddI, p, p, V::Reg(ki))?;
    e.give(ki);
    // the ends of the range, tested on x itself
    let (hi, inf) = (e.c(EXP_HI), e.c(f32::INFINITY));
    let m = e.cmp(x, hi, GT)?;
    e.blend(p, m, inf)?;
    let (lo, zero) = (e.c(EXP_LO), e.c(0.0));
    let m = e.cmp(x, lo, LT)?;
    e.blend(p, m, zero)?;
    Some(p)
}

/// `fastmath::tanh_f32`.
fn tanh(e: &mut Asm, x: R) -> Emit<R> {
    let xc = e.copy(x)?;
    set_if(e, xc, LT, -TANH_CLAMP, -TANH_CLAMP)?;
    set_if(e, xc, GT, TANH_CLAMP, TANH_CLAMP)?;
    let x2 = e.take()?;
    e.op2(Op2::Mul, x2, xc, V::Reg(xc))?;
    let p = horner(e, &TANH_P, x2)?;
    let q = horner(e, &TANH_Q, x2)?;
    e.give(x2);
    // t = xc * p / q
    e.op2(Op2::Mul, p, xc, V::Reg(p))?;
    e.op2(Op2::Div, p, p, V::Reg(q))?;
    e.give(q);
    e.give(xc);
    // if |x| > CLAMP { if x > 0 { 1 } else { -1 } } else { t }
    let abs = bitwise(e, Op2::And, x, MAGNITUDE)?;
    let one = e.load_c(-1.0)?;
    let zero = e.c(0.0);
    let positive = e.cmp(x, zero, GT)?;
    let plus = e.c(1.0);
    e.blend(one, positive, plus)?;
    let clamp = e.c(TANH_CLAMP);
    let beyond = e.cmp(abs, clamp, GT)?;
    e.blend(p, beyond, V::Reg(one))?;
    e.give(one);
    // if |x| < TINY { x } else { t }
    let tiny = e.c(TANH_TINY);
    let small = e.cmp(abs, tiny, LT)?;
    e.blend(p, small, V::Reg(x))?;
    e.give(abs);
    Some(p)
}

/// `fastmath::sigmoid_f32`: `1 / (1 + exp(-x))`.
fn sigmoid(e: &mut Asm, x: R) -> Emit<R> {
    let neg = bitwise(e, Op2::Xor, x, SIGN)?;
    let ex = exp(e, neg)?;
    e.give(neg);
    let one = e.c(1.0);
    e.op2(Op2::Add, ex, ex, one)?;
    let d = e.load_c(1.0)?;
    e.op2(Op2::Div, d, d, V::Reg(ex))?;
    e.give(ex);
    Some(d)
}

/// `Float::gelu_tanh` for f32: `0.5 * x * (1 + tanh((x + C * x * x * x) * K))`.
fn gelu_tanh(e: &mut Asm, x: R) -> Emit<R> {
    let t = e.take()?;
    let c = e.c(GELU_C as f32);
    e.op2(Op2::Mul, t, x, c)?;
    e.op2(Op2::Mul, t, t, V::Reg(x))?;
    e.op2(Op2::Mul, t, t, V::Reg(x))?;
    e.op2(Op2::Add, t, x, V::Reg(t))?;
    let k = e.c(GELU_K as f32);
    e.op2(Op2::Mul, t, t, k)?;
    let th = tanh(e, t)?;
    e.give(t);
    let one = e.c(1.0);
    e.op2(Op2::Add, th, th, one)?;
    let d = e.take()?;
    let half = e.c(0.5);
    e.op2(Op2::Mul, d, x, half)?;
    e.op2(Op2::Mul, d, d, V::Reg(th))?;
    e.give(th);
    Some(d)
}
