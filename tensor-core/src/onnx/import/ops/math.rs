//! Elementwise ops, activations composed from them, casts and reductions.

use super::{one, Ctx};
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::Tensor;

/// A 0-d tensor of `v` in `like`'s dtype (broadcasts against anything).
pub(super) fn scalar(v: f64, like: &Tensor) -> Tensor {
    Tensor::full(&[], v, like.dtype())
}

macro_rules! unary {
    ($($name:ident => $method:ident;)*) => {$(
        pub(super) fn $name(c: &Ctx) -> Result<Vec<Tensor>> {
            one(c.x(0)?.$method()?)
        }
    )*};
}
unary! {
    abs => abs; neg => neg; exp => exp; log => log; sqrt => sqrt; tanh => tanh; sigmoid => sigmoid;
    relu => relu; sign => sign; not => logical_not; erf => erf; sin => sin; cos => cos;
    floor => floor; ceil => ceil; round => round; asin => asin; acos => acos; atan => atan;
    asinh => asinh; acosh => acosh; atanh => atanh; is_nan => is_nan;
}

pub(super) fn is_inf(c: &Ctx) -> Result<Vec<Tensor>> {
    let (positive, negative) = (c.int("detect_positive", 1) != 0, c.int("detect_negative", 1) != 0);
    one(c.x(0)?.is_inf(positive, negative)?)
}

macro_rules! binary {
    ($($name:ident => $method:ident;)*) => {$(
        pub(super) fn $name(c: &Ctx) -> Result<Vec<Tensor>> {
            one(c.x(0)?.$method(&c.x(1)?)?)
        }
    )*};
}
binary! {
    add => add; sub => sub; mul => mul; div => div; equal => eq; less => lt; less_or_equal => le;
    greater => gt; greater_or_equal => ge; xor => ne;
}

pub(super) fn identity(c: &Ctx) -> Result<Vec<Tensor>> {
    one(c.x(0)?)
}

pub(super) fn tan(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    one(x.sin()?.div(&x.cos()?)?)
}

pub(super) fn sinh(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    one(x.exp()?.sub(&x.neg()?.exp()?)?.mul(0.5)?)
}

pub(super) fn cosh(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    one(x.exp()?.add(&x.neg()?.exp()?)?.mul(0.5)?)
}

pub(super) fn reciprocal(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    one(scalar(1.0, &x).div(&x)?)
}

pub(super) fn leaky_relu(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    one(Tensor::where_(&x.ge(0.0)?, &x, &x.mul(c.float("alpha", 0.01) as f64)?)?)
}

/// `alpha (e^x - 1)` where `x <= 0`, `x` elsewhere.
fn elu_of(x: &Tensor, alpha: f64) -> Result<Tensor> {
    Tensor::where_(&x.gt(0.0)?, x, &x.exp()?.sub(1.0)?.mul(alpha)?)
}

pub(super) fn elu(c: &Ctx) -> Result<Vec<Tensor>> {
    one(elu_of(&c.x(0)?, c.float("alpha", 1.0) as f64)?)
}

pub(super) fn selu(c: &Ctx) -> Result<Vec<Tensor>> {
    let (alpha, gamma) = (c.float("alpha", 1.673_263_2), c.float("gamma", 1.050_701));
    one(elu_of(&c.x(0)?, alpha as f64)?.mul(gamma as f64)?)
}

pub(super) fn celu(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, alpha) = (c.x(0)?, c.float("alpha", 1.0) as f64);
    let neg = x.div(alpha)?.exp()?.sub(1.0)?.mul(alpha)?.minimum(0.0)?;
    one(x.maximum(0.0)?.add(&neg)?)
}

fn hard_sigmoid_of(x: &Tensor, alpha: f64, beta: f64) -> Result<Tensor> {
    x.mul(alpha)?.add(beta)?.clamp(0.0, 1.0)
}

pub(super) fn hard_sigmoid(c: &Ctx) -> Result<Vec<Tensor>> {
    one(hard_sigmoid_of(&c.x(0)?, c.float("alpha", 0.2) as f64, c.float("beta", 0.5) as f64)?)
}

pub(super) fn hard_swish(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    one(x.mul(&hard_sigmoid_of(&x, 1.0 / 6.0, 0.5)?)?)
}

