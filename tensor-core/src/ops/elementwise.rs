//! Elementwise ops: unary math, binary arithmetic with NumPy broadcasting and Rust scalars,
//! comparisons, `where_`, `clamp`, `cast`.

use super::dispatch::apply;
use super::{need_float, need_numeric, BinaryOp, CmpOp, ElementwiseOp, Family, InputGrads, Saves, ScalarAttr, TypeRef, UnaryOp};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::kernels::elementwise::{map, select, zip};
use crate::math::{clamp_value, CastToAll, Domain, Fn1, Fn2, Num, Visit1, Visit2};
use crate::shape::{broadcast_shapes, Shape};
use crate::storage::Element;
use crate::storage::{Array, Storage};
use crate::tensor::grad_node::BackwardCtx;
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
                apply(ElementwiseOp::Unary(UnaryOp::$op), &[self])
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
    /// The sine of radians (float dtypes).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert_eq!(Tensor::scalar(0.0f64).sin()?.item::<f64>()?, 0.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    sin => Sin;
    /// The cosine of radians (float dtypes).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert_eq!(Tensor::scalar(0.0f32).cos()?.item::<f32>()?, 1.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    cos => Cos;
    /// The largest integer not above x (float dtypes; ±0, ±inf and NaN stay as they are).
    /// Its gradient is 0, as PyTorch's.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-1.5f32, -0.0, 2.7], &[3])?;
    /// assert_eq!(x.floor()?.to_vec::<f32>()?, vec![-2.0, -0.0, 2.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    floor => Floor;
    /// The smallest integer not below x (float dtypes; gradient 0).
    ceil => Ceil;
    /// The nearest integer, halves to even: 0.5 is 0, 1.5 and 2.5 are 2, -2.5 is -2 (ONNX's
    /// `Round`, NumPy's `round`; float dtypes; gradient 0).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![0.5f64, 1.5, 2.5, -2.5, 2.6], &[5])?;
    /// assert_eq!(x.round()?.to_vec::<f64>()?, vec![0.0, 2.0, 2.0, -2.0, 3.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    round => Round;
    /// The integer part of x, towards zero (float dtypes; gradient 0).
    trunc => Trunc;
    /// The arcsine, in radians (float dtypes; NaN outside [-1, 1]).
    asin => Asin;
    /// The arccosine, in radians (float dtypes; NaN outside [-1, 1]).
    acos => Acos;
    /// The arctangent, in radians (float dtypes).
    atan => Atan;
    /// The inverse hyperbolic sine (float dtypes).
    asinh => Asinh;
    /// The inverse hyperbolic cosine (float dtypes; NaN below 1).
    acosh => Acosh;
    /// The inverse hyperbolic tangent (float dtypes; ±inf at ±1, NaN outside [-1, 1]).
    atanh => Atanh;
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
    /// The error function (float dtypes).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert!((Tensor::scalar(1.0f64).erf()?.item::<f64>()? - 0.842_700_792_949_714_9).abs() < 1e-15);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    erf => Erf;
    /// GELU, the exact form `0.5 x (1 + erf(x / sqrt(2)))` (PyTorch's `gelu`, float dtypes).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let y = Tensor::from_vec(vec![-1.0f64, 0.0, 1.0], &[3])?.gelu()?.to_vec::<f64>()?;
    /// assert!((y[0] + 0.158_655_253_931_457_05).abs() < 1e-15 && y[1] == 0.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    gelu => GeluErf;
    /// GELU, the tanh form `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (PyTorch's
    /// `gelu(approximate="tanh")`, GPT-2's; float dtypes).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let y = Tensor::from_vec(vec![1.0f64], &[1])?.gelu_tanh()?.item::<f64>()?;
    /// assert!((y - 0.841_191_990_608_276_8).abs() < 1e-15);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    gelu_tanh => GeluTanh;
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
    /// The remainder of `self / rhs` truncated, with the sign of `self`, broadcasting: C's
    /// `fmod`, exact (`a - trunc(a / b) * b` would round). Integers: 0 where `rhs` is 0.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let a = Tensor::from_vec(vec![7.5f64, -7.5, 1.0], &[3])?;
    /// assert_eq!(a.fmod(2.0)?.to_vec::<f64>()?, vec![1.5, -1.5, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    fmod => Fmod;
}

