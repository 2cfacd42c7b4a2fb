//! Ops: the one `Op` enum that eager execution, tracing, backward, graph printing and fusion
//! all switch on. Each family file holds its ops' user API (methods on `Tensor`), shape and
//! dtype rule, kernel call and gradient; this file routes an `Op` to its family.

mod conv;
pub(crate) mod dispatch;
pub(crate) mod elementwise;
mod index;
mod inplace;
mod layout;
mod linalg;
mod nn;
mod reduce;

use crate::autograd::BackwardCtx;
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::shape::Shape;
use crate::storage::Storage;
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};

pub(crate) use conv::conv2d_into;
pub use elementwise::Operand;

/// A list of axes.
pub(crate) type Axes = SmallVec<[usize; 4]>;

/// The gradients of an op's inputs, `None` where an input gets none.
pub(crate) type InputGrads = SmallVec<[Option<Tensor>; 3]>;

/// Elementwise functions of one operand.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::ops::UnaryOp;
/// assert_eq!((UnaryOp::Tanh.name(), UnaryOp::Tanh.grad_fn_name()), ("tanh", "TanhBackward"));
/// # Ok::<(), tensor_core::Error>(())
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
}

/// Elementwise functions of two operands (broadcast).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::ops::BinaryOp;
/// assert_eq!(BinaryOp::Maximum.name(), "maximum");
/// # Ok::<(), tensor_core::Error>(())
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

/// Every op, with its attributes. Inputs are listed per variant.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::graph::NodeKind;
/// use tensor_core::function::ConcreteFunction;
/// use tensor_core::ops::Op;
/// let (a, b) = (Tensor::ones(&[2, 3], DType::F32), Tensor::ones(&[3, 4], DType::F32));
/// let f = ConcreteFunction::trace("f", &[("a", &a), ("b", &b)], || Ok(vec![a.matmul(&b)?]))?;
/// assert!(matches!(f.graph().nodes[0].kind, NodeKind::Op(Op::Matmul)));
/// # Ok::<(), tensor_core::Error>(())
/// ```
// Variant fields are the op's attributes, named as the Tensor methods name their arguments
// (`axes`, `keepdim`, `stride`, `padding`); the variant docs list the inputs.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// (x)
    Unary(UnaryOp),
    /// (a, b)
    Binary(BinaryOp),
    /// (x): `x op scalar`, or `scalar op x` when `scalar_first`.
    BinaryScalar { op: BinaryOp, scalar: ScalarAttr, scalar_first: bool },
    /// (a, b) -> bool
    Compare(CmpOp),
    /// (x) -> bool: `x op scalar`.
    CompareScalar { op: CmpOp, scalar: ScalarAttr },
    /// (cond, a, b)
    Where,
    /// (x)
    Clamp { min: Option<ScalarAttr>, max: Option<ScalarAttr> },
    /// (x)
    Cast(DType),
    /// (x)
    Reduce { op: ReduceOp, axes: Axes, keepdim: bool },
    /// (x) -> i64
    Argmax { axis: usize, keepdim: bool },
    /// (a, b)
    Matmul,
    /// (x): the requested dims, one of them possibly -1.
    Reshape(SmallVec<[isize; 4]>),
    /// (x)
    Permute(Axes),
    /// (x)
    BroadcastTo(Shape),
    /// (x): the sum over broadcast dims back to `shape` (a broadcast's adjoint).
    SumTo(Shape),
    /// (x0, x1, ...)
    Concat { axis: usize },
    /// (x)
    Narrow { axis: usize, start: usize, len: usize },
    /// (x): zero padding along one axis (narrow's adjoint).
    Pad { axis: usize, before: usize, after: usize },
    /// (x, index)
    IndexSelect { axis: usize },
    /// (g, index): index_select's adjoint.
    IndexAdd { axis: usize, size: usize },
    /// (x, index)
    Gather { axis: usize },
    /// (g, index): gather's adjoint.
    ScatterAdd { axis: usize, size: usize },
    /// (index)
    OneHot { classes: usize, dtype: DType },
    /// (x)
    Softmax { axis: usize },
    /// (x)
    LogSoftmax { axis: usize },
    /// (logits [n, c], labels [n]) -> scalar mean loss
    CrossEntropy,
    /// (x, w) or (x, w, bias)
    Conv2d { stride: [usize; 2], padding: [usize; 2] },
    /// (gy, w): the gradient with respect to the input.
    Conv2dInputGrad { stride: [usize; 2], padding: [usize; 2], input_hw: [usize; 2] },
    /// (x, gy): the gradient with respect to the weight.
    Conv2dWeightGrad { stride: [usize; 2], padding: [usize; 2], kernel_hw: [usize; 2] },
    /// (x)
    MaxPool2d { kernel: [usize; 2], stride: [usize; 2] },
    /// (x, gy)
    MaxPool2dGrad { kernel: [usize; 2], stride: [usize; 2] },
}

