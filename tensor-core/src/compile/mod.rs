//! The graph compiler: optimization passes over the IR — each a small type behind one trait,
//! each in its own file with its own tests — and the execution plan the executor runs with no
//! per-call analysis. No pass changes a value's bits.

mod control;
mod cpu_profile;
pub use cpu_profile::{cpu_profile, reset_cpu_profile};
// Data the GPU executor records; built and tested without the feature too.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod batching;
pub use batching::launch_summary;
mod cse;
mod dce;
mod epilogue;
mod executable;
mod fold;
mod fuse;
#[cfg(feature = "cuda")]
mod gpu;
mod implicit_broadcast;
#[cfg(feature = "cuda")]
pub use crate::cuda::set_cuda_fast_math;
#[cfg(feature = "cuda")]
pub use gpu::{cuda_arena_report, cuda_graph_counts, cuda_profile, set_cuda_arena, set_cuda_batching, ArenaReport};
// Data the GPU executor records; built and tested without the feature too.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod lanes;
pub use lanes::lane_summary;
mod lower;
mod memory_plan;
mod pad_sum;
mod pass;
mod simplify;

pub use control::optimize_subgraphs;
pub use cse::Cse;
pub use dce::Dce;
pub use epilogue::FuseEpilogue;
pub(crate) use executable::slot_dim;
pub use executable::{Executable, Outputs};
pub use fold::ConstantFold;
pub use fuse::Fuse;
pub use implicit_broadcast::ImplicitBroadcast;
pub use pad_sum::PadSumToConcat;
pub use pass::{
    cleanup, cleanup_passes, default_passes, lowering_passes, optimize, run_once, run_to_fixed_point, Pass, PassList, PassLog, MAX_ROUNDS,
};
pub use simplify::Simplify;

#[cfg(test)]
pub(crate) mod tests {
    use crate::function::ConcreteFunction;
    use crate::graph::Graph;
    use crate::prelude::*;

    /// The unoptimized graph of `body` with `args` as arguments.
    pub fn traced(args: &[&Tensor], body: impl FnOnce() -> Result<Vec<Tensor>>) -> Graph {
        let names: Vec<String> = (0..args.len()).map(|i| format!("a{i}")).collect();
        let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(args.iter().copied()).collect();
        let shapes: Vec<Shape> = args.iter().map(|t| t.raw_shape()).collect();
        let f = ConcreteFunction::trace_with_shapes("test", &named, &shapes, false, body).expect("traces");
        f.traced_graph().clone()
    }

    /// Asserts two graphs compute the same bits on `args` (unoptimized runs of each).
    #[track_caller]
    pub fn assert_same(before: &Graph, after: &Graph, args: &[&Tensor]) {
        let run = |g: &Graph| super::Executable::new(g, false).run(args).expect("runs");
        let (a, b) = (run(before), run(after));
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!(x.to_storage().unwrap().bit_eq(&y.to_storage().unwrap()), "results differ:\n{x}\n{y}");
        }
    }

    /// The graph's text from its first node on (its inputs' line left out).
    pub fn body(g: &Graph) -> String {
        g.to_text().lines().filter(|l| l.starts_with("  ")).collect::<Vec<_>>().join("\n")
    }
}