macro_rules! compare_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {$(
            $(#[$doc])*
            pub fn $name<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
                self.compare(CmpOp::$op, rhs)
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
    /// let x = Tensor::from_vec(vec![1i32, 5], &[2])?;
    /// assert_eq!(x.lt(3)?.to_vec::<bool>()?, vec![true, false]);
    /// # Ok::<(), tensor_core::Error>(())
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
    /// True where the element is NaN (bool; integers and bools: all false): `x != x`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, f32::NAN, f32::INFINITY], &[3])?;
    /// assert_eq!(x.is_nan()?.to_vec::<bool>()?, vec![false, true, false]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_nan(&self) -> Result<Tensor> {
        self.ne(self)
    }

    /// True where the element is +inf (when `positive`) or -inf (when `negative`); bool, and
    /// all false for integers and bools.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![f64::NEG_INFINITY, 0.0, f64::INFINITY, f64::NAN], &[4])?;
    /// assert_eq!(x.is_inf(true, true)?.to_vec::<bool>()?, vec![true, false, true, false]);
    /// assert_eq!(x.is_inf(false, true)?.to_vec::<bool>()?, vec![true, false, false, false]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_inf(&self, positive: bool, negative: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return self.ne(self);
        }
        let (pos, neg) = (self.eq(f64::INFINITY)?, self.eq(f64::NEG_INFINITY)?);
        match (positive, negative) {
            (true, true) => Tensor::where_(&pos, &pos, &neg),
            (true, false) => Ok(pos),
            (false, true) => Ok(neg),
            // Nothing is below -inf: all false.
            (false, false) => self.lt(f64::NEG_INFINITY),
        }
    }
}

impl Tensor {
    fn binary(&self, op: BinaryOp, rhs: Operand) -> Result<Tensor> {
        match rhs {
            Operand::Tensor(t) => apply(ElementwiseOp::Binary(op), &[self, t]),
            Operand::Scalar(s) => apply(ElementwiseOp::BinaryScalar { op, scalar: ScalarAttr(s), scalar_first: false }, &[self]),
        }
    }

    /// `scalar op self` (the scalar on the left), as the operators `2.0 - &x` use.
    pub(crate) fn scalar_lhs(&self, op: BinaryOp, scalar: Scalar) -> Result<Tensor> {
        apply(ElementwiseOp::BinaryScalar { op, scalar: ScalarAttr(scalar), scalar_first: true }, &[self])
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
            Operand::Tensor(t) => apply(ElementwiseOp::Compare(op), &[self, t]),
            Operand::Scalar(s) => apply(ElementwiseOp::CompareScalar { op, scalar: ScalarAttr(s) }, &[self]),
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
        apply(ElementwiseOp::Where, &[cond, a, b])
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
        apply(ElementwiseOp::Clamp { min: Some(ScalarAttr(min.into())), max: Some(ScalarAttr(max.into())) }, &[self])
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
        apply(ElementwiseOp::Clamp { min: Some(ScalarAttr(min.into())), max: None }, &[self])
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
        apply(ElementwiseOp::Clamp { min: None, max: Some(ScalarAttr(max.into())) }, &[self])
    }

    /// The values converted to `dtype` as Rust's `as` does (bool: nonzero is true).
    /// Differentiable between float dtypes.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.7f32, -0.2], &[2])?;
    /// assert_eq!(x.cast(DType::I32)?.to_vec::<i32>()?, vec![1, 0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        apply(ElementwiseOp::Cast(dtype), &[self])
    }
}