/// A scalar attribute compared and hashed by its bits (so `0.0` and `-0.0` differ and NaN
/// equals itself), which is what graph passes that merge ops need.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::ops::ScalarAttr;
/// use tensor_core::Scalar;
/// assert_ne!(ScalarAttr(Scalar::Float(0.0)), ScalarAttr(Scalar::Float(-0.0)));
/// assert_eq!(ScalarAttr(Scalar::Float(f64::NAN)), ScalarAttr(Scalar::Float(f64::NAN)));
/// # Ok::<(), tensor_core::Error>(())
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

/// The dtype and shape of an op's input or output.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TypeRef<'a> {
    pub dtype: DType,
    pub shape: &'a Shape,
}

/// Which inputs (bit i) and whether the output an op's backward needs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Saves {
    pub inputs: u8,
    pub output: bool,
}

impl Op {
    /// The op's name in graph text (`add`, `matmul`, ...).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::Op;
    /// assert_eq!(Op::Matmul.name(), "matmul");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(&self) -> &'static str {
        use Op::*;
        match self {
            Unary(u) => u.name(),
            Binary(b) | BinaryScalar { op: b, .. } => b.name(),
            Compare(c) | CompareScalar { op: c, .. } => c.name(),
            Where => "where",
            Clamp { .. } => "clamp",
            Cast(_) => "cast",
            Reduce { op, .. } => op.name(),
            Argmax { .. } => "argmax",
            Matmul => "matmul",
            Reshape(_) => "reshape",
            Permute(_) => "permute",
            BroadcastTo(_) => "broadcast_to",
            SumTo(_) => "sum_to",
            Concat { .. } => "concat",
            Narrow { .. } => "narrow",
            Pad { .. } => "pad",
            IndexSelect { .. } => "index_select",
            IndexAdd { .. } => "index_add",
            Gather { .. } => "gather",
            ScatterAdd { .. } => "scatter_add",
            OneHot { .. } => "one_hot",
            Softmax { .. } => "softmax",
            LogSoftmax { .. } => "log_softmax",
            CrossEntropy => "cross_entropy",
            Conv2d { .. } => "conv2d",
            Conv2dInputGrad { .. } => "conv2d_input_grad",
            Conv2dWeightGrad { .. } => "conv2d_weight_grad",
            MaxPool2d { .. } => "max_pool2d",
            MaxPool2dGrad { .. } => "max_pool2d_grad",
        }
    }

    /// The PyTorch-style name of this op's backward node (`AddBackward`, ...).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::Op;
    /// assert_eq!(Op::Matmul.grad_fn_name(), "MatmulBackward");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn grad_fn_name(&self) -> &'static str {
        use Op::*;
        match self {
            Unary(u) => u.grad_fn_name(),
            Binary(b) | BinaryScalar { op: b, .. } => b.grad_fn_name(),
            Where => "WhereBackward",
            Clamp { .. } => "ClampBackward",
            Cast(_) => "CastBackward",
            Reduce { op, .. } => op.grad_fn_name(),
            Matmul => "MatmulBackward",
            Reshape(_) => "ReshapeBackward",
            Permute(_) => "PermuteBackward",
            BroadcastTo(_) => "BroadcastToBackward",
            SumTo(_) => "SumToBackward",
            Concat { .. } => "ConcatBackward",
            Narrow { .. } => "NarrowBackward",
            Pad { .. } => "PadBackward",
            IndexSelect { .. } => "IndexSelectBackward",
            IndexAdd { .. } => "IndexAddBackward",
            Gather { .. } => "GatherBackward",
            ScatterAdd { .. } => "ScatterAddBackward",
            Softmax { .. } => "SoftmaxBackward",
            LogSoftmax { .. } => "LogSoftmaxBackward",
            CrossEntropy => "CrossEntropyBackward",
            Conv2d { .. } => "Conv2dBackward",
            MaxPool2d { .. } => "MaxPool2dBackward",
            Conv2dInputGrad { .. } => "Conv2dInputGradBackward",
            Conv2dWeightGrad { .. } => "Conv2dWeightGradBackward",
            MaxPool2dGrad { .. } => "MaxPool2dGradBackward",
            Compare(_) | CompareScalar { .. } | Argmax { .. } | OneHot { .. } => "NoBackward",
        }
    }

    /// The output dtype and shape for inputs of these types, or the error the op gives.
    pub(crate) fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        use Op::*;
        match self {
            Unary(_) | Binary(_) | BinaryScalar { .. } | Compare(_) | CompareScalar { .. } | Where | Clamp { .. } | Cast(_) => {
                elementwise::infer(self, inputs)
            }
            Reduce { .. } | Argmax { .. } => reduce::infer(self, inputs),
            Matmul => linalg::infer(inputs),
            Reshape(_) | Permute(_) | BroadcastTo(_) | SumTo(_) | Concat { .. } | Narrow { .. } | Pad { .. } => layout::infer(self, inputs),
            IndexSelect { .. } | IndexAdd { .. } | Gather { .. } | ScatterAdd { .. } | OneHot { .. } => index::infer(self, inputs),
            Softmax { .. } | LogSoftmax { .. } | CrossEntropy => nn::infer(self, inputs),
            Conv2d { .. } | Conv2dInputGrad { .. } | Conv2dWeightGrad { .. } | MaxPool2d { .. } | MaxPool2dGrad { .. } => conv::infer(self, inputs),
        }
    }

    /// Runs the op's kernel. Inputs have passed `infer`.
    pub(crate) fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        use Op::*;
        match self {
            Unary(_) | Binary(_) | BinaryScalar { .. } | Compare(_) | CompareScalar { .. } | Where | Clamp { .. } | Cast(_) => {
                elementwise::compute(self, inputs)
            }
            Reduce { .. } | Argmax { .. } => reduce::compute(self, inputs),
            Matmul => linalg::compute(inputs),
            Reshape(_) | Permute(_) | BroadcastTo(_) | SumTo(_) | Concat { .. } | Narrow { .. } | Pad { .. } => layout::compute(self, inputs),
            IndexSelect { .. } | IndexAdd { .. } | Gather { .. } | ScatterAdd { .. } | OneHot { .. } => index::compute(self, inputs),
            Softmax { .. } | LogSoftmax { .. } | CrossEntropy => nn::compute(self, inputs),
            Conv2d { .. } | Conv2dInputGrad { .. } | Conv2dWeightGrad { .. } | MaxPool2d { .. } | MaxPool2dGrad { .. } => conv::compute(self, inputs),
        }
    }

    /// The gradients of the inputs, written with tensor ops (so they trace, and higher-order
    /// gradients follow), from the output gradient `g`.
    pub(crate) fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
        use Op::*;
        match self {
            Unary(_) | Binary(_) | BinaryScalar { .. } | Where | Clamp { .. } | Cast(_) => elementwise::backward(self, ctx, g),
            Reduce { .. } => reduce::backward(self, ctx, g),
            Matmul => linalg::backward(ctx, g),
            Reshape(_) | Permute(_) | BroadcastTo(_) | SumTo(_) | Concat { .. } | Narrow { .. } | Pad { .. } => layout::backward(self, ctx, g),
            IndexSelect { .. } | IndexAdd { .. } | Gather { .. } | ScatterAdd { .. } => index::backward(self, ctx, g),
            Softmax { .. } | LogSoftmax { .. } | CrossEntropy => nn::backward(self, ctx, g),
            Conv2d { .. } | MaxPool2d { .. } | Conv2dInputGrad { .. } | Conv2dWeightGrad { .. } | MaxPool2dGrad { .. } => {
                conv::backward(self, ctx, g)
            }
            Compare(_) | CompareScalar { .. } | Argmax { .. } | OneHot { .. } => Err(crate::Error::NotDifferentiable { op: self.name(), detail: "" }),
        }
    }

    /// What the backward needs kept from the forward pass.
    pub(crate) fn saves(&self) -> Saves {
        use Op::*;
        let inputs = |mask: u8| Saves { inputs: mask, output: false };
        match self {
            Unary(UnaryOp::Exp | UnaryOp::Sqrt | UnaryOp::Tanh | UnaryOp::Sigmoid) => Saves { inputs: 0, output: true },
            Unary(UnaryOp::Log | UnaryOp::Relu | UnaryOp::Abs) => inputs(0b1),
            Binary(BinaryOp::Mul | BinaryOp::Div | BinaryOp::Pow | BinaryOp::Maximum | BinaryOp::Minimum) => inputs(0b11),
            BinaryScalar { op: BinaryOp::Mul | BinaryOp::Add | BinaryOp::Sub, .. } => inputs(0),
            BinaryScalar { .. } | Clamp { .. } => inputs(0b1),
            Where => inputs(0b1),
            Reduce { op: ReduceOp::Max | ReduceOp::Min, .. } => Saves { inputs: 0b1, output: true },
            Matmul => inputs(0b11),
            IndexSelect { .. } | Gather { .. } | IndexAdd { .. } | ScatterAdd { .. } => inputs(0b10),
            Softmax { .. } | LogSoftmax { .. } => Saves { inputs: 0, output: true },
            CrossEntropy => inputs(0b11),
            Conv2d { .. } => inputs(0b11),
            MaxPool2d { .. } => inputs(0b1),
            Conv2dInputGrad { .. } | Conv2dWeightGrad { .. } | MaxPool2dGrad { .. } => inputs(0b11),
            _ => Saves::default(),
        }
    }

    /// True for ops whose output can carry a gradient (float outputs of differentiable ops).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::{CmpOp, Op};
    /// assert!(Op::Matmul.is_differentiable() && !Op::Compare(CmpOp::Lt).is_differentiable());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_differentiable(&self) -> bool {
        !matches!(self, Op::Compare(_) | Op::CompareScalar { .. } | Op::Argmax { .. } | Op::OneHot { .. } | Op::Unary(UnaryOp::Not | UnaryOp::Sign))
    }

    /// True for ops computed independently per output element from the same position of
    /// their (broadcast) inputs: the ops elementwise fusion may merge.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::{BinaryOp, Op};
    /// assert!(Op::Binary(BinaryOp::Add).is_elementwise() && !Op::Matmul.is_elementwise());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_elementwise(&self) -> bool {
        use Op::*;
        matches!(self, Unary(_) | Binary(_) | BinaryScalar { .. } | Compare(_) | CompareScalar { .. } | Where | Clamp { .. } | Cast(_))
    }

    /// The attributes as text for graph printing (empty when there are none).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::ops::Op;
    /// assert_eq!(Op::Matmul.attrs(), "");
    /// assert_eq!(Op::MaxPool2d { kernel: [2, 2], stride: [2, 2] }.attrs(), "kernel=[2, 2] stride=[2, 2]");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn attrs(&self) -> String {
        use Op::*;
        match self {
            BinaryScalar { scalar, scalar_first, .. } => {
                if *scalar_first {
                    format!("lhs={}", scalar.0)
                } else {
                    format!("rhs={}", scalar.0)
                }
            }
            CompareScalar { scalar, .. } => format!("rhs={}", scalar.0),
            Clamp { min, max } => format!("min={} max={}", opt(min), opt(max)),
            Cast(d) => format!("dtype={d}"),
            Reduce { axes, keepdim, .. } => format!("axes={axes:?} keepdim={keepdim}"),
            Argmax { axis, keepdim } => format!("axis={axis} keepdim={keepdim}"),
            Reshape(d) => format!("shape={d:?}"),
            Permute(p) => format!("perm={p:?}"),
            BroadcastTo(s) | SumTo(s) => format!("shape={s}"),
            Concat { axis } | IndexSelect { axis } | Gather { axis } | Softmax { axis } | LogSoftmax { axis } => format!("axis={axis}"),
            IndexAdd { axis, size } | ScatterAdd { axis, size } => format!("axis={axis} size={size}"),
            Narrow { axis, start, len } => format!("axis={axis} start={start} len={len}"),
            Pad { axis, before, after } => format!("axis={axis} before={before} after={after}"),
            OneHot { classes, dtype } => format!("classes={classes} dtype={dtype}"),
            Conv2d { stride, padding } => format!("stride={stride:?} padding={padding:?}"),
            Conv2dInputGrad { stride, padding, input_hw } => format!("stride={stride:?} padding={padding:?} input_hw={input_hw:?}"),
            Conv2dWeightGrad { stride, padding, kernel_hw } => format!("stride={stride:?} padding={padding:?} kernel_hw={kernel_hw:?}"),
            MaxPool2d { kernel, stride } | MaxPool2dGrad { kernel, stride } => format!("kernel={kernel:?} stride={stride:?}"),
            _ => String::new(),
        }
    }
}

