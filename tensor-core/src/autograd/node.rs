//! Grad nodes: what one recorded op keeps for its backward — where each input's gradient
//! goes, the tensors the gradient formula needs (with the versions they had), and the
//! output's metadata. Outputs are saved as data, not handles, so a tensor and its grad node
//! never keep each other alive.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::shape::Shape;
use crate::tensor::{Tensor, TensorInner, Value};
use smallvec::SmallVec;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

/// Where the gradient of one input goes.
pub(crate) enum Edge {
    /// The input needs no gradient.
    None,
    /// The input is a leaf that requires grad: accumulate into its `.grad`.
    Leaf(Tensor),
    /// The input was output `n` of another recorded node.
    Node(Arc<GradNode>, usize),
}

/// A backward formula that is not one op's: control flow, whose gradient is itself built from
/// the recorded subgraphs. It keeps whatever it needs.
pub(crate) trait CustomBackward: Send + Sync {
    /// The node's name (`CondBackward`, `WhileBackward`).
    fn name(&self) -> &'static str;
    /// The gradients of the inputs from those of the outputs (`None`: no gradient reached
    /// that output), written with tensor ops.
    fn backward(&self, grads: &[Option<Tensor>], create_graph: bool) -> Result<crate::ops::InputGrads>;
}

/// How a node computes its input gradients.
pub(crate) enum Formula {
    Op(Op),
    Custom(Arc<dyn CustomBackward>),
}

/// One output of a node: its type, and a weak link to the tensor (for `retain_grad`).
struct Output {
    tensor: Mutex<Weak<TensorInner>>,
    dtype: DType,
    shape: Shape,
}

/// A tensor saved for backward with the version it had then.
#[derive(Clone)]
pub(crate) struct SavedTensor {
    tensor: Tensor,
    version: u64,
}

/// The output's value saved for backward, with a weak link to check its version.
#[derive(Clone)]
pub(crate) struct SavedOutput {
    value: Value,
    version: u64,
    tensor: Weak<TensorInner>,
}

#[derive(Clone)]
pub(crate) struct SavedValues {
    inputs: SmallVec<[Option<SavedTensor>; 2]>,
    output: Option<SavedOutput>,
}

enum Saved {
    Live(SavedValues),
    Released,
}

/// One recorded op of the backward graph.
pub(crate) struct GradNode {
    pub(crate) formula: Formula,
    pub(crate) edges: SmallVec<[Edge; 2]>,
    input_meta: SmallVec<[(DType, Shape); 2]>,
    saved: Mutex<Saved>,
    outputs: SmallVec<[Output; 1]>,
}

fn output_of(t: &Tensor) -> Output {
    Output { tensor: Mutex::new(Arc::downgrade(&t.0)), dtype: t.0.dtype, shape: t.0.shape.clone() }
}

impl GradNode {
    /// A node with a custom formula for several outputs.
    pub(crate) fn custom(formula: Arc<dyn CustomBackward>, inputs: &[&Tensor], outputs: &[&Tensor]) -> Arc<GradNode> {
        Arc::new(GradNode {
            formula: Formula::Custom(formula),
            edges: inputs.iter().map(|t| edge_for(t)).collect(),
            input_meta: inputs.iter().map(|t| (t.0.dtype, t.0.shape.clone())).collect(),
            saved: Mutex::new(Saved::Live(SavedValues { inputs: SmallVec::new(), output: None })),
            outputs: outputs.iter().map(|t| output_of(t)).collect(),
        })
    }