impl Family for ElementwiseOp {
    fn name(&self) -> &'static str {
        ElementwiseOp::name(self)
    }

    fn grad_fn_name(&self) -> &'static str {
        ElementwiseOp::grad_fn_name(self)
    }

    fn attrs(&self) -> String {
        ElementwiseOp::attrs(self)
    }

    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        infer(self, inputs)
    }

    fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        Ok(compute(self, inputs))
    }

    fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
        backward(self, ctx, g)
    }

    fn saves(&self) -> Saves {
        match self {
            ElementwiseOp::Unary(u) => unary_saves(*u),
            ElementwiseOp::Binary(BinaryOp::Add | BinaryOp::Sub) => Saves::default(),
            ElementwiseOp::Binary(BinaryOp::Mul | BinaryOp::Div | BinaryOp::Pow | BinaryOp::Maximum | BinaryOp::Minimum | BinaryOp::Fmod) => {
                Saves::inputs(0b11)
            }
            ElementwiseOp::BinaryScalar { op: BinaryOp::Mul | BinaryOp::Add | BinaryOp::Sub, .. } => Saves::default(),
            ElementwiseOp::BinaryScalar { op: BinaryOp::Div | BinaryOp::Pow | BinaryOp::Maximum | BinaryOp::Minimum | BinaryOp::Fmod, .. } => {
                Saves::inputs(0b1)
            }
            ElementwiseOp::Clamp { .. } | ElementwiseOp::Where => Saves::inputs(0b1),
            ElementwiseOp::Compare(_) | ElementwiseOp::CompareScalar { .. } | ElementwiseOp::Cast(_) => Saves::default(),
        }
    }

    fn is_differentiable(&self) -> bool {
        ElementwiseOp::is_differentiable(self)
    }
}

// ------------------------------------------------------------------------ shape and dtype rules

fn infer(op: &ElementwiseOp, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let x = inputs[0];
    match op {
        ElementwiseOp::Unary(u) => {
            unary_dtype_check(*u, x.dtype)?;
            Ok((x.dtype, x.shape.clone()))
        }
        ElementwiseOp::Binary(b) => {
            need_numeric(b.name(), x.dtype)?;
            Ok((x.dtype, broadcast_pair(b.name(), ("self", x), ("other", inputs[1]))?))
        }
        ElementwiseOp::BinaryScalar { op: b, .. } => {
            need_numeric(b.name(), x.dtype)?;
            Ok((x.dtype, x.shape.clone()))
        }
        ElementwiseOp::Clamp { .. } => {
            need_numeric("clamp", x.dtype)?;
            Ok((x.dtype, x.shape.clone()))
        }
        ElementwiseOp::Compare(c) => Ok((DType::Bool, broadcast_pair(c.name(), ("self", x), ("other", inputs[1]))?)),
        ElementwiseOp::CompareScalar { .. } => Ok((DType::Bool, x.shape.clone())),
        ElementwiseOp::Where => infer_where(inputs),
        ElementwiseOp::Cast(d) => Ok((*d, x.shape.clone())),
    }
}

fn unary_dtype_check(u: UnaryOp, dtype: DType) -> Result<()> {
    match u.domain() {
        Domain::Float => need_float(u.name(), dtype),
        Domain::Numeric => need_numeric(u.name(), dtype),
        Domain::Bool if dtype == DType::Bool => Ok(()),
        Domain::Bool => Err(Error::UnsupportedDType { op: "logical_not", dtype, needs: "bool" }),
    }
}

/// The broadcast shape of two operands (named for the error) of one dtype.
fn broadcast_pair(op: &'static str, (a_name, a): (&str, TypeRef), (b_name, b): (&str, TypeRef)) -> Result<Shape> {
    if a.dtype != b.dtype {
        return Err(Error::operand_dtypes(op, (a_name, a.dtype), (b_name, b.dtype)));
    }
    broadcast_shapes(a.shape, b.shape).ok_or_else(|| Error::Broadcast { op, lhs: a.shape.clone(), rhs: b.shape.clone() })
}

