//! Elementwise ops: unary math, binary arithmetic with NumPy broadcasting and Rust scalars,
//! comparisons, `where_`, `clamp`, `cast`.

use super::dispatch::apply;
use super::{need_float, need_numeric, BinaryOp, CmpOp, InputGrads, Op, ScalarAttr, TypeRef, UnaryOp};
use crate::autograd::BackwardCtx;
use crate::dtype::{DType, Element, Scalar};
use crate::error::{Error, Result};
use crate::kernels::elementwise::{map, select, zip};
use crate::kernels::math::{Float, Num};
use crate::shape::{broadcast_shapes, Shape};
use crate::storage::{Array, Storage};
use crate::tensor::Tensor;
use smallvec::smallvec;

/// The right-hand side of a binary op: a tensor, or a Rust scalar that takes the tensor's
/// dtype.
///
/// ```
/// # use tensor_core::prelude::*;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
/// assert_eq!(x.mul(2.0)?.to_vec::<f32>()?, vec![2.0, 4.0]);
/// assert_eq!(x.mul(&x)?.to_vec::<f32>()?, vec![1.0, 4.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A tensor (broadcast against the other side).
    Tensor(&'a Tensor),
    /// A Rust scalar, which takes the tensor's dtype.
    Scalar(Scalar),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Tensor(t)
    }
}

macro_rules! operand_from_scalar {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(v: $t) -> Self {
                Operand::Scalar(Scalar::from(v))
            }
        }
    )*};
}
operand_from_scalar!(f32, f64, i32, i64, bool);

impl From<Scalar> for Operand<'_> {
    fn from(s: Scalar) -> Self {
        Operand::Scalar(s)
    }
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {$(
            $(#[$doc])*
            pub fn $name(&self) -> Result<Tensor> {
                apply(Op::Unary(UnaryOp::$op), &[self])
            }
        )*}
    };
}

unary_methods! {
    /// -x, elementwise (numeric dtypes).
    neg => Neg;
    /// e^x (float dtypes).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert_eq!(Tensor::scalar(0.0f64).exp()?.item::<f64>()?, 1.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    exp => Exp;
    /// The natural logarithm (float dtypes).
    log => Log;
    /// The square root (float dtypes).
    sqrt => Sqrt;
    /// The hyperbolic tangent (float dtypes).
    tanh => Tanh;
    /// The logistic sigmoid 1 / (1 + e^-x) (float dtypes).
    sigmoid => Sigmoid;
    /// max(x, 0) (numeric dtypes).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-1.0f32, 2.0], &[2])?;
    /// assert_eq!(x.relu()?.to_vec::<f32>()?, vec![0.0, 2.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    relu => Relu;
    /// |x| (numeric dtypes).
    abs => Abs;
    /// -1, 0 or 1 by the sign of x (numeric dtypes; not differentiable).
    sign => Sign;
    /// Logical not (bool).
    logical_not => Not;
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {$(
            $(#[$doc])*
            pub fn $name<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
                self.binary(BinaryOp::$op, rhs.into())
            }
        )*}
    };
}

binary_methods! {
    /// `self + rhs` with NumPy broadcasting; a Rust scalar takes `self`'s dtype.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let b = Tensor::from_vec(vec![10.0f32, 20.0], &[2])?;
    /// assert_eq!(a.add(&b)?.to_vec::<f32>()?, vec![11.0, 22.0, 13.0, 24.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    add => Add;
    /// `self - rhs`, broadcasting.
    sub => Sub;
    /// `self * rhs`, broadcasting.
    mul => Mul;
    /// `self / rhs`, broadcasting (integer division truncates; by zero gives 0).
    div => Div;
    /// `self ^ rhs`, broadcasting.
    pow => Pow;
    /// The larger of `self` and `rhs` per element (NaN wins), broadcasting.
    maximum => Maximum;
    /// The smaller of `self` and `rhs` per element (NaN wins), broadcasting.
    minimum => Minimum;
}

