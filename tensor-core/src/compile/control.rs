//! Running `Cond` and `While` nodes: each subgraph is optimized and planned once, like a
//! function's graph, and run on the node's input values.

use super::executor::Executable;
use crate::error::{Error, Result};
use crate::graph::NodeKind;
use crate::storage::Storage;
use smallvec::SmallVec;

/// The planned subgraphs of a control-flow node.
pub(super) enum ControlPlan {
    Cond { then: Executable, other: Executable, then_params: usize },
    While { cond: Executable, body: Executable, max_iterations: Option<usize>, history: bool, cond_params: usize },
}

impl ControlPlan {
    /// The plan of a `Cond` or `While` node (`None` for other nodes).
    pub(super) fn new(kind: &NodeKind, optimize: bool) -> Option<ControlPlan> {
        match kind {
            NodeKind::Cond { then, other } => Some(ControlPlan::Cond {
                then: Executable::new(then, optimize),
                other: Executable::new(other, optimize),
                then_params: then.num_params,
            }),
            NodeKind::While { cond, body, max_iterations, history } => Some(ControlPlan::While {
                cond: Executable::new(cond, optimize),
                body: Executable::new(body, optimize),
                max_iterations: *max_iterations,
                history: *history,
                cond_params: cond.num_params,
            }),
            _ => None,
        }
    }

    /// Runs the node on its inputs.
    pub(super) fn run(&self, inputs: &[&Storage]) -> Result<SmallVec<[Storage; 1]>> {
        match self {
            ControlPlan::Cond { then, other, then_params } => {
                let params: Vec<Storage> = inputs[1..].iter().map(|s| (*s).clone()).collect();
                let outs = if truth(inputs[0])? { then.run_params(&params[..*then_params])? } else { other.run_params(&params[*then_params..])? };
                Ok(outs.into())
            }
            ControlPlan::While { cond, body, max_iterations, history, cond_params } => {
                let n = body.graph().outputs.len();
                let captured_by_cond = cond_params - n;
                let cond_extra = &inputs[n..n + captured_by_cond];
                let body_extra = &inputs[n + captured_by_cond..];
                let mut vars: Vec<Storage> = inputs[..n].iter().map(|s| (*s).clone()).collect();
                let mut seen: Vec<Vec<Storage>> = vec![Vec::new(); n];
                let mut trips = 0usize;
                while max_iterations.is_none_or(|m| trips < m) {
                    let go = cond.run_params(&with_extra(&vars, cond_extra))?;
                    if !truth(&go[0])? {
                        break;
                    }
                    if *history {
                        seen.iter_mut().zip(&vars).for_each(|(h, v)| h.push(v.clone()));
                    }
                    vars = body.run_params(&with_extra(&vars, body_extra))?;
                    trips += 1;
                }
                let mut outs: SmallVec<[Storage; 1]> = vars.into();
                if *history {
                    outs.push(Storage::I64(ndarray::arr0(trips as i64).into_dyn().into_shared()));
                    for (k, h) in seen.iter().enumerate() {
                        outs.push(stack(h, inputs[k]));
                    }
                }
                Ok(outs)
            }
        }
    }
}

/// The loop variables followed by a subgraph's captured values.
fn with_extra(vars: &[Storage], extra: &[&Storage]) -> Vec<Storage> {
    vars.iter().cloned().chain(extra.iter().map(|s| (*s).clone())).collect()
}

/// The value of a scalar bool predicate.
fn truth(s: &Storage) -> Result<bool> {
    match s {
        Storage::Bool(a) if a.len() == 1 => Ok(*a.iter().next().expect("one element")),
        other => Err(Error::invalid("cond/while_loop", "predicate", format!("must be one bool value, found {}{}", other.dtype(), other.shape()))),
    }
}

/// The saved values of one loop variable (whose initial value is `first`) stacked along a
/// new first dim: `[0, ...]` if the loop never ran.
fn stack(values: &[Storage], first: &Storage) -> Storage {
    let shape = first.shape();
    let dims = |n: usize| -> Vec<usize> { std::iter::once(n).chain(shape.dims().iter().copied()).collect() };
    if values.is_empty() {
        return Storage::full(&crate::Shape::from(dims(0)), first.dtype(), crate::Scalar::Int(0));
    }
    let parts: Vec<Storage> = values.iter().map(|v| crate::map_array!(v, a => crate::kernels::layout::reshape(a, &dims(1)))).collect();
    let refs: Vec<&Storage> = parts.iter().collect();
    crate::ops::Op::Layout(crate::ops::LayoutOp::Concat { axis: 0 }).compute(&refs).expect("loop variables keep their dtype and shape")
}