fn infer_where(inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let (c, a, b) = (inputs[0], inputs[1], inputs[2]);
    if c.dtype != DType::Bool {
        return Err(Error::UnsupportedDType { op: "where_", dtype: c.dtype, needs: "a bool condition (use a comparison such as x.gt(0.0))" });
    }
    let ab = broadcast_pair("where_", ("a", a), ("b", b))?;
    let shape = broadcast_shapes(c.shape, &ab).ok_or_else(|| Error::Broadcast { op: "where_", lhs: c.shape.clone(), rhs: ab.clone() })?;
    Ok((a.dtype, shape))
}

// ------------------------------------------------------------------------------------ kernels
// Each loop takes its function from the one table (`math`), as fused programs do: a loop per
// function type, monomorphized, so each vectorizes (a `fn` pointer would not).

fn compute(op: &ElementwiseOp, inputs: &[&Storage]) -> Storage {
    let x = inputs[0];
    let out_shape = || inputs.iter().fold(x.shape(), |s, i| broadcast_shapes(&s, &i.shape()).expect("checked by infer"));
    match op {
        ElementwiseOp::Unary(u) => unary(*u, x),
        ElementwiseOp::Binary(b) => binary(*b, x, inputs[1], &out_shape()),
        ElementwiseOp::BinaryScalar { op, scalar, scalar_first } => binary_scalar(*op, x, scalar.0, *scalar_first),
        ElementwiseOp::Compare(c) => Storage::Bool(compare(*c, x, inputs[1], &out_shape())),
        ElementwiseOp::CompareScalar { op, scalar } => Storage::Bool(compare_scalar(*op, x, scalar.0)),
        ElementwiseOp::Where => where_kernel(inputs, &out_shape()),
        ElementwiseOp::Clamp { min, max } => clamp(x, min.map(|s| s.0), max.map(|s| s.0)),
        ElementwiseOp::Cast(d) => crate::storage::with_array!(x, a => cast(a, *d)),
    }
}

/// Builds the map of `a` through the function the table picks.
struct MapWith<'a, T>(&'a Array<T>);

impl<T: Element, U: Element> Visit1<T, U> for MapWith<'_, T> {
    type Out = Array<U>;
    fn visit<F: Fn1<T, U> + 'static>(self) -> Array<U> {
        map(self.0, F::f)
    }
}

/// Builds the broadcast zip of two arrays through the function the table picks.
struct ZipWith<'a, T>(&'a Array<T>, &'a Array<T>, &'a Shape);

impl<T: Element, U: Element> Visit2<T, U> for ZipWith<'_, T> {
    type Out = Array<U>;
    fn visit<F: Fn2<T, U> + 'static>(self) -> Array<U> {
        zip(self.0, self.1, self.2, F::f)
    }
}

/// Builds the map of `a` through the table's function with a scalar on one side.
struct WithScalar<'a, T>(&'a Array<T>, T, bool);

impl<T: Element, U: Element> Visit2<T, U> for WithScalar<'_, T> {
    type Out = Array<U>;
    fn visit<F: Fn2<T, U> + 'static>(self) -> Array<U> {
        let WithScalar(a, s, first) = self;
        if first {
            map(a, move |v| F::f(s, v))
        } else {
            map(a, move |v| F::f(v, s))
        }
    }
}

fn unary(u: UnaryOp, x: &Storage) -> Storage {
    match x {
        Storage::F32(a) => Storage::F32(u.visit_float(MapWith(a))),
        Storage::F64(a) => Storage::F64(u.visit_float(MapWith(a))),
        Storage::I32(a) => Storage::I32(u.visit_num(MapWith(a))),
        Storage::I64(a) => Storage::I64(u.visit_num(MapWith(a))),
        Storage::Bool(a) => Storage::Bool(u.visit_bool(MapWith(a))),
    }
}