macro_rules! compare_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {$(
            $(#[$doc])*
            ///
            /// Like the arithmetic operators, this panics with the error's message on
            /// mismatched shapes or dtypes; use [`Tensor::compare`] for a `Result`.
            pub fn $name<'a>(&self, rhs: impl Into<Operand<'a>>) -> Tensor {
                self.compare(CmpOp::$op, rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        )*}
    };
}

compare_methods! {
    /// `self == rhs` per element, as a bool tensor.
    eq => Eq;
    /// `self != rhs` per element, as a bool tensor.
    ne => Ne;
    /// `self < rhs` per element, as a bool tensor.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1i32, 5], &[2]).unwrap();
    /// assert_eq!(x.lt(3).to_vec::<bool>().unwrap(), vec![true, false]);
    /// ```
    lt => Lt;
    /// `self <= rhs` per element, as a bool tensor.
    le => Le;
    /// `self > rhs` per element, as a bool tensor.
    gt => Gt;
    /// `self >= rhs` per element, as a bool tensor.
    ge => Ge;
}

impl Tensor {
    fn binary(&self, op: BinaryOp, rhs: Operand) -> Result<Tensor> {
        match rhs {
            Operand::Tensor(t) => apply(Op::Binary(op), &[self, t]),
            Operand::Scalar(s) => apply(Op::BinaryScalar { op, scalar: ScalarAttr(s), scalar_first: false }, &[self]),
        }
    }

    /// `scalar op self` (the scalar on the left), as the operators `2.0 - &x` use.
    pub(crate) fn scalar_lhs(&self, op: BinaryOp, scalar: Scalar) -> Result<Tensor> {
        apply(Op::BinaryScalar { op, scalar: ScalarAttr(scalar), scalar_first: true }, &[self])
    }

    /// `self ^ exponent` for a scalar exponent.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert_eq!(Tensor::scalar(3.0f32).powf(2.0)?.item::<f32>()?, 9.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn powf(&self, exponent: f64) -> Result<Tensor> {
        self.pow(exponent)
    }

    /// An elementwise comparison, as a bool tensor.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::CmpOp;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
    /// assert_eq!(x.compare(CmpOp::Ge, 2.0)?.to_vec::<bool>()?, vec![false, true, true]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn compare<'a>(&self, op: CmpOp, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        match rhs.into() {
            Operand::Tensor(t) => apply(Op::Compare(op), &[self, t]),
            Operand::Scalar(s) => apply(Op::CompareScalar { op, scalar: ScalarAttr(s) }, &[self]),
        }
    }

    /// `a` where `cond` is true, else `b`; all three broadcast together.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let c = Tensor::from_vec(vec![true, false], &[2])?;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    /// let b = Tensor::scalar(0.0f32);
    /// assert_eq!(Tensor::where_(&c, &a, &b)?.to_vec::<f32>()?, vec![1.0, 0.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        apply(Op::Where, &[cond, a, b])
    }

    /// Each element limited to `[min, max]`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-2.0f32, 0.5, 9.0], &[3])?;
    /// assert_eq!(x.clamp(0.0, 1.0)?.to_vec::<f32>()?, vec![0.0, 0.5, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn clamp(&self, min: impl Into<Scalar>, max: impl Into<Scalar>) -> Result<Tensor> {
        apply(Op::Clamp { min: Some(ScalarAttr(min.into())), max: Some(ScalarAttr(max.into())) }, &[self])
    }

    /// Each element raised to at least `min`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-1.0f32, 0.5, 2.0], &[3])?;
    /// assert_eq!(x.clamp_min(0.0)?.to_vec::<f32>()?, vec![0.0, 0.5, 2.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn clamp_min(&self, min: impl Into<Scalar>) -> Result<Tensor> {
        apply(Op::Clamp { min: Some(ScalarAttr(min.into())), max: None }, &[self])
    }

    /// Each element limited to at most `max`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-1.0f32, 0.5, 2.0], &[3])?;
    /// assert_eq!(x.clamp_max(1.0)?.to_vec::<f32>()?, vec![-1.0, 0.5, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn clamp_max(&self, max: impl Into<Scalar>) -> Result<Tensor> {
        apply(Op::Clamp { min: None, max: Some(ScalarAttr(max.into())) }, &[self])
    }

    /// The values converted to `dtype` as Rust's `as` does (bool: nonzero is true).
    /// Differentiable between float dtypes.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.7f32, -0.2], &[2]).unwrap();
    /// assert_eq!(x.cast(DType::I32).to_vec::<i32>().unwrap(), vec![1, 0]);
    /// ```
    pub fn cast(&self, dtype: DType) -> Tensor {
        if dtype == self.dtype() {
            return self.clone();
        }
        apply(Op::Cast(dtype), &[self]).unwrap_or_else(|e| panic!("{e}"))
    }
}

