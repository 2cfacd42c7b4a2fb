//! Shared code of the example programs: the benchmark workloads, the data loaders and the
//! GPT model.

pub mod bench;
pub mod data;
pub mod gpt;
pub mod run_mode;
