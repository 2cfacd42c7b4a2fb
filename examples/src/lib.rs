//! Shared code of the example programs: the benchmark workloads and the data loaders.

pub mod bench;
pub mod data;