// ------------------------------------------------------------------------ shape and dtype rules

pub(super) fn infer(op: &Op, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let x = inputs[0];
    match op {
        Op::Unary(u) => {
            unary_dtype_check(*u, x.dtype)?;
            Ok((x.dtype, x.shape.clone()))
        }
        Op::Binary(b) => {
            need_numeric(b.name(), x.dtype)?;
            Ok((x.dtype, broadcast_pair(b.name(), x, inputs[1])?))
        }
        Op::BinaryScalar { op: b, .. } => {
            need_numeric(b.name(), x.dtype)?;
            Ok((x.dtype, x.shape.clone()))
        }
        Op::Clamp { .. } => {
            need_numeric("clamp", x.dtype)?;
            Ok((x.dtype, x.shape.clone()))
        }
        Op::Compare(c) => Ok((DType::Bool, broadcast_pair(c.name(), x, inputs[1])?)),
        Op::CompareScalar { .. } => Ok((DType::Bool, x.shape.clone())),
        Op::Where => infer_where(inputs),
        Op::Cast(d) => Ok((*d, x.shape.clone())),
        _ => unreachable!("not an elementwise op: {op:?}"),
    }
}

fn unary_dtype_check(u: UnaryOp, dtype: DType) -> Result<()> {
    match u {
        UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Tanh | UnaryOp::Sigmoid => need_float(u.name(), dtype),
        UnaryOp::Not if dtype != DType::Bool => Err(Error::UnsupportedDType { op: "logical_not", dtype, needs: "bool" }),
        UnaryOp::Not => Ok(()),
        _ => need_numeric(u.name(), dtype),
    }
}

fn broadcast_pair(op: &'static str, a: TypeRef, b: TypeRef) -> Result<Shape> {
    if a.dtype != b.dtype {
        return Err(Error::dtype_mismatch(op, a.dtype, b.dtype));
    }
    broadcast_shapes(a.shape, b.shape).ok_or_else(|| Error::Broadcast { op, lhs: a.shape.clone(), rhs: b.shape.clone() })
}

fn infer_where(inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let (c, a, b) = (inputs[0], inputs[1], inputs[2]);
    if c.dtype != DType::Bool {
        return Err(Error::UnsupportedDType { op: "where_", dtype: c.dtype, needs: "a bool condition (use a comparison such as x.gt(0.0))" });
    }
    let ab = broadcast_pair("where_", a, b)?;
    let shape = broadcast_shapes(c.shape, &ab).ok_or_else(|| Error::Broadcast { op: "where_", lhs: c.shape.clone(), rhs: ab.clone() })?;
    Ok((a.dtype, shape))
}

// ------------------------------------------------------------------------------------ kernels

pub(super) fn compute(op: &Op, inputs: &[&Storage]) -> Result<Storage> {
    let x = inputs[0];
    Ok(match op {
        Op::Unary(u) => unary(*u, x),
        Op::Binary(b) => {
            let shape = broadcast_shapes(&x.shape(), &inputs[1].shape()).expect("checked by infer");
            binary(*b, x, inputs[1], &shape)
        }
        Op::BinaryScalar { op, scalar, scalar_first } => binary_scalar(*op, x, scalar.0, *scalar_first),
        Op::Compare(c) => {
            let shape = broadcast_shapes(&x.shape(), &inputs[1].shape()).expect("checked by infer");
            Storage::Bool(compare(*c, x, inputs[1], &shape))
        }
        Op::CompareScalar { op, scalar } => Storage::Bool(compare_scalar(*op, x, scalar.0)),
        Op::Where => where_kernel(inputs),
        Op::Clamp { min, max } => clamp(x, min.map(|s| s.0), max.map(|s| s.0)),
        Op::Cast(d) => cast(x, *d),
        _ => unreachable!("not an elementwise op: {op:?}"),
    })
}

