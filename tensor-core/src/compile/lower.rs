//! Lowering a planned graph to what the CPU runs: the one place where the IR's descriptions
//! become code. A `Fused` node's program is compiled to its loops (and, where it can be, one
//! generated loop, see `kernels::fused::jit`); an `Epilogue` node's program likewise, to run
//! on its anchor's output; a `Cond` or `While` node's subgraphs are optimized and planned.
//! Every other node runs its own kernel and needs nothing built.
//!
//! The graph keeps only descriptions, so an export writes and loads no code, and a second
//! executor reads the same plan: the GPU executor (`gpu.rs`, feature `cuda`) takes each step
//! of the plan as it is and generates CUDA from the same program descriptions.

use super::control::ControlPlan;
use super::memory_plan::Step;
use crate::graph::NodeKind;
use crate::kernels::fused::CompiledProgram;

/// What the CPU executor runs for one step of a plan.
pub(super) enum CpuStep {
    /// The node's own kernel (`Op::compute`), a print, a gradient accumulation.
    Node,
    /// A `Fused` node's program, compiled.
    Fused(CompiledProgram),
    /// An `Epilogue` node's program, compiled; the anchor runs its own kernel.
    Epilogue(CompiledProgram),
    /// A `Cond` or `While` node's planned subgraphs (boxed: four executables).
    Control(Box<ControlPlan>),
}

/// Lowers one step of a plan for the CPU. With `optimize`, a control node's subgraphs are
/// optimized first (see [`optimize_subgraphs`](super::optimize_subgraphs)); a fused program
/// whose step `streams` writes its outputs with streaming stores (see `Step::streams`).
pub(super) fn lower(step: &Step, optimize: bool) -> CpuStep {
    match &step.node.kind {
        NodeKind::Fused(p) => CpuStep::Fused(CompiledProgram::for_step(p, step.streams)),
        NodeKind::Epilogue(e) => CpuStep::Epilogue(CompiledProgram::new(&e.program)),
        kind @ (NodeKind::Cond { .. } | NodeKind::While { .. }) => {
            CpuStep::Control(Box::new(ControlPlan::new(kind, optimize).expect("a control node")))
        }
        NodeKind::Op(_) | NodeKind::Print(_) | NodeKind::AccumulateGrad { .. } => CpuStep::Node,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::memory_plan::Plan;
    use crate::compile::tests::traced;
    use crate::compile::{optimize, Executable};
    use crate::prelude::*;

    #[test]
    fn the_graph_holds_descriptions_and_the_lowering_compiles_them() -> Result<()> {
        let (x, w) = (Tensor::randn(&[4, 3], DType::F32, 1), Tensor::randn(&[3, 3], DType::F32, 2));
        let g = optimize(&traced(&[&x, &w], || Ok(vec![x.matmul(&w)?.tanh()?, x.mul(2.0)?.exp()?])), None);
        let lowered: Vec<CpuStep> = Plan::new(&g).steps.iter().map(|s| lower(s, false)).collect();
        let fused = lowered.iter().find_map(|s| if let CpuStep::Fused(p) = s { Some(p) } else { None }).expect("a fused step");
        assert_eq!(fused.program().summary(), "mul,exp");
        let epilogue = lowered.iter().find_map(|s| if let CpuStep::Epilogue(p) = s { Some(p) } else { None }).expect("an epilogue step");
        assert_eq!(epilogue.program().summary(), "tanh");
        assert_eq!(Executable::new(&g, false).run(&[&x, &w])?.len(), 2);
        Ok(())
    }
}