pub(super) fn softsign(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    one(x.div(&x.abs()?.add(1.0)?)?)
}

pub(super) fn softplus(c: &Ctx) -> Result<Vec<Tensor>> {
    one(c.x(0)?.exp()?.add(1.0)?.log()?)
}

pub(super) fn thresholded_relu(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    one(Tensor::where_(&x.gt(c.float("alpha", 1.0) as f64)?, &x, &scalar(0.0, &x))?)
}

pub(super) fn mish(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    one(x.mul(&x.exp()?.add(1.0)?.log()?.tanh()?)?)
}

/// PRelu. A slope of one value per channel (`[C]`, PyTorch's `PReLU(C)` as older exporters
/// write it) that does not broadcast from the trailing dim applies along dim 1, as PyTorch's.
pub(super) fn prelu(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, mut slope) = (c.x(0)?, c.x(1)?);
    let (dims, slope_dims) = (x.shape().dims().to_vec(), slope.shape().dims().to_vec());
    if let [channels] = slope_dims[..]
        && channels > 1
        && dims.len() >= 3
        && dims[1] == channels
        && dims[dims.len() - 1] != channels
    {
        let mut per_channel = vec![1isize; dims.len() - 1];
        per_channel[0] = channels as isize;
        slope = slope.reshape(per_channel)?;
    }
    one(Tensor::where_(&x.lt(0.0)?, &x.mul(&slope)?, &x)?)
}

pub(super) fn gelu(c: &Ctx) -> Result<Vec<Tensor>> {
    match c.string("approximate", "none").as_str() {
        "none" => one(c.x(0)?.gelu()?),
        "tanh" => one(c.x(0)?.gelu_tanh()?),
        other => Err(c.err(format!("approximate `{other}` is neither none nor tanh"))),
    }
}

/// Clip before opset 11: bounds as attributes.
pub(super) fn clip_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let (lo, hi) = (c.float("min", f32::MIN), c.float("max", f32::MAX));
    one(x.maximum(&scalar(lo as f64, &x))?.minimum(&scalar(hi as f64, &x))?)
}

/// Clip from opset 11: bounds as optional 0-d inputs.
pub(super) fn clip_v11(c: &Ctx) -> Result<Vec<Tensor>> {
    let mut x = c.x(0)?;
    if let Some(lo) = c.opt(1) {
        x = x.maximum(&lo)?;
    }
    if let Some(hi) = c.opt(2) {
        x = x.minimum(&hi)?;
    }
    one(x)
}

pub(super) fn pow(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    one(x.pow(&c.x(1)?.cast(x.dtype())?)?)
}

/// A variadic op folded left to right over its inputs.
fn fold(c: &Ctx, f: impl Fn(&Tensor, &Tensor) -> Result<Tensor>) -> Result<Tensor> {
    let all = c.all();
    let (first, rest) = all.split_first().ok_or_else(|| c.err("it has no inputs"))?;
    rest.iter().try_fold(first.clone(), |acc, t| f(&acc, t))
}

pub(super) fn max(c: &Ctx) -> Result<Vec<Tensor>> {
    one(fold(c, |a, b| a.maximum(b))?)
}

pub(super) fn min(c: &Ctx) -> Result<Vec<Tensor>> {
    one(fold(c, |a, b| a.minimum(b))?)
}

pub(super) fn sum(c: &Ctx) -> Result<Vec<Tensor>> {
    one(fold(c, |a, b| a.add(b))?)
}

pub(super) fn mean(c: &Ctx) -> Result<Vec<Tensor>> {
    let total = fold(c, |a, b| a.add(b))?;
    one(total.div(c.all().len() as f64)?)
}

pub(super) fn and(c: &Ctx) -> Result<Vec<Tensor>> {
    let (a, b) = (c.x(0)?, c.x(1)?);
    one(Tensor::where_(&a, &b, &Tensor::scalar(false))?)
}

pub(super) fn or(c: &Ctx) -> Result<Vec<Tensor>> {
    let (a, b) = (c.x(0)?, c.x(1)?);
    one(Tensor::where_(&a, &Tensor::scalar(true), &b)?)
}

pub(super) fn where_(c: &Ctx) -> Result<Vec<Tensor>> {
    one(Tensor::where_(&c.x(0)?, &c.x(1)?, &c.x(2)?)?)
}

