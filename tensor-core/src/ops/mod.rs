//! Ops: the one `Op` enum that eager execution, tracing, backward, graph printing and fusion
//! all switch on. It is an enum of families; each family file holds its ops' user API
//! (methods on `Tensor`), and implements `Family`: shape and dtype rule, kernel call,
//! gradient, what the gradient saves. This file routes an `Op` to its family, once.

mod advanced_indexing;
mod cnn;
pub(crate) mod collective;
mod conv;
mod conv_nd;
mod cumulative;
mod depthwise;
#[cfg(feature = "cuda")]
pub(crate) mod device;
#[cfg(feature = "cuda")]
pub use device::run_fused;
pub(crate) mod dispatch;
mod einsum;
pub(crate) mod elementwise;
mod grid_sample;
mod index;
mod indexer;
mod inplace;
mod layout;
mod linalg;
mod nn;
mod norm;
mod operators;
mod padding;
mod pool_nd;
mod random;
mod reduce;
mod resize;
pub(crate) mod seams;
mod sym_shape;
mod transformer;
pub(crate) mod unknown_rank;

use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Shape;
use crate::storage::Storage;
use crate::tensor::grad_node::BackwardCtx;
pub(crate) use crate::tensor::grad_node::{Backward, InputGrads, Saves};
use crate::tensor::Tensor;
use smallvec::SmallVec;

pub use crate::math::{BinaryOp, CmpOp, ElementwiseOp, ReduceOp, ScalarAttr, UnaryOp};
pub use collective::CollectiveOp;
// The distributed plumbing stays inside the crate: `distributed` installs the transport.
#[cfg(feature = "mpi")]
pub(crate) use collective::Job;
pub(crate) use collective::{Pending, Transport};
pub(crate) use conv::conv2d_into;
pub use conv::ConvOp;
pub(crate) use conv_nd::dilated_kernel;
pub use elementwise::Operand;
pub use grid_sample::{GridMode, GridPadding, GridSampleOptions};
pub use index::IndexOp;
pub use indexer::{Indexer, Indices};
pub use layout::{Dim, LayoutOp, ReshapeDims};
pub use linalg::LinalgOp;
pub use nn::NnOp;
pub use padding::PadMode;
pub use random::RandomOp;
pub use reduce::ReductionOp;
pub use resize::{Interpolation, Taps};
pub(crate) use seams::{set_transport, transport};
pub use sym_shape::SymShapeOp;
pub(crate) use sym_shape::{size_attr, size_attrs};
pub use transformer::AttentionOptions;

/// A list of axes.
pub(crate) type Axes = SmallVec<[usize; 4]>;

/// Every op: a family and the family's op with its attributes. Each family is one file of
/// this module and implements `Family` (name, shape/dtype rule, kernel, gradient, what the
/// gradient saves), so routing an op is one `match` the compiler checks.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::graph::NodeKind;
/// use tensor_core::function::ConcreteFunction;
/// use tensor_core::ops::{LinalgOp, Op};
/// let (a, b) = (Tensor::ones(&[2, 3], DType::F32), Tensor::ones(&[3, 4], DType::F32));
/// let f = ConcreteFunction::trace("f", &[("a", &a), ("b", &b)], || Ok(vec![a.matmul(&b)?]))?;
/// assert!(matches!(f.graph().nodes[0].kind, NodeKind::Op(Op::Linalg(LinalgOp::MATMUL))));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Computed per element from the same position of the (broadcast) inputs.
    Elementwise(ElementwiseOp),
    /// Sums, means, extrema and argmax over axes.
    Reduction(ReductionOp),
    /// Shape changes and data movement.
    Layout(LayoutOp),
    /// Selecting and scattering by integer indices.
    Index(IndexOp),
    /// Matrix products.
    Linalg(LinalgOp),
    /// Softmax and the loss.
    Nn(NnOp),
    /// Convolution and pooling.
    Conv(ConvOp),
    /// Random draws from a generator's state.
    Random(RandomOp),
    /// All-reduce, broadcast and all-gather across the ranks of a distributed job.
    Collective(CollectiveOp),
    /// Shape ops whose sizes a relaxed trace computes at run time from the call's dims.
    SymShape(SymShapeOp),
}

/// One family of ops: everything an op needs to run eagerly, trace, and differentiate.
pub(crate) trait Family {
    /// The op's name in graph text (`add`, `matmul`, ...).
    fn name(&self) -> &'static str;
    /// The PyTorch-style name of its backward node.
    fn grad_fn_name(&self) -> &'static str;
    /// The attributes as graph text (empty when there are none).
    fn attrs(&self) -> String;
    /// The output dtype and shape for inputs of these types, or the error the op gives.
    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)>;
    /// Runs the op's kernel. Inputs have passed `infer`.
    fn compute(&self, inputs: &[&Storage]) -> Result<Storage>;
    /// The gradients of the inputs, written with tensor ops (so they trace, and higher-order
    /// gradients follow), from the output gradient `g`.
    fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads>;
    /// What the backward needs kept from the forward pass.
    fn saves(&self) -> Saves;
    /// True when the output can carry a gradient.
    fn is_differentiable(&self) -> bool;
}

