//! The kinds of elementwise and reduction ops, named as graph text and PyTorch's `grad_fn`
//! name them. They are plain values: kernels, fused programs and the op enum all use them.

use crate::dtype::Scalar;
use std::hash::{Hash, Hasher};

/// Elementwise functions of one operand.
///
/// ```
/// use tensor_core::ops::UnaryOp;
/// assert_eq!((UnaryOp::Tanh.name(), UnaryOp::Tanh.grad_fn_name()), ("tanh", "TanhBackward"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `e^x`
    Exp,
    /// The natural logarithm.
    Log,
    /// The square root.
    Sqrt,
    /// The hyperbolic tangent.
    Tanh,
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `max(x, 0)`
    Relu,
    /// `|x|`
    Abs,
    /// -1, 0 or 1 by the sign of `x`.
    Sign,
    /// Logical not (bool).
    Not,
    /// The error function.
    Erf,
    /// GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    GeluTanh,
    /// GELU, exact (erf) form: `0.5 x (1 + erf(x / sqrt(2)))`.
    GeluErf,
}

/// Elementwise functions of two operands (broadcast).
///
/// ```
/// use tensor_core::ops::BinaryOp;
/// assert_eq!(BinaryOp::Maximum.name(), "maximum");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (integers: 0 when `b` is 0)
    Div,
    /// `a` to the power `b`
    Pow,
    /// The larger of `a` and `b` (NaN propagates).
    Maximum,
    /// The smaller of `a` and `b` (NaN propagates).
    Minimum,
}

/// Elementwise comparisons, giving bool.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::ops::CmpOp;
/// let x = Tensor::from_vec(vec![1, 2, 3], &[3])?;
/// assert_eq!(x.compare(CmpOp::Lt, 3)?.to_vec::<bool>()?, vec![true, true, false]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
}

/// Reductions over axes.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2, 3], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mean_axes(&[1], false)?]))?;
/// assert!(f.to_text().contains("mean[axes=[1] keepdim=false]"), "{}", f.to_text());
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The mean (float dtypes).
    Mean,
    /// The largest element.
    Max,
    /// The smallest element.
    Min,
}

/// A scalar attribute compared and hashed by its bits (so `0.0` and `-0.0` differ and NaN
/// equals itself), which is what graph passes that merge ops need.
///
/// ```
/// use tensor_core::ops::ScalarAttr;
/// use tensor_core::Scalar;
/// assert_ne!(ScalarAttr(Scalar::Float(0.0)), ScalarAttr(Scalar::Float(-0.0)));
/// assert_eq!(ScalarAttr(Scalar::Float(f64::NAN)), ScalarAttr(Scalar::Float(f64::NAN)));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ScalarAttr(pub Scalar);

impl PartialEq for ScalarAttr {
    fn eq(&self, o: &Self) -> bool {
        std::mem::discriminant(&self.0) == std::mem::discriminant(&o.0) && self.0.key_bits() == o.0.key_bits()
    }
}
impl Eq for ScalarAttr {}
impl Hash for ScalarAttr {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.key_bits().hash(h)
    }
}

macro_rules! names {
    ($ty:ident { $($variant:ident => $name:literal, $grad:literal;)* }) => {
        impl $ty {
            /// The op's name in graph text.
            ///
            /// ```
            /// use tensor_core::ops::UnaryOp;
            /// assert_eq!(UnaryOp::Sigmoid.name(), "sigmoid");
            /// ```
            pub fn name(self) -> &'static str {
                match self { $($ty::$variant => $name,)* }
            }
            /// The PyTorch-style name of its backward node.
            ///
            /// ```
            /// use tensor_core::ops::BinaryOp;
            /// assert_eq!(BinaryOp::Mul.grad_fn_name(), "MulBackward");
            /// ```
            pub fn grad_fn_name(self) -> &'static str {
                match self { $($ty::$variant => $grad,)* }
            }
        }
    };
}

names!(UnaryOp {
    Neg => "neg", "NegBackward";
    Exp => "exp", "ExpBackward";
    Log => "log", "LogBackward";
    Sqrt => "sqrt", "SqrtBackward";
    Tanh => "tanh", "TanhBackward";
    Sigmoid => "sigmoid", "SigmoidBackward";
    Relu => "relu", "ReluBackward";
    Abs => "abs", "AbsBackward";
    Sign => "sign", "NoBackward";
    Not => "not", "NoBackward";
    Erf => "erf", "ErfBackward";
    GeluTanh => "gelu_tanh", "GeluBackward";
    GeluErf => "gelu", "GeluBackward";
});

names!(BinaryOp {
    Add => "add", "AddBackward";
    Sub => "sub", "SubBackward";
    Mul => "mul", "MulBackward";
    Div => "div", "DivBackward";
    Pow => "pow", "PowBackward";
    Maximum => "maximum", "MaximumBackward";
    Minimum => "minimum", "MinimumBackward";
});

names!(CmpOp {
    Eq => "eq", "NoBackward";
    Ne => "ne", "NoBackward";
    Lt => "lt", "NoBackward";
    Le => "le", "NoBackward";
    Gt => "gt", "NoBackward";
    Ge => "ge", "NoBackward";
});

names!(ReduceOp {
    Sum => "sum", "SumBackward";
    Mean => "mean", "MeanBackward";
    Max => "max", "MaxBackward";
    Min => "min", "MinBackward";
});

/// Which element types a unary op is defined on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Domain {
    Float,
    Numeric,
    Bool,
}

impl UnaryOp {
    /// The element types the op is defined on.
    pub(crate) fn domain(self) -> Domain {
        match self {
            UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Erf | UnaryOp::GeluTanh | UnaryOp::GeluErf => {
                Domain::Float
            }
            UnaryOp::Neg | UnaryOp::Relu | UnaryOp::Abs | UnaryOp::Sign => Domain::Numeric,
            UnaryOp::Not => Domain::Bool,
        }
    }
}
