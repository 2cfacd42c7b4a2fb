//! Which modes a training example runs: eager, graph, or both from the same seed.

use clap::ValueEnum;

/// The `--mode` flag of the training examples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Modes {
    Eager,
    Graph,
    Both,
}

impl Modes {
    /// The runs this flag asks for, eager first.
    pub fn runs(self) -> &'static [Mode] {
        match self {
            Modes::Eager => &[Mode::Eager],
            Modes::Graph => &[Mode::Graph],
            Modes::Both => &[Mode::Eager, Mode::Graph],
        }
    }
}

/// One run's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Eager,
    Graph,
}

impl Mode {
    /// Its name in the examples' output.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Eager => "eager",
            Mode::Graph => "graph",
        }
    }
}