pub(super) fn cast(c: &Ctx) -> Result<Vec<Tensor>> {
    let to = c.int_req("to")?;
    let dtype = super::super::decode::dtype(to as i32, || format!("node `{}` (Cast)'s target", c.node.name))?;
    one(c.x(0)?.cast(dtype)?)
}

pub(super) fn cast_like(c: &Ctx) -> Result<Vec<Tensor>> {
    one(c.x(0)?.cast(c.x(1)?.dtype())?)
}

// ------------------------------------------------------------------------------ reductions

/// Where a reduction's axes come from: the `axes` attribute (before the opset that made
/// them an input) or input 1.
#[derive(Clone, Copy)]
enum Axes {
    Attr,
    Input,
}

/// The reduction's axes, normalized; `None`: reduce nothing (`noop_with_empty_axes`).
fn reduce_axes(c: &Ctx, from: Axes, rank: usize) -> Result<Option<Vec<isize>>> {
    let axes = match from {
        Axes::Attr => c.ints("axes").unwrap_or_default(),
        Axes::Input if c.opt(1).is_some() => c.host_ints(1)?,
        Axes::Input => Vec::new(),
    };
    if axes.is_empty() {
        return Ok((c.int("noop_with_empty_axes", 0) == 0).then(|| (0..rank as isize).collect()));
    }
    let mut axes: Vec<isize> = c.axes(&axes, rank)?.into_iter().map(|a| a as isize).collect();
    axes.sort_unstable();
    axes.dedup();
    Ok(Some(axes))
}

/// A reduction `f(x, axes, keepdim)` after `pre(x)` and before `post(y)`.
fn reduce(
    c: &Ctx,
    from: Axes,
    pre: fn(&Tensor) -> Result<Tensor>,
    f: fn(&Tensor, &[isize], bool) -> Result<Tensor>,
    post: fn(&Tensor) -> Result<Tensor>,
) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let keep = c.int("keepdims", 1) != 0;
    // Bools reduce as 0/1 (max: any, min: all).
    let bool_in = x.dtype() == DType::Bool;
    let x = if bool_in { x.cast(DType::I32)? } else { x };
    let y = match reduce_axes(c, from, x.rank())? {
        Some(axes) if !axes.is_empty() => post(&f(&pre(&x)?, &axes, keep)?)?,
        _ => post(&pre(&x)?)?,
    };
    one(if bool_in { y.cast(DType::Bool)? } else { y })
}

fn same(x: &Tensor) -> Result<Tensor> {
    Ok(x.clone())
}

fn square(x: &Tensor) -> Result<Tensor> {
    x.mul(x)
}

macro_rules! reductions {
    ($($v1:ident, $vn:ident => $pre:expr, $f:expr, $post:expr;)*) => {$(
        pub(super) fn $v1(c: &Ctx) -> Result<Vec<Tensor>> {
            reduce(c, Axes::Attr, $pre, $f, $post)
        }
        pub(super) fn $vn(c: &Ctx) -> Result<Vec<Tensor>> {
            reduce(c, Axes::Input, $pre, $f, $post)
        }
    )*};
}
reductions! {
    reduce_sum_v1, reduce_sum_v13 => same, Tensor::sum_axes, same;
    reduce_mean_v1, reduce_mean_v18 => same, Tensor::mean_axes, same;
    reduce_prod_v1, reduce_prod_v18 => same, Tensor::prod_axes, same;
    reduce_l1_v1, reduce_l1_v18 => Tensor::abs, Tensor::sum_axes, same;
    reduce_l2_v1, reduce_l2_v18 => square, Tensor::sum_axes, Tensor::sqrt;
    reduce_sum_square_v1, reduce_sum_square_v18 => square, Tensor::sum_axes, same;
    reduce_log_sum_v1, reduce_log_sum_v18 => same, Tensor::sum_axes, Tensor::log;
    reduce_log_sum_exp_v1, reduce_log_sum_exp_v18 => Tensor::exp, Tensor::sum_axes, Tensor::log;
}