fn binary(b: BinaryOp, x: &Storage, y: &Storage, shape: &Shape) -> Storage {
    match (x, y) {
        (Storage::F32(p), Storage::F32(q)) => Storage::F32(b.visit(ZipWith(p, q, shape))),
        (Storage::F64(p), Storage::F64(q)) => Storage::F64(b.visit(ZipWith(p, q, shape))),
        (Storage::I32(p), Storage::I32(q)) => Storage::I32(b.visit(ZipWith(p, q, shape))),
        (Storage::I64(p), Storage::I64(q)) => Storage::I64(b.visit(ZipWith(p, q, shape))),
        _ => unreachable!("dtypes checked by infer"),
    }
}

fn binary_scalar(b: BinaryOp, x: &Storage, s: Scalar, first: bool) -> Storage {
    fn go<T: Num>(b: BinaryOp, a: &Array<T>, s: Scalar, first: bool) -> Array<T> {
        b.visit(WithScalar(a, T::from_scalar(s), first))
    }
    crate::storage::map_numeric!(x, a => go(b, a, s, first), bool => unreachable!("checked by infer"))
}

fn compare(c: CmpOp, x: &Storage, y: &Storage, shape: &Shape) -> Array<bool> {
    match (x, y) {
        (Storage::F32(p), Storage::F32(q)) => c.visit(ZipWith(p, q, shape)),
        (Storage::F64(p), Storage::F64(q)) => c.visit(ZipWith(p, q, shape)),
        (Storage::I32(p), Storage::I32(q)) => c.visit(ZipWith(p, q, shape)),
        (Storage::I64(p), Storage::I64(q)) => c.visit(ZipWith(p, q, shape)),
        (Storage::Bool(p), Storage::Bool(q)) => c.visit(ZipWith(p, q, shape)),
        _ => unreachable!("dtypes checked by infer"),
    }
}

fn compare_scalar(c: CmpOp, x: &Storage, s: Scalar) -> Array<bool> {
    fn go<T: Element>(a: &Array<T>, c: CmpOp, s: Scalar) -> Array<bool> {
        c.visit(WithScalar(a, T::from_scalar(s), false))
    }
    crate::storage::with_array!(x, a => go(a, c, s))
}

fn where_kernel(inputs: &[&Storage], shape: &Shape) -> Storage {
    let Storage::Bool(c) = inputs[0] else { unreachable!("checked by infer") };
    match (inputs[1], inputs[2]) {
        (Storage::F32(a), Storage::F32(b)) => Storage::F32(select(c, a, b, shape)),
        (Storage::F64(a), Storage::F64(b)) => Storage::F64(select(c, a, b, shape)),
        (Storage::I32(a), Storage::I32(b)) => Storage::I32(select(c, a, b, shape)),
        (Storage::I64(a), Storage::I64(b)) => Storage::I64(select(c, a, b, shape)),
        (Storage::Bool(a), Storage::Bool(b)) => Storage::Bool(select(c, a, b, shape)),
        _ => unreachable!("checked by infer"),
    }
}

fn clamp(x: &Storage, min: Option<Scalar>, max: Option<Scalar>) -> Storage {
    fn go<T: Num>(a: &Array<T>, min: Option<Scalar>, max: Option<Scalar>) -> Array<T> {
        let (lo, hi) = (min.map(T::from_scalar), max.map(T::from_scalar));
        map(a, move |v| clamp_value(v, lo, hi))
    }
    crate::storage::map_numeric!(x, a => go(a, min, max), bool => unreachable!("checked by infer"))
}

