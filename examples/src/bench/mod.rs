//! The benchmark workloads of `docs/WORKLOADS.md`: each one as tensor-core code (run
//! eagerly or as a graph) and, where defined, as hand-written ndarray code.

pub mod alloc;
pub mod baseline;
pub mod lenet;
pub mod roofline;
pub mod timing;
pub mod w7;
pub mod w9;
pub mod workloads;

/// How a workload runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// tensor-core, op by op.
    Eager,
    /// tensor-core, the same code traced once into a graph and replayed.
    Graph,
    /// tensor-core, the forward pass and loss as a graph function, backward and the
    /// optimizer eager (W3, W4): gradients flow through the graph call.
    GraphForward,
    /// Hand-written ndarray code (W1, W2, W3, W5).
    Ndarray,
    /// tract-onnx running the same ONNX model (W9; feature `tract`).
    Tract,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Eager => "eager",
            Mode::Graph => "graph",
            Mode::GraphForward => "graph-forward",
            Mode::Ndarray => "ndarray",
            Mode::Tract => "tract",
        }
    }
}

/// The workload ids, in order.
pub const WORKLOADS: [&str; 9] = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9"];
