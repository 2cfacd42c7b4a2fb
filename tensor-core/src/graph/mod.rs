//! The graph IR: values (dtype and shape, dims possibly unknown), nodes in program order
//! (ops, `tprint!`s, gradient accumulations into external state, control flow), inputs that
//! read external tensors' data or `.grad` at each call, and the state writes applied after a
//! run. A traced graph is a pure function of its inputs to its outputs and writes, with
//! prints as ordered side effects.

mod dot;
mod text;
mod validate;

pub use validate::validate;

use crate::dtype::DType;
use crate::ops::Op;
use crate::shape::Shape;
use crate::storage::Storage;
use smallvec::SmallVec;
use std::sync::Arc;

/// The index of a value in `Graph::values`.
pub type ValueId = usize;

/// The type of a graph value, and the name it prints with.
#[derive(Clone, Debug)]
pub struct ValueInfo {
    pub dtype: DType,
    pub shape: Shape,
    pub name: String,
}

/// Where a graph input comes from at each call. Slots number the external tensors: first the
/// tensor leaves of the arguments, then the captured tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputSource {
    /// The slot's data.
    Data(usize),
    /// The slot's `.grad` (which was present when traced).
    Grad(usize),
    /// Parameter `k` of a subgraph (a `cond` branch, a `while_loop` condition or body): the
    /// value its node passes in.
    Param(usize),
}

/// One formatted piece of a `tprint!` line.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PrintPiece {
    /// Text fixed at trace time.
    Text(String),
    /// The run-time value of node input `i`, with the placeholder's format spec.
    Value(usize, crate::trace::FormatSpec),
}

/// What a node does.
#[derive(Clone, Debug)]
pub enum NodeKind {
    /// An op: one output.
    Op(Op),
    /// Prints its inputs, formatted into the pieces, on every run.
    Print(Vec<PrintPiece>),
    /// `.grad` of `slot` as it was when the call started, plus the input (or just the input
    /// if `.grad` was empty): the first gradient accumulation into external state.
    AccumulateGrad { slot: usize },
    /// Several elementwise ops over one shape, in one pass over memory (made by the fusion
    /// pass); outputs are the program's outputs.
    Fused(Arc<crate::kernels::fused::FusedProgram>),
    /// A matmul or convolution whose output an elementwise program consumes as it is made
    /// (made by the epilogue pass; see [`Epilogue`]).
    Epilogue(Arc<Epilogue>),
    /// Runs `then` or `other` by the scalar bool input 0; the rest of the inputs feed the
    /// branch; the outputs are the branch's.
    Cond { then: Arc<Graph>, other: Arc<Graph> },
    /// Loops `body` while `cond` gives true. Inputs: the initial loop variables, then the values
    /// `cond` captured, then those `body` captured (each subgraph's parameters are the loop
    /// variables followed by its captures). Outputs: the final loop variables; with `history`
    /// (when gradients flow through the loop) also the trip count (i64) and, per variable, its
    /// values at the start of every iteration stacked along a new first dim.
    While { cond: Arc<Graph>, body: Arc<Graph>, max_iterations: Option<usize>, history: bool },
}

/// An anchor op (`matmul` or `conv2d`) with an elementwise program run on its output while
/// that output is still in cache: a convolution hands each image's output to the program as
/// soon as its GEMM is done, a matmul its whole output, written in place. The program sees
/// exactly the values the anchor alone would give, so the bits do not change.
///
/// The node's inputs are the anchor's inputs, then the program's other inputs in order; its
/// outputs are the anchor's output when something else reads it (`keep_anchor`), then the
/// program's outputs.
#[derive(Clone, Debug)]
pub struct Epilogue {
    pub anchor: Op,
    /// How many of the node's inputs are the anchor's.
    pub arity: usize,
    pub program: Arc<crate::kernels::fused::FusedProgram>,
    /// The program input the anchor's output feeds.
    pub slot: usize,
    pub keep_anchor: bool,
}

