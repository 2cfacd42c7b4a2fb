//! The kinds of elementwise and reduction ops, named as graph text and PyTorch's `grad_fn`
//! name them. They are plain values: kernels, fused programs and the op enum all use them.
//!
//! Each kind is one declaration per op (the `kinds!` tables below): from it come the enum
//! variant, its graph-text, `grad_fn` and wire names and, for the elementwise functions, the
//! element types it is defined on and the scalar function (`functions.rs`) every loop and
//! kernel is built from. `op_names!` does the same for the op families above this layer.

use super::functions::{self, Visit1, Visit2};
use super::num::{Float, Num};
use crate::dtype::Scalar;
use std::hash::{Hash, Hasher};

/// One declaration per op of a kind: the enum (with each variant's doc), its `name` and
/// `grad_fn_name`, its wire names (`ALL` and `WIRE_NAMES`: how an exported graph
/// spells it; the graph-text name unless the row gives `[wire "..."]`), and, for the kinds with
/// scalar functions, the tables `functions.rs` builds loops from.
macro_rules! kinds {
    ($(#[$doc:meta])* $ty:ident { $($(#[$vdoc:meta])* $variant:ident => $name:literal $([wire $wire:literal])?, $grad:literal $(, $domain:ident($f:ident))?;)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $ty {
            $($(#[$vdoc])* $variant,)*
        }

        impl $ty {
            /// Every op of this kind, in declaration order.
            pub(crate) const ALL: &'static [$ty] = &[$($ty::$variant),*];
            /// The wire name of each op of [`ALL`](Self::ALL), in the same order.
            pub(crate) const WIRE_NAMES: &'static [&'static str] = &[$(kinds!(@wire $name $($wire)?)),*];

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

        kinds!(@functions $ty { $($variant $(, $domain($f))?;)* });
    };
    (@wire $name:literal) => { $name };
    (@wire $name:literal $wire:literal) => { $wire };
    // A kind without scalar functions (reductions).
    (@functions $ty:ident { $($variant:ident;)* }) => {};
    // Binary functions: one function per op, for every numeric element type.
    (@functions $ty:ident { $($variant:ident, Num($f:ident);)* }) => {
        impl $ty {
            /// The table: hands `v` this op's function.
            pub(crate) fn visit<T: Num, V: Visit2<T, T>>(self, v: V) -> V::Out {
                match self { $($ty::$variant => v.visit::<functions::$f>(),)* }
            }
        }
    };
    // Comparisons: one function per op, for every element type.
    (@functions $ty:ident { $($variant:ident, Cmp($f:ident);)* }) => {
        impl $ty {
            /// The table: hands `v` this comparison's function.
            pub(crate) fn visit<T: PartialOrd, V: Visit2<T, bool>>(self, v: V) -> V::Out {
                match self { $($ty::$variant => v.visit::<functions::$f>(),)* }
            }
        }
    };
    // Unary functions: each op's function and the element types it is defined on.
    (@functions $ty:ident { $($variant:ident, $domain:ident($f:ident);)* }) => {
        impl $ty {
            /// The element types the op is defined on.
            pub(crate) fn domain(self) -> Domain {
                match self { $($ty::$variant => Domain::$domain,)* }
            }

            /// The table for float elements: hands `v` this op's function. Bool ops are
            /// refused by every op's dtype rule before a loop is built.
            pub(crate) fn visit_float<T: Float, V: Visit1<T, T>>(self, v: V) -> V::Out {
                match self { $($ty::$variant => kinds!(@visit $domain Float $f v $variant),)* }
            }

            /// The table for numeric elements. Float-only and bool ops are refused by every
            /// op's dtype rule before a loop is built.
            pub(crate) fn visit_num<T: Num, V: Visit1<T, T>>(self, v: V) -> V::Out {
                match self { $($ty::$variant => kinds!(@visit $domain Numeric $f v $variant),)* }
            }

            /// The table for bool elements. Numeric ops are refused by every op's dtype rule
            /// before a loop is built.
            pub(crate) fn visit_bool<V: Visit1<bool, bool>>(self, v: V) -> V::Out {
                match self { $($ty::$variant => kinds!(@visit $domain Bool $f v $variant),)* }
            }
        }
    };
    (@visit Float Float $f:ident $v:ident $variant:ident) => { $v.visit::<functions::$f>() };
    (@visit Numeric Float $f:ident $v:ident $variant:ident) => { $v.visit::<functions::$f>() };
    (@visit Numeric Numeric $f:ident $v:ident $variant:ident) => { $v.visit::<functions::$f>() };
    (@visit Bool Bool $f:ident $v:ident $variant:ident) => { $v.visit::<functions::$f>() };
    (@visit $domain:ident $elements:ident $f:ident $v:ident $variant:ident) => {
        unreachable!(concat!(stringify!($variant), " has no loop for these elements; the dtype rule refuses them"))
    };
}

/// One declaration per op of a family: `Variant { fields } => name, grad_fn name, attrs;`
/// (attrs may be left out: none), giving the family's `name`, `grad_fn_name` and `attrs`,
/// each one exhaustive `match`. It expands inside an `impl` block (the family's own or its
/// `Family` impl), its functions with the visibility given first. The listed fields are
/// bound by reference for the three expressions; tuple variants list a name per field.
macro_rules! op_names {
    (@attrs) => { String::new() };
    (@attrs $attrs:expr) => { $attrs };
    ($vis:vis $ty:ident { $($variant:ident $({ $($f:ident),* })? $(( $($t:ident),* ))? => $name:expr, $grad:expr $(, $attrs:expr)?;)* }) => {
        /// The op's name in graph text (`add`, `matmul`, ...).
        #[allow(unused_variables)]
        $vis fn name(&self) -> &'static str {
            match self { $($ty::$variant $({ $($f,)* .. })? $(( $($t),* ))? => $name,)* }
        }

        /// The PyTorch-style name of its backward node.
        #[allow(unused_variables)]
        $vis fn grad_fn_name(&self) -> &'static str {
            match self { $($ty::$variant $({ $($f,)* .. })? $(( $($t),* ))? => $grad,)* }
        }

        /// The attributes as graph text (empty when there are none).
        #[allow(unused_variables)]
        $vis fn attrs(&self) -> String {
            match self { $($ty::$variant $({ $($f,)* .. })? $(( $($t),* ))? => op_names!(@attrs $($attrs)?),)* }
        }
    };
}
pub(crate) use op_names;