fn unary_int<T: Num>(u: UnaryOp, a: &Array<T>) -> Array<T> {
    match u {
        UnaryOp::Neg => map(a, T::neg),
        UnaryOp::Relu => map(a, T::relu),
        UnaryOp::Abs => map(a, T::abs),
        UnaryOp::Sign => map(a, T::sign),
        _ => unreachable!("checked by infer"),
    }
}

/// Each float unary op gets its own monomorphized loop (a `fn` pointer would not vectorize).
fn unary_float<T: Float>(u: UnaryOp, a: &Array<T>) -> Array<T> {
    match u {
        UnaryOp::Neg => map(a, T::neg),
        UnaryOp::Exp => map(a, T::exp),
        UnaryOp::Log => map(a, T::ln),
        UnaryOp::Sqrt => map(a, T::sqrt),
        UnaryOp::Tanh => map(a, T::tanh),
        UnaryOp::Sigmoid => map(a, T::sigmoid),
        UnaryOp::Relu => map(a, T::relu),
        UnaryOp::Abs => map(a, T::abs),
        UnaryOp::Sign => map(a, T::sign),
        UnaryOp::Not => unreachable!("checked by infer"),
    }
}

fn unary(u: UnaryOp, x: &Storage) -> Storage {
    match x {
        Storage::F32(a) => Storage::F32(unary_float(u, a)),
        Storage::F64(a) => Storage::F64(unary_float(u, a)),
        Storage::I32(a) => Storage::I32(unary_int(u, a)),
        Storage::I64(a) => Storage::I64(unary_int(u, a)),
        Storage::Bool(a) => Storage::Bool(map(a, |v: bool| !v)),
    }
}

fn binary_typed<T: Num>(b: BinaryOp, x: &Array<T>, y: &Array<T>, shape: &Shape) -> Array<T> {
    match b {
        BinaryOp::Add => zip(x, y, shape, T::add),
        BinaryOp::Sub => zip(x, y, shape, T::sub),
        BinaryOp::Mul => zip(x, y, shape, T::mul),
        BinaryOp::Div => zip(x, y, shape, T::div),
        BinaryOp::Pow => zip(x, y, shape, T::pow),
        BinaryOp::Maximum => zip(x, y, shape, T::maximum),
        BinaryOp::Minimum => zip(x, y, shape, T::minimum),
    }
}

fn binary(b: BinaryOp, x: &Storage, y: &Storage, shape: &Shape) -> Storage {
    match (x, y) {
        (Storage::F32(p), Storage::F32(q)) => Storage::F32(binary_typed(b, p, q, shape)),
        (Storage::F64(p), Storage::F64(q)) => Storage::F64(binary_typed(b, p, q, shape)),
        (Storage::I32(p), Storage::I32(q)) => Storage::I32(binary_typed(b, p, q, shape)),
        (Storage::I64(p), Storage::I64(q)) => Storage::I64(binary_typed(b, p, q, shape)),
        _ => unreachable!("dtypes checked by infer"),
    }
}

fn scalar_typed<T: Num>(b: BinaryOp, x: &Array<T>, s: Scalar, first: bool) -> Array<T> {
    let s = T::from_scalar(s);
    macro_rules! side {
        ($f:expr) => {
            if first {
                map(x, |v| $f(s, v))
            } else {
                map(x, |v| $f(v, s))
            }
        };
    }
    match b {
        BinaryOp::Add => side!(T::add),
        BinaryOp::Sub => side!(T::sub),
        BinaryOp::Mul => side!(T::mul),
        BinaryOp::Div => side!(T::div),
        BinaryOp::Pow => side!(T::pow),
        BinaryOp::Maximum => side!(T::maximum),
        BinaryOp::Minimum => side!(T::minimum),
    }
}