/// ReduceMax (`largest`) or ReduceMin. Over an empty set tensor-core's max and min have no
/// identity, so the output is ONNX's: -inf (+inf) for floats, the lowest (highest) integer,
/// false (true) for bools.
fn reduce_extreme(c: &Ctx, from: Axes, largest: bool) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = x.shape().dims().to_vec();
    let axes = reduce_axes(c, from, dims.len())?.unwrap_or_default();
    if !axes.iter().any(|&a| dims[a as usize] == 0) {
        return reduce(c, from, same, if largest { Tensor::max_axes } else { Tensor::min_axes }, same);
    }
    let keep = c.int("keepdims", 1) != 0;
    let out: Vec<usize> = (0..dims.len()).filter_map(|d| if axes.contains(&(d as isize)) { keep.then_some(1) } else { Some(dims[d]) }).collect();
    let identity = match (x.dtype(), largest) {
        (DType::Bool, _) => f64::from(u8::from(!largest)),
        (DType::I32, true) => f64::from(i32::MIN),
        (DType::I32, false) => f64::from(i32::MAX),
        (DType::I64, true) => i64::MIN as f64,
        (DType::I64, false) => i64::MAX as f64,
        (_, true) => f64::NEG_INFINITY,
        (_, false) => f64::INFINITY,
    };
    one(Tensor::full(&out, identity, x.dtype()))
}

pub(super) fn reduce_max_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    reduce_extreme(c, Axes::Attr, true)
}

pub(super) fn reduce_max_v18(c: &Ctx) -> Result<Vec<Tensor>> {
    reduce_extreme(c, Axes::Input, true)
}

pub(super) fn reduce_min_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    reduce_extreme(c, Axes::Attr, false)
}

pub(super) fn reduce_min_v18(c: &Ctx) -> Result<Vec<Tensor>> {
    reduce_extreme(c, Axes::Input, false)
}

/// ArgMax of `x` with the attributes (`select_last_index`: search a reversed copy).
fn arg_max_of(c: &Ctx, x: &Tensor) -> Result<Vec<Tensor>> {
    let axis = c.axis(c.int("axis", 0), x.rank())?;
    let keep = c.int("keepdims", 1) != 0;
    if c.int("select_last_index", 0) == 0 {
        return one(x.argmax(axis as isize, keep)?);
    }
    let n = super::known_dims(c, x)?[axis];
    let reversed = Tensor::from_vec((0..n as i64).rev().collect::<Vec<i64>>(), &[n])?;
    let i = x.index_select(axis as isize, &reversed)?.argmax(axis as isize, keep)?;
    one(scalar((n as f64) - 1.0, &i).sub(&i)?)
}

pub(super) fn arg_max(c: &Ctx) -> Result<Vec<Tensor>> {
    arg_max_of(c, &c.x(0)?)
}

pub(super) fn arg_min(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    // The first smallest is the first largest of -x (bools compare as 0/1).
    let x = if x.dtype() == DType::Bool { x.cast(DType::I32)? } else { x };
    arg_max_of(c, &x.neg()?)
}

fn top_k(c: &Ctx, k: i64) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let axis = c.axis(c.int("axis", -1), x.rank())?;
    let k = c.size(k, "k")?;
    let (values, indices) = x.topk(k, axis as isize, c.int("largest", 1) != 0, c.int("sorted", 1) != 0)?;
    Ok(vec![values, indices.cast(DType::I64)?])
}

/// Opset 1: `k` an attribute.
pub(super) fn top_k_v1(c: &Ctx) -> Result<Vec<Tensor>> {
    top_k(c, c.int_req("k")?)
}

/// Opset 10: `k` input 1 (one value); 11 adds `largest` and `sorted`, which default as 1 did.
pub(super) fn top_k_v10(c: &Ctx) -> Result<Vec<Tensor>> {
    match c.host_ints(1)?[..] {
        [k] => top_k(c, k),
        ref v => Err(c.err(format!("k has {} values; it must have one", v.len()))),
    }
}

/// The axis is input 1 (one value).
pub(super) fn cum_sum(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, axis, exclusive, reverse) = cumulative_args(c)?;
    one(x.cumulative_sum(axis, exclusive, reverse)?)
}

/// CumProd: CumSum's attributes and axis input, with products.
pub(super) fn cum_prod(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, axis, exclusive, reverse) = cumulative_args(c)?;
    one(x.cumulative_prod(axis, exclusive, reverse)?)
}

