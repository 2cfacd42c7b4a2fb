//! The graph IR: values (dtype and shape, dims possibly unknown), nodes in program order
//! (ops, `tprint!`s, gradient accumulations into external state, control flow), inputs that
//! read external tensors' data or `.grad` at each call, and the state writes applied after a
//! run. A traced graph is a pure function of its inputs to its outputs and writes, with
//! prints as ordered side effects.

mod dot;
mod print;
mod reach;
mod text;
mod uses;
mod validate;

pub(crate) use print::{format_display, pad, render};
pub use print::{FormatSpec, PrintPiece};
pub use validate::validate;

use crate::dtype::DType;
use crate::ops::Op;
use crate::shape::Shape;
use crate::storage::Storage;
use smallvec::SmallVec;
use std::sync::Arc;

pub use crate::math::{FusedProgram, Instr, Operand};
pub use crate::tensor::ValueId;

/// The type of a graph value, and the name it prints with.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::graph::Graph;
/// let mut g = Graph::new("g");
/// let v = g.add_value(DType::I64, Shape::new(&[3]), Some("labels".into()));
/// let info = &g.values[v];
/// assert_eq!((info.dtype, info.shape.dims(), info.name.as_str()), (DType::I64, &[3][..], "labels"));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ValueInfo {
    /// The element type.
    pub dtype: DType,
    /// The shape (dims may be unknown).
    pub shape: Shape,
    /// The name it prints with (`x`, `v12`).
    pub name: String,
}

/// Where a graph input comes from at each call. Slots number the external tensors: first the
/// tensor leaves of the arguments, then the captured tensors.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// use tensor_core::graph::InputSource;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?]))?;
/// assert_eq!(f.graph().inputs[0].1, InputSource::Data(0)); // the data of slot 0, `x`
/// # Ok::<(), tensor_core::Error>(())
/// ```
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

/// What a node does.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// use tensor_core::graph::NodeKind;
/// let x = Tensor::ones(&[2, 2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.matmul(&x)?.relu()?]))?;
/// assert!(matches!(f.graph().nodes[0].kind, NodeKind::Epilogue(_))); // matmul with relu on its output
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub enum NodeKind {
    /// An op: one output.
    Op(Op),
    /// Prints its inputs, formatted into the pieces, on every run.
    Print(Vec<PrintPiece>),
    /// `.grad` of `slot` as it was when the call started, plus the input (or just the input
    /// if `.grad` was empty): the first gradient accumulation into external state.
    AccumulateGrad {
        /// The slot whose `.grad` is read.
        slot: usize,
    },
    /// Several elementwise ops over one shape, in one pass over memory (made by the fusion
    /// pass); outputs are the program's outputs. The program is a description: it is compiled
    /// when the graph is lowered to an `Executable`.
    Fused(Arc<FusedProgram>),
    /// A matmul or convolution whose output an elementwise program consumes as it is made
    /// (made by the epilogue pass; see [`Epilogue`]).
    Epilogue(Arc<Epilogue>),
    /// Runs `then` or `other` by the scalar bool input 0; the rest of the inputs feed the
    /// branch; the outputs are the branch's.
    Cond {
        /// The branch run when the predicate is true.
        then: Arc<Graph>,
        /// The branch run when it is false.
        other: Arc<Graph>,
    },
    /// Loops `body` while `cond` gives true. Inputs: the initial loop variables, then the values
    /// `cond` captured, then those `body` captured (each subgraph's parameters are the loop
    /// variables followed by its captures). Outputs: the final loop variables; with `history`
    /// (when gradients flow through the loop) also the trip count (i64) and, per variable, its
    /// values at the start of every iteration stacked along a new first dim.
    While {
        /// The condition: loop variables (and its captures) to a scalar bool.
        cond: Arc<Graph>,
        /// The body: loop variables (and its captures) to the next loop variables.
        body: Arc<Graph>,
        /// Stop after this many iterations even if `cond` still holds.
        max_iterations: Option<usize>,
        /// Whether the node also outputs the trip count and every iteration's variables.
        history: bool,
    },
}