fn opt(s: &Option<ScalarAttr>) -> String {
    s.map_or("none".to_string(), |s| s.0.to_string())
}

macro_rules! names {
    ($ty:ident { $($variant:ident => $name:literal, $grad:literal;)* }) => {
        impl $ty {
            /// The op's name in graph text.
            ///
            /// ```
            /// use tensor_core::prelude::*;
            /// use tensor_core::ops::UnaryOp;
            /// assert_eq!(UnaryOp::Sigmoid.name(), "sigmoid");
            /// # Ok::<(), tensor_core::Error>(())
            /// ```
            pub fn name(self) -> &'static str {
                match self { $($ty::$variant => $name,)* }
            }
            /// The PyTorch-style name of its backward node.
            ///
            /// ```
            /// use tensor_core::prelude::*;
            /// use tensor_core::ops::BinaryOp;
            /// assert_eq!(BinaryOp::Mul.grad_fn_name(), "MulBackward");
            /// # Ok::<(), tensor_core::Error>(())
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

/// Checks that `dtype` is float for `op`.
pub(crate) fn need_float(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(crate::Error::UnsupportedDType { op, dtype, needs: "a float dtype (f32 or f64)" })
    }
}

/// Checks that `dtype` is numeric (not bool) for `op`.
pub(crate) fn need_numeric(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.is_numeric() {
        Ok(())
    } else {
        Err(crate::Error::UnsupportedDType { op, dtype, needs: "a numeric dtype (f32, f64, i32 or i64)" })
    }
}