kinds!(
    /// Elementwise functions of one operand.
    ///
    /// ```
    /// use tensor_core::ops::UnaryOp;
    /// assert_eq!((UnaryOp::Tanh.name(), UnaryOp::Tanh.grad_fn_name()), ("tanh", "TanhBackward"));
    /// ```
    UnaryOp {
        /// `-x`
        Neg => "neg", "NegBackward", Numeric(Neg);
        /// `e^x`
        Exp => "exp", "ExpBackward", Float(Exp);
        /// The natural logarithm.
        Log => "log", "LogBackward", Float(Ln);
        /// The square root.
        Sqrt => "sqrt", "SqrtBackward", Float(Sqrt);
        /// The hyperbolic tangent.
        Tanh => "tanh", "TanhBackward", Float(Tanh);
        /// `1 / (1 + e^-x)`
        Sigmoid => "sigmoid", "SigmoidBackward", Float(Sigmoid);
        /// `max(x, 0)`
        Relu => "relu", "ReluBackward", Numeric(Relu);
        /// `|x|`
        Abs => "abs", "AbsBackward", Numeric(Abs);
        /// -1, 0 or 1 by the sign of `x`.
        Sign => "sign", "NoBackward", Numeric(Sign);
        /// Logical not (bool).
        Not => "not", "NoBackward", Bool(Not);
        /// The error function.
        Erf => "erf", "ErfBackward", Float(Erf);
        /// GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
        GeluTanh => "gelu_tanh", "GeluBackward", Float(GeluTanh);
        /// GELU, exact (erf) form: `0.5 x (1 + erf(x / sqrt(2)))`.
        GeluErf => "gelu" [wire "gelu_erf"], "GeluBackward", Float(GeluErf);
        /// The sine (radians).
        Sin => "sin", "SinBackward", Float(Sin);
        /// The cosine (radians).
        Cos => "cos", "CosBackward", Float(Cos);
        /// The largest integer not above `x` (float dtypes; ±0, ±inf and NaN stay).
        Floor => "floor", "FloorBackward", Float(Floor);
        /// The smallest integer not below `x`.
        Ceil => "ceil", "CeilBackward", Float(Ceil);
        /// The nearest integer, halves to even (`0.5` is 0, `1.5` and `2.5` are 2, as ONNX and NumPy).
        Round => "round", "RoundBackward", Float(Round);
        /// The integer part of `x` (towards zero).
        Trunc => "trunc", "TruncBackward", Float(Trunc);
        /// The arcsine (radians; NaN outside [-1, 1]).
        Asin => "asin", "AsinBackward", Float(Asin);
        /// The arccosine (radians; NaN outside [-1, 1]).
        Acos => "acos", "AcosBackward", Float(Acos);
        /// The arctangent (radians).
        Atan => "atan", "AtanBackward", Float(Atan);
        /// The inverse hyperbolic sine.
        Asinh => "asinh", "AsinhBackward", Float(Asinh);
        /// The inverse hyperbolic cosine (NaN below 1).
        Acosh => "acosh", "AcoshBackward", Float(Acosh);
        /// The inverse hyperbolic tangent (±inf at ±1, NaN outside).
        Atanh => "atanh", "AtanhBackward", Float(Atanh);
    }
);

