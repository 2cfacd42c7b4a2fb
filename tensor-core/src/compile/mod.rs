//! The graph compiler: optimization passes over the IR, and the execution plan the executor
//! runs with no per-call analysis.

mod executor;

pub use executor::Executable;