fn binary_scalar(b: BinaryOp, x: &Storage, s: Scalar, first: bool) -> Storage {
    crate::map_numeric!(x, a => scalar_typed(b, a, s, first), bool => unreachable!("checked by infer"))
}

pub(crate) fn cmp_fn<T: PartialOrd>(c: CmpOp) -> fn(T, T) -> bool {
    match c {
        CmpOp::Eq => |a, b| a == b,
        CmpOp::Ne => |a, b| a != b,
        CmpOp::Lt => |a, b| a < b,
        CmpOp::Le => |a, b| a <= b,
        CmpOp::Gt => |a, b| a > b,
        CmpOp::Ge => |a, b| a >= b,
    }
}

fn compare(c: CmpOp, x: &Storage, y: &Storage, shape: &Shape) -> Array<bool> {
    match (x, y) {
        (Storage::F32(p), Storage::F32(q)) => zip(p, q, shape, cmp_fn(c)),
        (Storage::F64(p), Storage::F64(q)) => zip(p, q, shape, cmp_fn(c)),
        (Storage::I32(p), Storage::I32(q)) => zip(p, q, shape, cmp_fn(c)),
        (Storage::I64(p), Storage::I64(q)) => zip(p, q, shape, cmp_fn(c)),
        (Storage::Bool(p), Storage::Bool(q)) => zip(p, q, shape, cmp_fn(c)),
        _ => unreachable!("dtypes checked by infer"),
    }
}

fn compare_scalar(c: CmpOp, x: &Storage, s: Scalar) -> Array<bool> {
    fn go<T: Element>(a: &Array<T>, c: CmpOp, s: Scalar) -> Array<bool> {
        let (f, s) = (cmp_fn::<T>(c), T::from_scalar(s));
        map(a, move |v| f(v, s))
    }
    crate::with_array!(x, a => go(a, c, s))
}

fn where_kernel(inputs: &[&Storage]) -> Storage {
    let Storage::Bool(c) = inputs[0] else { unreachable!("checked by infer") };
    let shape = broadcast_shapes(&inputs[0].shape(), &broadcast_shapes(&inputs[1].shape(), &inputs[2].shape()).expect("checked")).expect("checked");
    match (inputs[1], inputs[2]) {
        (Storage::F32(a), Storage::F32(b)) => Storage::F32(select(c, a, b, &shape)),
        (Storage::F64(a), Storage::F64(b)) => Storage::F64(select(c, a, b, &shape)),
        (Storage::I32(a), Storage::I32(b)) => Storage::I32(select(c, a, b, &shape)),
        (Storage::I64(a), Storage::I64(b)) => Storage::I64(select(c, a, b, &shape)),
        (Storage::Bool(a), Storage::Bool(b)) => Storage::Bool(select(c, a, b, &shape)),
        _ => unreachable!("checked by infer"),
    }
}

/// `v` limited to `[lo, hi]`; NaN stays NaN (as in PyTorch).
#[inline(always)]
pub(crate) fn clamp_value<T: Num>(v: T, lo: Option<T>, hi: Option<T>) -> T {
    let v = match lo {
        Some(l) if v < l => l,
        _ => v,
    };
    match hi {
        Some(h) if v > h => h,
        _ => v,
    }
}

fn clamp(x: &Storage, min: Option<Scalar>, max: Option<Scalar>) -> Storage {
    fn go<T: Num>(a: &Array<T>, min: Option<Scalar>, max: Option<Scalar>) -> Array<T> {
        let (lo, hi) = (min.map(T::from_scalar), max.map(T::from_scalar));
        map(a, move |v| clamp_value(v, lo, hi))
    }
    crate::map_numeric!(x, a => go(a, min, max), bool => unreachable!("checked by infer"))
}

/// Rust's `as` between every pair of element types (bool: nonzero is true, true is 1).
pub(crate) trait CastTo<U> {
    fn cast_to(self) -> U;
}

