//! The graph validator: every value is defined once before it is used, every op node's
//! output type is what its shape rule gives, and writes and inputs name real slots.

use super::{Graph, InputSource, NodeKind, StateWrite};
use crate::ops::TypeRef;

/// Checks the graph's structure; `Err` describes the first problem found.
///
/// ```
/// let g = tensor_core::graph::Graph::new("empty");
/// assert!(tensor_core::graph::validate(&g).is_ok());
/// ```
pub fn validate(g: &Graph) -> Result<(), String> {
    let mut defined = vec![false; g.values.len()];
    let define = |defined: &mut Vec<bool>, v: usize, what: &str| -> Result<(), String> {
        match defined.get_mut(v) {
            None => Err(format!("{what} defines value {v}, which does not exist")),
            Some(d) if *d => Err(format!("value {v} is defined twice (again by {what})")),
            Some(d) => {
                *d = true;
                Ok(())
            }
        }
    };
    for (v, src) in &g.inputs {
        match src {
            InputSource::Data(s) | InputSource::Grad(s) if *s >= g.num_slots() => {
                return Err(format!("input {v} reads slot {s}, but there are {} slots", g.num_slots()));
            }
            InputSource::Param(k) if *k >= g.num_params => return Err(format!("input {v} reads parameter {k}, but there are {}", g.num_params)),
            _ => {}
        }
        define(&mut defined, *v, "an input")?;
    }
    for (v, _) in &g.constants {
        define(&mut defined, *v, "a constant")?;
    }
    for (i, node) in g.nodes.iter().enumerate() {
        for &v in &node.inputs {
            if !defined.get(v).copied().unwrap_or(false) {
                return Err(format!("node {i} ({}) uses value {v} before it is defined", node.kind_name()));
            }
        }
        match &node.kind {
            NodeKind::Op(op) => check_op_type(g, i, op, node)?,
            NodeKind::Fused(p) => check_fused_type(g, i, p, node)?,
            _ => {}
        }
        for &v in &node.outputs {
            define(&mut defined, v, &format!("node {i} ({})", node.kind_name()))?;
        }
    }
    let used = |v: usize| defined.get(v).copied().unwrap_or(false);
    if let Some(v) = g.outputs.iter().find(|&&v| !used(v)) {
        return Err(format!("output value {v} is never defined"));
    }
    for w in &g.writes {
        let (slot, value) = match w {
            StateWrite::Data { slot, value } => (*slot, Some(*value)),
            StateWrite::Grad { slot, value } => (*slot, *value),
        };
        if slot >= g.num_slots() || value.is_some_and(|v| !used(v)) {
            return Err(format!("write {w:?} names a missing slot or value"));
        }
    }
    Ok(())
}

fn check_op_type(g: &Graph, i: usize, op: &crate::ops::Op, node: &super::Node) -> Result<(), String> {
    let types: Vec<TypeRef> = node.inputs.iter().map(|&v| TypeRef { dtype: g.values[v].dtype, shape: &g.values[v].shape }).collect();
    let (dtype, shape) = op.infer(&types).map_err(|e| format!("node {i} ({}): {e}", op.name()))?;
    let out = &g.values[node.outputs[0]];
    if out.dtype != dtype || out.shape != shape {
        return Err(format!("node {i} ({}) says it gives {}{} but its inputs give {dtype}{shape}", op.name(), out.dtype, out.shape));
    }
    Ok(())
}

fn check_fused_type(g: &Graph, i: usize, p: &crate::kernels::fused::FusedProgram, node: &super::Node) -> Result<(), String> {
    if node.outputs.len() != p.outputs.len() || node.inputs.len() != p.inputs.len() {
        return Err(format!(
            "fused node {i} has {} inputs and {} outputs, its program {} and {}",
            node.inputs.len(),
            node.outputs.len(),
            p.inputs.len(),
            p.outputs.len()
        ));
    }
    for (&v, &k) in node.outputs.iter().zip(&p.outputs) {
        let info = &g.values[v];
        if info.dtype != p.instrs[k].dtype || info.shape != p.shape {
            return Err(format!("fused node {i} output {v} is {}{} but its program gives {}{}", info.dtype, info.shape, p.instrs[k].dtype, p.shape));
        }
    }
    Ok(())
}
