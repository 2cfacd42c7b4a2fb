//! Replaying a subgraph through the op dispatch, on given inputs: inside the trace of a
//! gradient this rebuilds a branch's or a loop body's forward computation with autograd
//! recording, so its vector-Jacobian product can be taken. Prints are not replayed.

use crate::error::Result;
use crate::graph::{Graph, InputSource, NodeKind};
use crate::ops::dispatch::apply;
use crate::tensor::Tensor;

/// The outputs of `g` computed from `params` (one tensor per graph parameter).
pub(super) fn replay(g: &Graph, params: &[Tensor]) -> Result<Vec<Tensor>> {
    let mut vals: Vec<Option<Tensor>> = vec![None; g.values.len()];
    for (v, src) in &g.inputs {
        let InputSource::Param(k) = src else { unreachable!("subgraphs read only parameters") };
        vals[*v] = Some(params[*k].clone());
    }
    for (v, s) in &g.constants {
        vals[*v] = Some(Tensor::from_storage(s.clone()));
    }
    for node in &g.nodes {
        let ins: Vec<Tensor> = node.inputs.iter().map(|&v| vals[v].clone().expect("defined before use")).collect();
        let outs = match &node.kind {
            NodeKind::Op(op) => {
                let refs: Vec<&Tensor> = ins.iter().collect();
                vec![apply(op.clone(), &refs)?]
            }
            NodeKind::Print(_) => continue,
            NodeKind::Cond { then, other } => {
                let nt = then.num_params;
                super::cond::cond_graphs(&ins[0], (**then).clone(), (**other).clone(), &ins[1..1 + nt], &ins[1 + nt..])?
            }
            NodeKind::While { cond, body, max_iterations, .. } => {
                let n = node.outputs.len().min(body.outputs.len());
                let nc = cond.num_params - n;
                let types: Vec<_> = body.outputs.iter().map(|&v| (body.values[v].dtype, body.values[v].shape.clone())).collect();
                super::while_loop::while_graphs(
                    &ins[..n],
                    (**cond).clone(),
                    (**body).clone(),
                    &ins[n..n + nc],
                    &ins[n + nc..],
                    *max_iterations,
                    &types,
                )?
            }
            NodeKind::AccumulateGrad { .. } | NodeKind::Fused(_) | NodeKind::Epilogue(_) => unreachable!("not in a traced subgraph"),
        };
        for (&v, t) in node.outputs.iter().zip(outs) {
            vals[v] = Some(t);
        }
    }
    Ok(g.outputs.iter().map(|&v| vals[v].clone().expect("outputs are defined")).collect())
}