fn cast<T: CastToAll + Element>(a: &Array<T>, to: DType) -> Storage {
    use crate::math::Cast;
    match to {
        DType::F32 => Storage::F32(MapWith(a).visit::<Cast>()),
        DType::F64 => Storage::F64(MapWith(a).visit::<Cast>()),
        DType::I32 => Storage::I32(MapWith(a).visit::<Cast>()),
        DType::I64 => Storage::I64(MapWith(a).visit::<Cast>()),
        DType::Bool => Storage::Bool(MapWith(a).visit::<Cast>()),
    }
}

// ---------------------------------------------------------------------------------- gradients

fn backward(op: &ElementwiseOp, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    match op {
        ElementwiseOp::Unary(u) => Ok(smallvec![Some(unary_grad(*u, ctx, g)?)]),
        ElementwiseOp::Binary(b) => binary_grad(*b, ctx, g),
        ElementwiseOp::BinaryScalar { op, scalar, scalar_first } => Ok(smallvec![Some(scalar_grad(*op, scalar.0, *scalar_first, ctx, g)?)]),
        ElementwiseOp::Where => where_grad(ctx, g),
        ElementwiseOp::Clamp { min, max } => Ok(smallvec![Some(clamp_grad(min.map(|s| s.0), max.map(|s| s.0), ctx, g)?)]),
        ElementwiseOp::Cast(_) => {
            let from = ctx.input_dtype(0);
            Ok(smallvec![if from.is_float() { Some(g.cast(from)?) } else { None }])
        }
        ElementwiseOp::Compare(_) | ElementwiseOp::CompareScalar { .. } => Err(Error::NotDifferentiable { op: op.name(), detail: "" }),
    }
}

/// What `unary_grad` reads of the forward pass.
fn unary_saves(u: UnaryOp) -> Saves {
    match u {
        UnaryOp::Exp | UnaryOp::Sqrt | UnaryOp::Tanh | UnaryOp::Sigmoid => Saves::output(),
        UnaryOp::Log | UnaryOp::Relu | UnaryOp::Abs | UnaryOp::Erf | UnaryOp::GeluTanh | UnaryOp::GeluErf | UnaryOp::Sin | UnaryOp::Cos => {
            Saves::inputs(0b1)
        }
        UnaryOp::Asin | UnaryOp::Acos | UnaryOp::Atan | UnaryOp::Asinh | UnaryOp::Acosh | UnaryOp::Atanh => Saves::inputs(0b1),
        UnaryOp::Neg | UnaryOp::Sign | UnaryOp::Not => Saves::default(),
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc => Saves::default(),
    }
}

fn unary_grad(u: UnaryOp, ctx: &BackwardCtx, g: &Tensor) -> Result<Tensor> {
    match u {
        UnaryOp::Neg => g.neg(),
        UnaryOp::Exp => g.mul(&ctx.output()?),
        UnaryOp::Log => g.div(&ctx.input(0)?),
        UnaryOp::Sin => g.mul(&ctx.input(0)?.cos()?),
        UnaryOp::Cos => g.mul(&ctx.input(0)?.sin()?.neg()?),
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
            g.mul(&x.gt(0)?.cast(x.dtype())?)
        }
        UnaryOp::Abs => g.mul(&ctx.input(0)?.sign()?),
        UnaryOp::Erf => {
            // d erf(x) / dx = 2 / sqrt(pi) e^(-x^2)
            let x = ctx.input(0)?;
            g.mul(&x.mul(&x)?.neg()?.exp()?.mul(std::f64::consts::FRAC_2_SQRT_PI)?)
        }
        UnaryOp::GeluTanh => g.mul(&gelu_tanh_derivative(&ctx.input(0)?)?),
        UnaryOp::GeluErf => g.mul(&gelu_erf_derivative(&ctx.input(0)?)?),
        // Piecewise constant: the derivative is 0 wherever it exists (PyTorch's choice).
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc => g.mul(0.0),
        UnaryOp::Asin => g.div(&one_minus_square(&ctx.input(0)?)?.sqrt()?),
        UnaryOp::Acos => g.div(&one_minus_square(&ctx.input(0)?)?.sqrt()?)?.neg(),
        UnaryOp::Atan => {
            let x = ctx.input(0)?;
            g.div(&x.mul(&x)?.add(1.0)?)
        }
        UnaryOp::Asinh => {
            let x = ctx.input(0)?;
            g.div(&x.mul(&x)?.add(1.0)?.sqrt()?)
        }
        UnaryOp::Acosh => {
            let x = ctx.input(0)?;
            g.div(&x.mul(&x)?.sub(1.0)?.sqrt()?)
        }
        UnaryOp::Atanh => g.div(&one_minus_square(&ctx.input(0)?)?),
        UnaryOp::Sign | UnaryOp::Not => Err(Error::NotDifferentiable { op: u.name(), detail: "" }),
    }
}