macro_rules! cast_numeric {
    ($($from:ty),*) => {$(
        impl CastTo<f32> for $from { #[inline(always)] fn cast_to(self) -> f32 { self as f32 } }
        impl CastTo<f64> for $from { #[inline(always)] fn cast_to(self) -> f64 { self as f64 } }
        impl CastTo<i32> for $from { #[inline(always)] fn cast_to(self) -> i32 { self as i32 } }
        impl CastTo<i64> for $from { #[inline(always)] fn cast_to(self) -> i64 { self as i64 } }
        impl CastTo<bool> for $from { #[inline(always)] fn cast_to(self) -> bool { self != (0 as $from) } }
    )*};
}
cast_numeric!(f32, f64, i32, i64);

macro_rules! cast_bool {
    ($($to:ty),*) => {$(
        impl CastTo<$to> for bool { #[inline(always)] fn cast_to(self) -> $to { self as u8 as $to } }
    )*};
}
cast_bool!(f32, f64, i32, i64);
impl CastTo<bool> for bool {
    fn cast_to(self) -> bool {
        self
    }
}

fn cast_array<T: Copy + Send + Sync + CastTo<f32> + CastTo<f64> + CastTo<i32> + CastTo<i64> + CastTo<bool>>(a: &Array<T>, to: DType) -> Storage {
    match to {
        DType::F32 => Storage::F32(map(a, CastTo::<f32>::cast_to)),
        DType::F64 => Storage::F64(map(a, CastTo::<f64>::cast_to)),
        DType::I32 => Storage::I32(map(a, CastTo::<i32>::cast_to)),
        DType::I64 => Storage::I64(map(a, CastTo::<i64>::cast_to)),
        DType::Bool => Storage::Bool(map(a, CastTo::<bool>::cast_to)),
    }
}

fn cast(x: &Storage, to: DType) -> Storage {
    crate::with_array!(x, a => cast_array(a, to))
}

// ---------------------------------------------------------------------------------- gradients

pub(super) fn backward(op: &Op, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    match op {
        Op::Unary(u) => Ok(smallvec![Some(unary_grad(*u, ctx, g)?)]),
        Op::Binary(b) => binary_grad(*b, ctx, g),
        Op::BinaryScalar { op, scalar, scalar_first } => Ok(smallvec![Some(scalar_grad(*op, scalar.0, *scalar_first, ctx, g)?)]),
        Op::Where => where_grad(ctx, g),
        Op::Clamp { min, max } => Ok(smallvec![Some(clamp_grad(min.map(|s| s.0), max.map(|s| s.0), ctx, g)?)]),
        Op::Cast(_) => {
            let from = ctx.input_dtype(0);
            Ok(smallvec![from.is_float().then(|| g.cast(from))])
        }
        _ => unreachable!("not differentiable here: {op:?}"),
    }
}

fn unary_grad(u: UnaryOp, ctx: &BackwardCtx, g: &Tensor) -> Result<Tensor> {
    match u {
        UnaryOp::Neg => g.neg(),
        UnaryOp::Exp => g.mul(&ctx.output()?),
        UnaryOp::Log => g.div(&ctx.input(0)?),
        UnaryOp::Sqrt => g.div(&ctx.output()?.mul(2.0)?),
        UnaryOp::Tanh => {
            let y = ctx.output()?;
            g.mul(&y.mul(&y)?.scalar_lhs(BinaryOp::Sub, Scalar::Float(1.0))?)
        }
        UnaryOp::Sigmoid => {
            let y = ctx.output()?;
            g.mul(&y.mul(&y.scalar_lhs(BinaryOp::Sub, Scalar::Float(1.0))?)?)
        }
        UnaryOp::Relu => {
            let x = ctx.input(0)?;
            g.mul(&x.gt(0).cast(x.dtype()))
        }
        UnaryOp::Abs => g.mul(&ctx.input(0)?.sign()?),
        UnaryOp::Sign | UnaryOp::Not => Err(Error::NotDifferentiable { op: u.name(), detail: "" }),
    }
}

fn binary_grad(b: BinaryOp, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    let (ga, gb) = match b {
        BinaryOp::Add => (g.clone(), g.clone()),
        BinaryOp::Sub => (g.clone(), g.neg()?),
        BinaryOp::Mul => (g.mul(&ctx.input(1)?)?, g.mul(&ctx.input(0)?)?),
        BinaryOp::Div => {
            let (x, y) = (ctx.input(0)?, ctx.input(1)?);
            let ga = g.div(&y)?;
            (ga.clone(), ga.mul(&x)?.div(&y)?.neg()?)
        }
        BinaryOp::Pow => pow_grads(ctx, g)?,
        BinaryOp::Maximum | BinaryOp::Minimum => {
            let (x, y) = (ctx.input(0)?, ctx.input(1)?);
            let wins = if b == BinaryOp::Maximum { x.gt(&y) } else { x.lt(&y) };
            let share = wins.cast(x.dtype()).add(&x.eq(&y).cast(x.dtype()).mul(0.5)?)?;
            (g.mul(&share)?, g.mul(&share.scalar_lhs(BinaryOp::Sub, Scalar::Float(1.0))?)?)
        }
    };
    Ok(smallvec![Some(ga.sum_to(ctx.input_shape(0))?), Some(gb.sum_to(ctx.input_shape(1))?)])
}

/// d(x^y)/dx = y x^(y-1); d(x^y)/dy = x^y ln x, taken as 0 where x = 0 (as PyTorch does).
fn pow_grads(ctx: &BackwardCtx, g: &Tensor) -> Result<(Tensor, Tensor)> {
    let (x, y) = (ctx.input(0)?, ctx.input(1)?);
    let ga = g.mul(&y.mul(&x.pow(&y.sub(1.0)?)?)?)?;
    let gb = if ctx.needs_grad(1) {
        let zero = Tensor::zeros(&[], x.dtype());
        let safe_log = Tensor::where_(&x.eq(0.0), &zero, &x.log()?)?;
        g.mul(&x.pow(&y)?.mul(&safe_log)?)?
    } else {
        g.mul(0.0)?
    };
    Ok((ga, gb))
}

fn scalar_grad(b: BinaryOp, s: Scalar, first: bool, ctx: &BackwardCtx, g: &Tensor) -> Result<Tensor> {
    match (b, first) {
        (BinaryOp::Add, _) | (BinaryOp::Sub, false) => Ok(g.clone()),
        (BinaryOp::Sub, true) => g.neg(),
        (BinaryOp::Mul, _) => g.mul(s),
        (BinaryOp::Div, false) => g.div(s),
        (BinaryOp::Div, true) => {
            let x = ctx.input(0)?;
            g.mul(s)?.div(&x.mul(&x)?)?.neg()
        }
        (BinaryOp::Pow, false) => {
            let x = ctx.input(0)?;
            g.mul(&x.pow(s.as_f64() - 1.0)?.mul(s)?)
        }
        (BinaryOp::Pow, true) => {
            let x = ctx.input(0)?;
            g.mul(&x.scalar_lhs(BinaryOp::Pow, s)?.mul(s.as_f64().ln())?)
        }
        (BinaryOp::Maximum | BinaryOp::Minimum, _) => {
            let x = ctx.input(0)?;
            let wins = if b == BinaryOp::Maximum { x.gt(s) } else { x.lt(s) };
            g.mul(&wins.cast(x.dtype()).add(&x.eq(s).cast(x.dtype()).mul(0.5)?)?)
        }
    }
}

fn where_grad(ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    let c = ctx.input(0)?;
    let zero = Tensor::zeros(&[], g.dtype());
    let ga = Tensor::where_(&c, g, &zero)?.sum_to(ctx.input_shape(1))?;
    let gb = Tensor::where_(&c, &zero, g)?.sum_to(ctx.input_shape(2))?;
    Ok(smallvec![None, Some(ga), Some(gb)])
}

/// The gradient passes where `min <= x <= max` (bounds included, as in PyTorch).
fn clamp_grad(min: Option<Scalar>, max: Option<Scalar>, ctx: &BackwardCtx, g: &Tensor) -> Result<Tensor> {
    let x = ctx.input(0)?;
    let mut g = g.clone();
    if let Some(lo) = min {
        g = g.mul(&x.ge(lo).cast(x.dtype()))?;
    }
    if let Some(hi) = max {
        g = g.mul(&x.le(hi).cast(x.dtype()))?;
    }
    Ok(g)
}