    /// The number of outputs.
    pub(crate) fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    pub(crate) fn new(op: Op, inputs: &[&Tensor], out: &Tensor) -> Arc<GradNode> {
        let saves = op.saves();
        let edges = inputs.iter().map(|t| edge_for(t)).collect();
        let input_meta = inputs.iter().map(|t| (t.0.dtype, t.0.shape.clone())).collect();
        let saved_inputs = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| (saves.inputs & (1 << i) != 0).then(|| SavedTensor { tensor: (*t).clone(), version: t.version() }))
            .collect();
        let output = saves.output.then(|| SavedOutput { value: out.read_value().clone(), version: out.version(), tensor: Arc::downgrade(&out.0) });
        Arc::new(GradNode {
            formula: Formula::Op(op),
            edges,
            input_meta,
            saved: Mutex::new(Saved::Live(SavedValues { inputs: saved_inputs, output })),
            outputs: smallvec::smallvec![output_of(out)],
        })
    }

    /// The PyTorch-style name (`MulBackward`, ...).
    pub fn name(&self) -> &'static str {
        match &self.formula {
            Formula::Op(op) => op.grad_fn_name(),
            Formula::Custom(c) => c.name(),
        }
    }

    /// What the op's formula saves (nothing for custom formulas, which keep their own).
    fn saves(&self) -> crate::ops::Saves {
        match &self.formula {
            Formula::Op(op) => op.saves(),
            Formula::Custom(_) => crate::ops::Saves::default(),
        }
    }

    /// The saved values, or the error a released graph gives.
    pub(crate) fn saved_values(&self) -> Result<SavedValues> {
        match &*self.saved.lock().unwrap_or_else(|e| e.into_inner()) {
            Saved::Live(v) => Ok(v.clone()),
            Saved::Released => Err(Error::GraphReleased { node: self.name() }),
        }
    }

    /// Frees the saved tensors (after a backward without retain_graph).
    pub(crate) fn release(&self) {
        let needs_saved = self.saves().inputs != 0 || self.saves().output;
        if needs_saved {
            *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Saved::Released;
        }
    }

    /// Output `n`'s tensor, if it is alive and still has this node as grad_fn.
    pub(crate) fn output_tensor(self: &Arc<Self>, n: usize) -> Option<Tensor> {
        let t = Tensor(self.outputs[n].tensor.lock().unwrap_or_else(|e| e.into_inner()).upgrade()?);
        let same = t.grad_fn_raw().is_some_and(|f| Arc::ptr_eq(&f, self)) && t.output_nr() == n;
        same.then_some(t)
    }

    /// Points output `n` at `t` (an in-place op's target, which takes this node as grad_fn).
    pub(crate) fn set_output_tensor(&self, n: usize, t: &Tensor) {
        *self.outputs[n].tensor.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&t.0);
    }

    pub(crate) fn out_meta(&self, n: usize) -> (DType, &Shape) {
        (self.outputs[n].dtype, &self.outputs[n].shape)
    }
}

fn edge_for(t: &Tensor) -> Edge {
    if !t.requires_grad_raw() {
        return Edge::None;
    }
    match t.grad_fn_raw() {
        Some(f) => Edge::Node(f, t.output_nr()),
        None => Edge::Leaf(t.clone()),
    }
}

/// What a backward formula can read: the saved inputs and output, and the inputs' types.
pub(crate) struct BackwardCtx<'a> {
    node: &'a Arc<GradNode>,
    saved: SavedValues,
    create_graph: bool,
}

impl<'a> BackwardCtx<'a> {
    pub(crate) fn new(node: &'a Arc<GradNode>, create_graph: bool) -> Result<Self> {
        let saved = match node.saved_values() {
            Ok(s) => s,
            // Nodes that save nothing can run again after release.
            Err(_) if node.saves().inputs == 0 && !node.saves().output => SavedValues { inputs: SmallVec::new(), output: None },
            Err(e) => return Err(e),
        };
        Ok(BackwardCtx { node, saved, create_graph })
    }

    /// Saved input `i`, checked against in-place changes since it was saved.
    pub fn input(&self, i: usize) -> Result<Tensor> {
        let s = self.saved.inputs.get(i).and_then(Option::as_ref).ok_or(Error::GraphReleased { node: self.node.name() })?;
        let found = s.tensor.version();
        if found != s.version {
            return Err(Error::SavedTensorModified { node: self.node.name(), expected: s.version, found });
        }
        Ok(s.tensor.clone())
    }

    /// The saved output; with create_graph it carries this node as grad_fn, so the gradient
    /// formula is itself differentiated through it.
    pub fn output(&self) -> Result<Tensor> {
        let s = self.saved.output.as_ref().ok_or(Error::GraphReleased { node: self.node.name() })?;
        if let Some(t) = s.tensor.upgrade() {
            let found = Tensor(t).version();
            if found != s.version {
                return Err(Error::SavedTensorModified { node: self.node.name(), expected: s.version, found });
            }
        }
        let (dtype, shape) = self.node.out_meta(0);
        let t = Tensor::from_value(s.value.clone(), dtype, shape.clone());
        if self.create_graph {
            // Linked to the node without becoming its registered output (the original tensor,
            // if alive, stays the one retain_grad looks at).
            t.0.requires_grad.store(true, std::sync::atomic::Ordering::Release);
            t.grad_slot().grad_fn = Some(self.node.clone());
        }
        Ok(t)
    }

