//! Grad nodes: what one recorded op keeps for its backward — where each input's gradient
//! goes, the tensors the gradient formula needs (with the versions they had), and the
//! output's metadata. Outputs are saved as data, not handles, so a tensor and its grad node
//! never keep each other alive.
//!
//! A tensor keeps the node that made it (its `grad_fn`); what the node computes is a
//! [`Backward`] formula defined above this layer (an op's, or control flow's), and the walk
//! over nodes is the autograd engine's. This file only records.

use super::grad_mode::is_grad_enabled;
use super::{Tensor, TensorInner, Value};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

/// The gradients of a node's inputs, `None` where an input gets none.
pub(crate) type InputGrads = SmallVec<[Option<Tensor>; 3]>;

/// Which inputs (bit i) and whether the output a formula needs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Saves {
    pub inputs: u8,
    pub output: bool,
}

impl Saves {
    /// Whether input `i` is saved (a node may have more inputs than the mask has bits, as a
    /// graph call does: those are never saved).
    pub(crate) fn saves_input(&self, i: usize) -> bool {
        i < u8::BITS as usize && self.inputs & (1 << i) != 0
    }

    /// The inputs whose bits are set in `mask`.
    pub(crate) fn inputs(mask: u8) -> Saves {
        Saves { inputs: mask, output: false }
    }

    /// The output only.
    pub(crate) fn output() -> Saves {
        Saves { inputs: 0, output: true }
    }
}

/// A backward formula: an op's, or one that is built from recorded subgraphs (control
/// flow), which keeps whatever it needs itself.
pub(crate) trait Backward: Send + Sync {
    /// The node's PyTorch-style name (`MulBackward`, `CondBackward`).
    fn name(&self) -> &'static str;
    /// What must be saved from the forward pass.
    fn saves(&self) -> Saves {
        Saves::default()
    }
    /// The gradients of the inputs from those of the outputs (`None`: no gradient reached
    /// that output), written with tensor ops so they trace and can be differentiated again.
    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<InputGrads>;
    /// Gives up what the formula keeps for its backward beyond the node's saved values (a
    /// graph call's slots and residuals), when the graph is freed or the node taken apart.
    /// Returns the tensors it held, so the caller drops them without recursion.
    fn release(&self) -> Vec<Tensor> {
        Vec::new()
    }
}

/// Where the gradient of one input goes.
pub(crate) enum Edge {
    /// The input needs no gradient.
    None,
    /// The input is a leaf that requires grad: accumulate into its `.grad`.
    Leaf(Tensor),
    /// The input was output `n` of another recorded node.
    Node(Arc<GradNode>, usize),
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

/// One recorded op of the backward graph. The formula comes last, so a node of any formula
/// type is also a `GradNode<dyn Backward>` (one allocation per node).
pub(crate) struct GradNode<F: ?Sized + Backward = dyn Backward> {
    pub(crate) edges: SmallVec<[Edge; 2]>,
    input_meta: SmallVec<[(DType, Shape); 2]>,
    saved: Mutex<Saved>,
    outputs: SmallVec<[Output; 1]>,
    pub(crate) formula: F,
}

/// Frees a node's part of the graph without recursion: the nodes and tensors only it kept
/// alive are taken apart one at a time from an explicit stack (as PyTorch's `deleteNode`
/// does), so a chain of any length drops on any stack.
impl<F: ?Sized + Backward> Drop for GradNode<F> {
    fn drop(&mut self) {
        let mut stack = Vec::new();
        self.take_children(&mut stack);
        while let Some(mut node) = stack.pop() {
            // The last handle to a node: empty it before it drops, so its own drop is shallow.
            if let Some(n) = Arc::get_mut(&mut node) {
                n.take_children(&mut stack);
            }
        }
    }
}

impl<F: ?Sized + Backward> GradNode<F> {
    /// Moves the nodes this node links to (through its edges and saved tensors) onto `stack`.
    fn take_children(&mut self, stack: &mut Vec<Arc<GradNode>>) {
        for edge in std::mem::take(&mut self.edges) {
            match edge {
                Edge::Node(n, _) => stack.push(n),
                Edge::Leaf(t) => take_history(t, stack),
                Edge::None => {}
            }
        }
        if let Saved::Live(values) = std::mem::replace(self.saved.get_mut().unwrap_or_else(|e| e.into_inner()), Saved::Released) {
            values.inputs.into_iter().flatten().for_each(|s| take_history(s.tensor, stack));
        }
        self.formula.release().into_iter().for_each(|t| take_history(t, stack));
    }
}

/// Drops `t`; if this was its last handle, its grad_fn (and its `.grad`'s) go onto `stack`
/// instead of being dropped inside it.
fn take_history(t: Tensor, stack: &mut Vec<Arc<GradNode>>) {
    if Arc::strong_count(&t.0) == 1 {
        let (grad_fn, grad) = {
            let mut slot = t.grad_slot();
            (slot.grad_fn.take(), slot.grad.take())
        };
        stack.extend(grad_fn);
        if let Some(g) = grad {
            take_history(g, stack);
        }
    }
}

fn output_of(t: &Tensor) -> Output {
    Output { tensor: Mutex::new(Arc::downgrade(&t.0)), dtype: t.0.dtype, shape: t.0.shape.clone() }
}

/// Records `out = formula(inputs)` for backward, when grad mode is on and an input requires
/// grad (float outputs only).
pub(crate) fn record<F: Backward + 'static>(formula: F, inputs: &[&Tensor], out: &Tensor) {
    record_many(formula, inputs, &[out]);
}