/// CumSum's and CumProd's input, axis (input 1, one value), `exclusive` and `reverse`.
fn cumulative_args(c: &Ctx) -> Result<(Tensor, isize, bool, bool)> {
    let x = c.x(0)?;
    let axis = match c.host_ints(1)?[..] {
        [a] => c.axis(a, x.rank())?,
        ref v => return Err(c.err(format!("axis has {} values; it must have one", v.len()))),
    };
    Ok((x, axis as isize, c.int("exclusive", 0) != 0, c.int("reverse", 0) != 0))
}

/// The upper (`upper` 1) or lower triangle of the last two dims, from diagonal `k` (input 1),
/// the rest zero: a mask from two aranges.
pub(super) fn trilu(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = super::known_dims(c, &x)?;
    if dims.len() < 2 {
        return Err(c.err(format!("input of rank {}; needs 2 or more", dims.len())));
    }
    let k = match c.opt(1) {
        Some(_) => c.host_ints(1)?.first().copied().unwrap_or(0),
        None => 0,
    };
    let (n, m) = (dims[dims.len() - 2] as i64, dims[dims.len() - 1] as i64);
    let rows = Tensor::arange(0i64, n).reshape([n as isize, 1])?;
    let cols = Tensor::arange(0i64, m).reshape([1, m as isize])?;
    let diag = cols.sub(&rows)?;
    let keep = if c.int("upper", 1) != 0 { diag.ge(k)? } else { diag.le(k)? };
    one(Tensor::where_(&keep, &x, &Tensor::zeros(&[], x.dtype()))?)
}

/// Mod: `a - trunc(a / b) * b` (the sign of `a`, `fmod` 1), plus `b` where that is non-zero
/// and its sign differs from `b`'s (the sign of `b`, `fmod` 0). Integers divide exactly
/// (truncating); floats take tensor-core's `fmod`, exact as C's.
pub(super) fn modulo(c: &Ctx) -> Result<Vec<Tensor>> {
    let (a, b) = (c.x(0)?, c.x(1)?);
    let float = !(a.dtype().is_int() && b.dtype().is_int());
    let r = if float { a.fmod(&b)? } else { a.sub(&a.div(&b)?.mul(&b)?)? };
    if c.int("fmod", 0) != 0 {
        return one(r);
    }
    if float {
        // NumPy's mod: a zero remainder takes the sign of `b` (`0 mod -2` is -0).
        let signed_zero = Tensor::where_(&b.lt(0.0)?, &scalar(-0.0, &r), &scalar(0.0, &r))?;
        let r = Tensor::where_(&r.eq(0.0)?, &signed_zero, &r)?;
        let signs_differ = r.lt(0.0)?.ne(&b.lt(0.0)?)?;
        let fix = Tensor::where_(&r.ne(0.0)?, &signs_differ, &Tensor::scalar(false))?;
        return one(Tensor::where_(&fix, &r.add(&b)?, &r)?);
    }
    let signs_differ = r.lt(0)?.ne(&b.lt(0)?)?;
    let fix = Tensor::where_(&r.ne(0)?, &signs_differ, &Tensor::scalar(false))?;
    one(Tensor::where_(&fix, &r.add(&b)?, &r)?)
}

/// `x sigmoid(alpha x)`.
fn swish_of(x: &Tensor, alpha: f64) -> Result<Tensor> {
    let gate = if alpha == 1.0 { x.sigmoid()? } else { x.mul(alpha)?.sigmoid()? };
    x.mul(&gate)
}

pub(super) fn swish(c: &Ctx) -> Result<Vec<Tensor>> {
    one(swish_of(&c.x(0)?, c.float("alpha", 1.0) as f64)?)
}

/// `swish(a) b`, with `a` and `b` of one shape (the op does not broadcast).
pub(super) fn swiglu(c: &Ctx) -> Result<Vec<Tensor>> {
    let (a, b) = (c.x(0)?, c.x(1)?);
    if a.shape() != b.shape() {
        return Err(c.err(format!("A is {} and B is {}; SwiGLU needs one shape (it does not broadcast)", a.shape(), b.shape())));
    }
    one(swish_of(&a, c.float("alpha", 1.0) as f64)?.mul(&b)?)
}