    /// The shape input `i` had.
    pub fn input_shape(&self, i: usize) -> &Shape {
        &self.node.input_meta[i].1
    }

    /// The dtype input `i` had.
    pub fn input_dtype(&self, i: usize) -> DType {
        self.node.input_meta[i].0
    }

    /// How many inputs the op had.
    pub fn num_inputs(&self) -> usize {
        self.node.input_meta.len()
    }

    /// True when input `i` needs a gradient (lets formulas skip work).
    pub fn needs_grad(&self, i: usize) -> bool {
        !matches!(self.node.edges.get(i), Some(Edge::None) | None)
    }
}

/// A handle to a tensor's backward function, as PyTorch's `grad_fn`.
///
/// ```
/// # use tensor_core::prelude::*;
/// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
/// let y = (&w * 2.0).exp()?;
/// let f = y.grad_fn().unwrap();
/// assert_eq!(f.name(), "ExpBackward");
/// assert_eq!(f.next_functions()[0].name(), "MulBackward");
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone)]
pub struct GradFn(pub(crate) Arc<GradNode>);

/// Where a grad_fn sends one input's gradient (PyTorch's `next_functions` entries).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::autograd::NextFunction;
/// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
/// let y = w.mul(2.0)?.add(1.0)?;
/// let next = y.grad_fn().unwrap().next_functions();
/// assert!(matches!(&next[0], NextFunction::Node(f) if f.name() == "MulBackward"));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone)]
pub enum NextFunction {
    /// Another op's backward.
    Node(GradFn),
    /// A leaf's `.grad` (PyTorch's `AccumulateGrad`), with the leaf.
    AccumulateGrad(Tensor),
    /// No gradient flows to this input.
    None,
}

impl GradFn {
    /// The PyTorch-style name (`AddBackward`, `MulBackward`, ...).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// assert_eq!(w.add(&w)?.grad_fn().unwrap().name(), "AddBackward");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// Where the gradients of the op's inputs go, one entry per input.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::autograd::NextFunction;
    /// let (w, x) = (Tensor::scalar(1.0f32).requires_grad_(true)?, Tensor::scalar(2.0f32));
    /// let y = w.mul(&x)?;
    /// let next = y.grad_fn().unwrap().next_functions();
    /// assert!(matches!(&next[0], NextFunction::AccumulateGrad(leaf) if leaf.same_as(&w)));
    /// assert!(matches!(next[1], NextFunction::None)); // x does not require grad
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn next_functions(&self) -> Vec<NextFunction> {
        self.0
            .edges
            .iter()
            .map(|e| match e {
                Edge::None => NextFunction::None,
                Edge::Leaf(t) => NextFunction::AccumulateGrad(t.clone()),
                Edge::Node(n, _) => NextFunction::Node(GradFn(n.clone())),
            })
            .collect()
    }

    /// True when both handles are the same node.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let y = x.exp()?;
    /// assert!(y.grad_fn().unwrap().same_as(&y.grad_fn().unwrap()));
    /// assert!(!y.grad_fn().unwrap().same_as(&x.exp()?.grad_fn().unwrap()));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn same_as(&self, other: &GradFn) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl NextFunction {
    /// `MulBackward`, `AccumulateGrad`, or `None`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let names: Vec<&str> = w.mul(&w.exp()?)?.grad_fn().unwrap().next_functions().iter().map(|n| n.name()).collect();
    /// assert_eq!(names, ["AccumulateGrad", "ExpBackward"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            NextFunction::Node(f) => f.name(),
            NextFunction::AccumulateGrad(_) => "AccumulateGrad",
            NextFunction::None => "None",
        }
    }
}

impl fmt::Display for GradFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.name())
    }
}

impl fmt::Debug for GradFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for NextFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.name())
    }
}

impl fmt::Debug for NextFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