kinds!(
    /// Elementwise functions of two operands (broadcast).
    ///
    /// ```
    /// use tensor_core::ops::BinaryOp;
    /// assert_eq!(BinaryOp::Maximum.name(), "maximum");
    /// ```
    BinaryOp {
        /// `a + b`
        Add => "add", "AddBackward", Num(Add);
        /// `a - b`
        Sub => "sub", "SubBackward", Num(Sub);
        /// `a * b`
        Mul => "mul", "MulBackward", Num(Mul);
        /// `a / b` (integers: 0 when `b` is 0)
        Div => "div", "DivBackward", Num(Div);
        /// `a` to the power `b`
        Pow => "pow", "PowBackward", Num(Pow);
        /// The larger of `a` and `b` (NaN propagates).
        Maximum => "maximum", "MaximumBackward", Num(Maximum);
        /// The smaller of `a` and `b` (NaN propagates).
        Minimum => "minimum", "MinimumBackward", Num(Minimum);
        /// The remainder of `a / b` truncated, with the sign of `a` (C's `fmod`, exact;
        /// integers: 0 when `b` is 0).
        Fmod => "fmod", "FmodBackward", Num(Fmod);
    }
);

kinds!(
    /// Elementwise comparisons, giving bool.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::CmpOp;
    /// let x = Tensor::from_vec(vec![1, 2, 3], &[3])?;
    /// assert_eq!(x.compare(CmpOp::Lt, 3)?.to_vec::<bool>()?, vec![true, true, false]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    CmpOp {
        /// `a == b`
        Eq => "eq", "NoBackward", Cmp(Eq);
        /// `a != b`
        Ne => "ne", "NoBackward", Cmp(Ne);
        /// `a < b`
        Lt => "lt", "NoBackward", Cmp(Lt);
        /// `a <= b`
        Le => "le", "NoBackward", Cmp(Le);
        /// `a > b`
        Gt => "gt", "NoBackward", Cmp(Gt);
        /// `a >= b`
        Ge => "ge", "NoBackward", Cmp(Ge);
    }
);

kinds!(
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
    ReduceOp {
        /// The sum.
        Sum => "sum", "SumBackward";
        /// The mean (float dtypes).
        Mean => "mean", "MeanBackward";
        /// The largest element.
        Max => "max", "MaxBackward";
        /// The smallest element.
        Min => "min", "MinBackward";
        /// The product (1 over an empty set).
        Prod => "prod", "ProdBackward";
    }
);

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

/// Which element types a unary op is defined on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Domain {
    Float,
    Numeric,
    Bool,
}