/// Records one node with `formula` for all of `outputs` (control flow has several).
pub(crate) fn record_many<F: Backward + 'static>(formula: F, inputs: &[&Tensor], outputs: &[&Tensor]) {
    if !is_grad_enabled() || !inputs.iter().any(|t| t.requires_grad_raw()) || !outputs.iter().any(|t| t.dtype().is_float()) {
        return;
    }
    let node: Arc<GradNode> = Arc::new(GradNode::new(formula, inputs, outputs));
    for (n, t) in outputs.iter().enumerate() {
        if t.dtype().is_float() {
            t.set_grad_fn(Some(node.clone()), n);
        }
    }
}

impl<F: Backward> GradNode<F> {
    fn new(formula: F, inputs: &[&Tensor], outputs: &[&Tensor]) -> GradNode<F> {
        let saves = formula.saves();
        let saved_inputs = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| saves.saves_input(i).then(|| SavedTensor { tensor: (*t).clone(), version: t.version() }))
            .collect();
        let out = outputs[0];
        let output = saves.output.then(|| SavedOutput { value: out.read_value().clone(), version: out.version(), tensor: Arc::downgrade(&out.0) });
        GradNode {
            edges: inputs.iter().map(|t| edge_for(t)).collect(),
            input_meta: inputs.iter().map(|t| (t.0.dtype, t.0.shape.clone())).collect(),
            saved: Mutex::new(Saved::Live(SavedValues { inputs: saved_inputs, output })),
            outputs: outputs.iter().map(|t| output_of(t)).collect(),
            formula,
        }
    }
}

impl GradNode {
    /// The number of outputs.
    pub(crate) fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// The PyTorch-style name (`MulBackward`, ...).
    pub(crate) fn name(&self) -> &'static str {
        self.formula.name()
    }

    /// The saved values, or the error a released graph gives.
    pub(crate) fn saved_values(&self) -> Result<SavedValues> {
        match &*self.saved.lock().unwrap_or_else(|e| e.into_inner()) {
            Saved::Live(v) => Ok(v.clone()),
            Saved::Released => Err(Error::GraphReleased { node: self.name() }),
        }
    }

    /// Frees the saved tensors (after a backward without retain_graph), and what the formula
    /// keeps itself.
    pub(crate) fn release(&self) {
        let saves = self.formula.saves();
        if saves.inputs != 0 || saves.output {
            *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Saved::Released;
        }
        drop(self.formula.release());
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
        let saves = node.formula.saves();
        let saved = match node.saved_values() {
            Ok(s) => s,
            // Nodes that save nothing can run again after release.
            Err(_) if saves.inputs == 0 && !saves.output => SavedValues { inputs: SmallVec::new(), output: None },
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

    /// `value`, a value the formula kept itself as output `n` of its node (a graph call's
    /// residuals): with create_graph it carries the node as grad_fn, as `output` does — a
    /// float one only, as `record_many` links only float outputs (a kept predicate or index
    /// carries no gradient).
    pub(crate) fn kept_output(&self, n: usize, value: Value) -> Tensor {
        let (dtype, shape) = self.node.out_meta(n);
        let t = Tensor::from_value(value, dtype, shape.clone());
        if self.create_graph && dtype.is_float() {
            t.0.requires_grad.store(true, std::sync::atomic::Ordering::Release);
            let mut slot = t.grad_slot();
            slot.grad_fn = Some(self.node.clone());
            slot.output_nr = n;
        }
        t
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

    /// True when the backward pass is itself recorded (for higher-order gradients).
    pub fn create_graph(&self) -> bool {
        self.create_graph
    }
}

// ------------------------------------------------------------- a tensor's autograd metadata

impl Tensor {
    /// The `requires_grad` flag as stored (no traced stand-in looked up).
    pub(crate) fn requires_grad_raw(&self) -> bool {
        self.0.requires_grad.load(Ordering::Acquire)
    }

    /// True when no recorded node made this handle's value.
    pub(crate) fn is_leaf_raw(&self) -> bool {
        self.grad_slot().grad_fn.is_none()
    }

    /// The node that made this handle's value.
    pub(crate) fn grad_fn_raw(&self) -> Option<Arc<GradNode>> {
        self.grad_slot().grad_fn.clone()
    }

    pub(crate) fn retains_grad(&self) -> bool {
        self.grad_slot().retains_grad
    }

    /// Makes `node` (output `n`) this tensor's grad_fn.
    pub(crate) fn set_grad_fn(&self, node: Option<Arc<GradNode>>, n: usize) {
        if let Some(f) = &node {
            self.0.requires_grad.store(true, Ordering::Release);
            f.set_output_tensor(n, self);
        }
        let mut slot = self.grad_slot();
        slot.grad_fn = node;
        slot.output_nr = n;
    }

    /// Which output of its grad_fn this tensor is.
    pub(crate) fn output_nr(&self) -> usize {
        self.grad_slot().output_nr
    }

    /// Cuts this tensor's history (an assignment from values that need no grad).
    pub(crate) fn detach_in_place(&self) {
        if !self.is_leaf_raw() {
            self.grad_slot().grad_fn = None;
            self.0.requires_grad.store(false, Ordering::Release);
        }
    }

    /// A new handle to the current value with the same history: what an in-place op's new
    /// grad node saves as "the old value".
    pub(crate) fn alias(&self) -> Tensor {
        let t = Tensor::from_value(self.read_value().clone(), self.0.dtype, self.0.shape.clone());
        t.0.requires_grad.store(self.requires_grad_raw(), Ordering::Release);
        let (f, n) = (self.grad_fn_raw(), self.output_nr());
        {
            let mut slot = t.grad_slot();
            slot.grad_fn = f;
            slot.output_nr = n;
        }
        t
    }

    /// Replaces `.grad`.
    pub(crate) fn set_grad_raw(&self, g: Option<Tensor>) {
        self.grad_slot().grad = g;
    }
}
