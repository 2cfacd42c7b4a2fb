//! Shared code of the example programs: the benchmark workloads.

pub mod bench;