/// `1 - x^2`, the denominator of the inverse sine's, cosine's and tanh's derivatives.
fn one_minus_square(x: &Tensor) -> Result<Tensor> {
    x.mul(x)?.scalar_lhs(BinaryOp::Sub, Scalar::Float(1.0))
}

/// d gelu_tanh(x) / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), with
/// t = tanh(k (x + c x^3)), written with tensor ops (so it traces and differentiates again).
fn gelu_tanh_derivative(x: &Tensor) -> Result<Tensor> {
    use crate::math::{GELU_C, GELU_K};
    let x2 = x.mul(x)?;
    let t = x.mul(&x2.mul(GELU_C)?.add(1.0)?)?.mul(GELU_K)?.tanh()?;
    let inner = x2.mul(3.0 * GELU_C)?.add(1.0)?.mul(GELU_K)?;
    let sech2 = t.mul(&t)?.scalar_lhs(BinaryOp::Sub, Scalar::Float(1.0))?;
    t.add(1.0)?.mul(0.5)?.add(&x.mul(0.5)?.mul(&sech2)?.mul(&inner)?)
}

/// d gelu(x) / dx = Phi(x) + x phi(x): `0.5 (1 + erf(x / sqrt(2))) + x e^(-x^2 / 2) / sqrt(2 pi)`.
fn gelu_erf_derivative(x: &Tensor) -> Result<Tensor> {
    let cdf = x.mul(std::f64::consts::FRAC_1_SQRT_2)?.erf()?.add(1.0)?.mul(0.5)?;
    let pdf = x.mul(x)?.mul(-0.5)?.exp()?.mul(0.5 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2)?;
    cdf.add(&x.mul(&pdf)?)
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
            let share = wins?.cast(x.dtype())?.add(&x.eq(&y)?.cast(x.dtype())?.mul(0.5)?)?;
            (g.mul(&share)?, g.mul(&share.scalar_lhs(BinaryOp::Sub, Scalar::Float(1.0))?)?)
        }
        // fmod(a, b) = a - trunc(a / b) b, trunc's derivative 0.
        BinaryOp::Fmod => {
            let (x, y) = (ctx.input(0)?, ctx.input(1)?);
            (g.clone(), g.mul(&x.div(&y)?.trunc()?)?.neg()?)
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
        let safe_log = Tensor::where_(&x.eq(0.0)?, &zero, &x.log()?)?;
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
            g.mul(&wins?.cast(x.dtype())?.add(&x.eq(s)?.cast(x.dtype())?.mul(0.5)?)?)
        }
        (BinaryOp::Fmod, false) => Ok(g.clone()),
        (BinaryOp::Fmod, true) => {
            let x = ctx.input(0)?;
            g.mul(&x.scalar_lhs(BinaryOp::Div, s)?.trunc()?)?.neg()
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
        g = g.mul(&x.ge(lo)?.cast(x.dtype())?)?;
    }
    if let Some(hi) = max {
        g = g.mul(&x.le(hi)?.cast(x.dtype())?)?;
    }
    Ok(g)
}