/// An anchor op (`matmul` or `conv2d`) with an elementwise program run on its output while
/// that output is still in cache: a convolution hands each image's output to the program as
/// soon as its GEMM is done, a matmul its whole output, written in place. The program sees
/// exactly the values the anchor alone would give, so the bits do not change.
///
/// The node's inputs are the anchor's inputs, then the program's other inputs in order; its
/// outputs are the anchor's output when something else reads it (`keep_anchor`), then the
/// program's outputs.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// use tensor_core::graph::NodeKind;
/// let (x, w, b) = (Tensor::ones(&[4, 3], DType::F32), Tensor::ones(&[3, 2], DType::F32), Tensor::ones(&[2], DType::F32));
/// let f = ConcreteFunction::trace("dense", &[("x", &x)], || Ok(vec![x.matmul(&w)?.add(&b)?.relu()?]))?;
/// let NodeKind::Epilogue(e) = &f.graph().nodes[0].kind else { panic!("{}", f.to_text()) };
/// assert_eq!(e.summary(), "matmul+fused[add,relu]");
/// assert!(!e.keep_anchor); // nothing else reads the product
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Epilogue {
    /// The op whose output the program consumes (`matmul`, `conv2d` or `depthwise2d`).
    pub anchor: Op,
    /// How many of the node's inputs are the anchor's.
    pub arity: usize,
    /// The elementwise program run on the anchor's output.
    pub program: Arc<FusedProgram>,
    /// The program input the anchor's output feeds.
    pub slot: usize,
    /// Whether the anchor's output is also a node output (something else reads it).
    pub keep_anchor: bool,
}

impl Epilogue {
    /// The name it prints with: `matmul+fused[add,relu]`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// use tensor_core::graph::NodeKind;
    /// let x = Tensor::ones(&[1, 1, 4, 4], DType::F32);
    /// let w = Tensor::ones(&[2, 1, 3, 3], DType::F32);
    /// let f = ConcreteFunction::trace("conv", &[("x", &x)], || Ok(vec![x.conv2d(&w, None, [1, 1], [1, 1])?.tanh()?]))?;
    /// let NodeKind::Epilogue(e) = &f.graph().nodes[0].kind else { panic!("{}", f.to_text()) };
    /// assert_eq!(e.summary(), "conv2d+fused[tanh]");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn summary(&self) -> String {
        format!("{}+fused[{}]", self.anchor.name(), self.program.summary())
    }
}

/// One node: its kind, input values and output values.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?]))?;
/// let node = &f.graph().nodes[0];
/// assert_eq!((node.kind_name(), node.inputs.len(), node.outputs.len()), ("exp", 1, 1));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Node {
    /// What the node does.
    pub kind: NodeKind,
    /// The values it reads, in the order its kind expects.
    pub inputs: SmallVec<[ValueId; 3]>,
    /// The values it defines.
    pub outputs: SmallVec<[ValueId; 1]>,
}

/// A state write applied after the run, in order.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// use tensor_core::graph::StateWrite;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || {
///     x.add_(1.0)?; // an in-place update of the argument: written back after each call
///     Ok(vec![])
/// })?;
/// assert!(matches!(f.graph().writes[0], StateWrite::Data { slot: 0, .. }));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateWrite {
    /// The slot's data becomes the value (an in-place update inside the graph).
    Data {
        /// The external tensor written.
        slot: usize,
        /// Its new data.
        value: ValueId,
    },
    /// The slot's `.grad` becomes the value, or is cleared.
    Grad {
        /// The external tensor whose `.grad` is written.
        slot: usize,
        /// Its new `.grad` (`None`: cleared).
        value: Option<ValueId>,
    },
}

/// A traced computation.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(3.0)?]))?;
/// let g = f.graph();
/// assert_eq!((g.inputs.len(), g.nodes.len(), g.outputs.len()), (1, 1, 1));
/// assert!(tensor_core::graph::validate(g).is_ok());
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// The function's name, for printing.
    pub name: String,
    /// Every value's type and name, indexed by `ValueId`.
    pub values: Vec<ValueInfo>,
    /// The nodes in program order.
    pub nodes: Vec<Node>,
    /// Values read from external tensors at each call.
    pub inputs: Vec<(ValueId, InputSource)>,
    /// Values fixed at trace time (tensors created inside the traced code).
    pub constants: Vec<(ValueId, Storage)>,
    /// The values returned.
    pub outputs: Vec<ValueId>,
    /// The state writes applied after a run, in order.
    pub writes: Vec<StateWrite>,
    /// How many slots are argument leaves (the rest are captures).
    pub num_arg_slots: usize,
    /// Slot names for printing (argument names, `capture_N`).
    pub slot_names: Vec<String>,
    /// How many parameters a subgraph takes (0 for a function's graph).
    pub num_params: usize,
    /// For values whose unknown dims a relaxed trace named: each dim's expression over the
    /// argument dims (`n0`, `n0 * 2`; `None` where none is known), for printing
    /// (`f32[n0, 784]`).
    pub dim_names: std::collections::HashMap<ValueId, Vec<Option<crate::dim::SymDim>>>,
}