impl Epilogue {
    /// The name it prints with: `matmul+fused[add,relu]`.
    pub fn summary(&self) -> String {
        format!("{}+fused[{}]", self.anchor.name(), self.program.summary())
    }
}

/// One node: its kind, input values and output values.
#[derive(Clone, Debug)]
pub struct Node {
    pub kind: NodeKind,
    pub inputs: SmallVec<[ValueId; 3]>,
    pub outputs: SmallVec<[ValueId; 1]>,
}

/// A state write applied after the run, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateWrite {
    /// The slot's data becomes the value (an in-place update inside the graph).
    Data { slot: usize, value: ValueId },
    /// The slot's `.grad` becomes the value, or is cleared.
    Grad { slot: usize, value: Option<ValueId> },
}

/// A traced computation.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// The function's name, for printing.
    pub name: String,
    pub values: Vec<ValueInfo>,
    pub nodes: Vec<Node>,
    /// Values read from external tensors at each call.
    pub inputs: Vec<(ValueId, InputSource)>,
    /// Values fixed at trace time (tensors created inside the traced code).
    pub constants: Vec<(ValueId, Storage)>,
    pub outputs: Vec<ValueId>,
    pub writes: Vec<StateWrite>,
    /// How many slots are argument leaves (the rest are captures).
    pub num_arg_slots: usize,
    /// Slot names for printing (argument names, `capture_N`).
    pub slot_names: Vec<String>,
    /// How many parameters a subgraph takes (0 for a function's graph).
    pub num_params: usize,
}

impl Graph {
    /// A new empty graph.
    pub fn new(name: &str) -> Graph {
        Graph { name: name.to_string(), ..Graph::default() }
    }

    /// Adds a value and returns its id.
    pub fn add_value(&mut self, dtype: DType, shape: Shape, name: Option<String>) -> ValueId {
        let id = self.values.len();
        let name = name.unwrap_or_else(|| format!("v{id}"));
        self.values.push(ValueInfo { dtype, shape, name });
        id
    }

    /// Appends a node with one new output value of the given type.
    pub fn add_node(&mut self, kind: NodeKind, inputs: &[ValueId], dtype: DType, shape: Shape) -> ValueId {
        let out = self.add_value(dtype, shape, None);
        self.nodes.push(Node { kind, inputs: SmallVec::from_slice(inputs), outputs: smallvec::smallvec![out] });
        out
    }

    /// The number of nodes running op `name` (for tests and introspection).
    pub fn count_op(&self, name: &str) -> usize {
        self.nodes.iter().filter(|n| n.kind_name() == name).count()
    }

    /// The number of slots (argument leaves and captures).
    pub fn num_slots(&self) -> usize {
        self.slot_names.len()
    }
}

impl Node {
    /// The name the node prints with (`add`, `tprint`, `cond`, ...).
    pub fn kind_name(&self) -> &str {
        match &self.kind {
            NodeKind::Op(op) => op.name(),
            NodeKind::Print(_) => "tprint",
            NodeKind::AccumulateGrad { .. } => "accumulate_grad",
            NodeKind::Fused(_) => "fused",
            NodeKind::Epilogue(_) => "epilogue",
            NodeKind::Cond { .. } => "cond",
            NodeKind::While { .. } => "while",
        }
    }

    /// True for nodes that must run even if no output is used, in program order.
    pub fn has_side_effect(&self) -> bool {
        match &self.kind {
            NodeKind::Print(_) => true,
            NodeKind::Cond { then, other } => then.has_side_effects() || other.has_side_effects(),
            NodeKind::While { cond, body, .. } => cond.has_side_effects() || body.has_side_effects(),
            _ => false,
        }
    }
}

impl Graph {
    /// True if any node prints (directly or inside control flow).
    pub fn has_side_effects(&self) -> bool {
        self.nodes.iter().any(Node::has_side_effect)
    }
}