/// Runs `$body` with `$f` bound to the family op inside `$op`.
macro_rules! each_family {
    ($op:expr, $f:ident => $body:expr) => {
        match $op {
            Op::Elementwise($f) => $body,
            Op::Reduction($f) => $body,
            Op::Layout($f) => $body,
            Op::Index($f) => $body,
            Op::Linalg($f) => $body,
            Op::Nn($f) => $body,
            Op::Conv($f) => $body,
            Op::Random($f) => $body,
            Op::Collective($f) => $body,
            Op::SymShape($f) => $body,
        }
    };
}

macro_rules! into_op {
    ($($family:ident => $variant:ident),*) => {$(
        impl From<$family> for Op {
            fn from(op: $family) -> Op {
                Op::$variant(op)
            }
        }
    )*};
}
into_op!(ElementwiseOp => Elementwise, ReductionOp => Reduction, LayoutOp => Layout, IndexOp => Index, LinalgOp => Linalg, NnOp => Nn, ConvOp => Conv, RandomOp => Random, CollectiveOp => Collective, SymShapeOp => SymShape);

/// The dtype and shape of an op's input or output.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TypeRef<'a> {
    pub dtype: DType,
    pub shape: &'a Shape,
}

impl Op {
    /// The op's name in graph text (`add`, `matmul`, ...).
    ///
    /// ```
    /// use tensor_core::ops::{LinalgOp, Op};
    /// assert_eq!(Op::Linalg(LinalgOp::MATMUL).name(), "matmul");
    /// ```
    pub fn name(&self) -> &'static str {
        each_family!(self, f => f.name())
    }

    /// The PyTorch-style name of this op's backward node (`AddBackward`, ...).
    ///
    /// ```
    /// use tensor_core::ops::{LinalgOp, Op};
    /// assert_eq!(Op::Linalg(LinalgOp::MATMUL).grad_fn_name(), "MatmulBackward");
    /// ```
    pub fn grad_fn_name(&self) -> &'static str {
        each_family!(self, f => f.grad_fn_name())
    }

    /// The attributes as text for graph printing (empty when there are none).
    ///
    /// ```
    /// use tensor_core::ops::{ConvOp, LinalgOp, Op};
    /// assert_eq!(Op::Linalg(LinalgOp::MATMUL).attrs(), "");
    /// assert_eq!(Op::Conv(ConvOp::MaxPool2d { kernel: [2, 2], stride: [2, 2], padding: [0, 0] }).attrs(), "kernel=[2, 2] stride=[2, 2]");
    /// ```
    pub fn attrs(&self) -> String {
        each_family!(self, f => f.attrs())
    }

    /// True for ops whose output can carry a gradient (float outputs of differentiable ops).
    ///
    /// ```
    /// use tensor_core::ops::{CmpOp, ElementwiseOp, LinalgOp, Op};
    /// assert!(Op::Linalg(LinalgOp::MATMUL).is_differentiable());
    /// assert!(!Op::Elementwise(ElementwiseOp::Compare(CmpOp::Lt)).is_differentiable());
    /// ```
    pub fn is_differentiable(&self) -> bool {
        each_family!(self, f => f.is_differentiable())
    }

    /// True for ops computed independently per output element from the same position of
    /// their (broadcast) inputs: the ops elementwise fusion may merge.
    ///
    /// ```
    /// use tensor_core::ops::{BinaryOp, ElementwiseOp, LinalgOp, Op};
    /// assert!(Op::Elementwise(ElementwiseOp::Binary(BinaryOp::Add)).is_elementwise());
    /// assert!(!Op::Linalg(LinalgOp::MATMUL).is_elementwise());
    /// ```
    pub fn is_elementwise(&self) -> bool {
        matches!(self, Op::Elementwise(_))
    }

    /// The output dtype and shape for inputs of these types, or the error the op gives. An
    /// input of unknown rank goes to the rules of `unknown_rank.rs`, so no family meets one.
    pub(crate) fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        if inputs.iter().any(|t| t.shape.is_unknown_rank()) {
            return unknown_rank::infer(self, inputs);
        }
        each_family!(self, f => f.infer(inputs))
    }

    /// Runs the op's kernel. Inputs have passed `infer`.
    pub(crate) fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        each_family!(self, f => f.compute(inputs))
    }
}

/// An op recorded for backward runs its family's gradient on the one output's gradient.
impl Backward for Op {
    fn name(&self) -> &'static str {
        self.grad_fn_name()
    }

    fn saves(&self) -> Saves {
        each_family!(self, f => f.saves())
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<InputGrads> {
        let g = grads[0].as_ref().expect("the engine runs a node only with its output's gradient");
        each_family!(self, f => f.backward(ctx, g))
    }
}

/// Checks that `dtype` is float for `op`.
pub(crate) fn need_float(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(crate::error::Error::UnsupportedDType { op, dtype, needs: "a float dtype (f32 or f64)" })
    }
}

/// Checks that `dtype` is numeric (not bool) for `op`.
pub(crate) fn need_numeric(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.is_numeric() {
        Ok(())
    } else {
        Err(crate::error::Error::UnsupportedDType { op, dtype, needs: "a numeric dtype (f32, f64, i32 or i64)" })
    }
}