impl Graph {
    /// A new empty graph.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::graph::Graph;
    /// let g = Graph::new("empty");
    /// assert_eq!((g.name.as_str(), g.nodes.len()), ("empty", 0));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(name: &str) -> Graph {
        Graph { name: name.to_string(), ..Graph::default() }
    }

    /// The shape of value `v` as text, its unknown dims named where the trace could name
    /// them (`[n0, 784]`; else `[?, 784]`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::graph::Graph;
    /// let mut g = Graph::new("g");
    /// let v = g.add_value(DType::F32, Shape::new(&[3]), None);
    /// assert_eq!(g.shape_text(v), "[3]");
    /// ```
    pub fn shape_text(&self, v: ValueId) -> String {
        let shape = &self.values[v].shape;
        match self.dim_names.get(&v) {
            Some(names) if !shape.is_unknown_rank() && names.len() == shape.rank() => {
                let dims: Vec<String> = shape
                    .dims()
                    .iter()
                    .zip(names)
                    .map(|(&d, name)| match (d == crate::shape::UNKNOWN, name) {
                        (true, Some(name)) => name.to_string(),
                        (true, None) => "?".to_string(),
                        (false, _) => d.to_string(),
                    })
                    .collect();
                format!("[{}]", dims.join(", "))
            }
            _ => shape.to_string(),
        }
    }

    /// Adds a value and returns its id.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::graph::Graph;
    /// let mut g = Graph::new("g");
    /// assert_eq!(g.add_value(DType::F32, Shape::scalar(), None), 0);
    /// assert_eq!(g.add_value(DType::F32, Shape::scalar(), None), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn add_value(&mut self, dtype: DType, shape: Shape, name: Option<String>) -> ValueId {
        let id = self.values.len();
        let name = name.unwrap_or_else(|| format!("v{id}"));
        self.values.push(ValueInfo { dtype, shape, name });
        id
    }

    /// Appends a node with one new output value of the given type.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::graph::{Graph, InputSource, NodeKind};
    /// use tensor_core::ops::{ElementwiseOp, Op, UnaryOp};
    /// let mut g = Graph::new("g");
    /// g.slot_names.push("x".into());
    /// g.num_arg_slots = 1;
    /// let x = g.add_value(DType::F32, Shape::new(&[2]), Some("x".into()));
    /// g.inputs.push((x, InputSource::Data(0)));
    /// let y = g.add_node(NodeKind::Op(Op::Elementwise(ElementwiseOp::Unary(UnaryOp::Exp))), &[x], DType::F32, Shape::new(&[2]));
    /// g.outputs.push(y);
    /// assert!(tensor_core::graph::validate(&g).is_ok());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn add_node(&mut self, kind: NodeKind, inputs: &[ValueId], dtype: DType, shape: Shape) -> ValueId {
        let out = self.add_value(dtype, shape, None);
        self.nodes.push(Node { kind, inputs: SmallVec::from_slice(inputs), outputs: smallvec::smallvec![out] });
        out
    }

    /// The number of nodes running op `name` (for tests and introspection).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[x.shape()], false, || Ok(vec![x.exp()?.exp()?]))?;
    /// assert_eq!(f.graph().count_op("exp"), 2);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn count_op(&self, name: &str) -> usize {
        self.nodes.iter().filter(|n| n.kind_name() == name).count()
    }

    /// The number of slots (argument leaves and captures).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let (x, w) = (Tensor::ones(&[2], DType::F32), Tensor::ones(&[2], DType::F32));
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(&w)?]))?;
    /// assert_eq!((f.graph().num_slots(), f.graph().num_arg_slots), (2, 1)); // x, then the capture w
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn num_slots(&self) -> usize {
        self.slot_names.len()
    }
}

impl Node {
    /// The name the node prints with (`add`, `tprint`, `cond`, ...).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?.sqrt()?]))?;
    /// assert_eq!(f.graph().nodes[0].kind_name(), "fused");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
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
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || {
    ///     tprint!("{}", x);
    ///     Ok(vec![x.exp()?])
    /// })?;
    /// assert!(f.graph().nodes[0].has_side_effect() && !f.graph().nodes[1].has_side_effect());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
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
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?]))?;
    /// assert!(!f.graph().has_side_effects());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn has_side_effects(&self) -> bool {
        self.nodes.iter().any(Node::has_side_effect)
    }
}
