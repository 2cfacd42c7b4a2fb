//! The graph validator: every value is defined once before it is used, every op node's
//! output type is what its shape rule gives, and writes and inputs name real slots. The
//! subgraphs of `Cond` and `While` nodes are validated too, recursively, and checked against
//! their node: parameter counts, predicate and loop-variable types, output types.

use super::{Graph, InputSource, Node, NodeKind, StateWrite};
use crate::dtype::DType;
use crate::ops::TypeRef;
use crate::shape::{Shape, UNKNOWN};

/// Checks the graph's structure; `Err` (`Error::InvalidGraph`) describes the first problem
/// found.
///
/// ```
/// use tensor_core::graph::{validate, Graph};
/// let mut g = Graph::new("g");
/// assert!(validate(&g).is_ok());
/// g.outputs.push(3); // a value that does not exist
/// assert!(validate(&g).unwrap_err().to_string().starts_with("graph `g` is invalid: "));
/// ```
pub fn validate(g: &Graph) -> crate::error::Result<()> {
    check(g).map_err(|problem| crate::error::Error::InvalidGraph { graph: g.name.clone(), problem })
}

/// The first problem of `g`, recursing into subgraphs.
fn check(g: &Graph) -> Result<(), String> {
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
            NodeKind::Epilogue(e) => check_epilogue(g, i, e, node)?,
            NodeKind::Cond { then, other } => check_cond(g, node, then, other).map_err(|e| format!("node {i} (cond): {e}"))?,
            NodeKind::While { cond, body, history, .. } => {
                check_while(g, node, cond, body, *history).map_err(|e| format!("node {i} (while): {e}"))?
            }
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
    let mut params = vec![false; g.num_params];
    for (v, src) in &g.inputs {
        if let InputSource::Param(k) = src
            && std::mem::replace(&mut params[*k], true)
        {
            return Err(format!("input {v} reads parameter {k}, which another input reads too"));
        }
    }
    Ok(())
}

/// The type of parameter `k` of subgraph `g`, if an input reads it (optimization may drop
/// the inputs of unused parameters).
fn param_type(g: &Graph, k: usize) -> Option<(DType, &Shape)> {
    g.inputs.iter().find(|(_, src)| *src == InputSource::Param(k)).map(|(v, _)| (g.values[*v].dtype, &g.values[*v].shape))
}

fn type_of(g: &Graph, v: usize) -> (DType, &Shape) {
    (g.values[v].dtype, &g.values[v].shape)
}

/// Validates subgraph `sub` (named `label` in messages) and checks that each parameter it
/// reads has the type of the node input `args[k]` that feeds it.
fn check_subgraph(g: &Graph, label: &str, sub: &Graph, args: &[usize]) -> Result<(), String> {
    check(sub).map_err(|e| format!("{label}: {e}"))?;
    if !sub.writes.is_empty() || sub.num_slots() != 0 {
        return Err(format!("{label}: a subgraph cannot read or write slots"));
    }
    if sub.num_params != args.len() {
        return Err(format!("{label} takes {} parameters but the node passes {}", sub.num_params, args.len()));
    }
    for (k, &arg) in args.iter().enumerate() {
        let (dtype, shape) = type_of(g, arg);
        if let Some((pd, ps)) = param_type(sub, k)
            && (pd != dtype || !ps.admits(shape))
        {
            return Err(format!("{label} parameter {k} is {pd}{ps} but the node passes {dtype}{shape}"));
        }
    }
    Ok(())
}

fn check_cond(g: &Graph, node: &Node, then: &Graph, other: &Graph) -> Result<(), String> {
    let Some((&pred, args)) = node.inputs.split_first() else { return Err("no predicate input".into()) };
    let (dtype, shape) = type_of(g, pred);
    if dtype != DType::Bool || (shape.is_known() && shape.numel() != 1) {
        return Err(format!("the predicate is {dtype}{shape}, not one bool value"));
    }
    if args.len() != then.num_params + other.num_params {
        return Err(format!("the branches take {} + {} parameters but the node passes {}", then.num_params, other.num_params, args.len()));
    }
    check_subgraph(g, "then", then, &args[..then.num_params])?;
    check_subgraph(g, "else", other, &args[then.num_params..])?;
    for (label, b) in [("then", then), ("else", other)] {
        if b.outputs.len() != node.outputs.len() {
            return Err(format!("{label} gives {} outputs but the node has {}", b.outputs.len(), node.outputs.len()));
        }
        for (k, (&bv, &nv)) in b.outputs.iter().zip(&node.outputs).enumerate() {
            if type_of(b, bv) != type_of(g, nv) {
                let ((bd, bs), (nd, ns)) = (type_of(b, bv), type_of(g, nv));
                return Err(format!("{label} output {k} is {bd}{bs} but the node's is {nd}{ns}"));
            }
        }
    }
    Ok(())
}

fn check_while(g: &Graph, node: &Node, cond: &Graph, body: &Graph, history: bool) -> Result<(), String> {
    let outs = node.outputs.len();
    // Outputs: the loop variables, then with history the trip count and one stack each.
    let n = if history { outs.saturating_sub(1) / 2 } else { outs };
    if history && outs != 2 * n + 1 {
        return Err(format!("{outs} outputs cannot be loop variables, a trip count and their histories"));
    }
    if body.outputs.len() != n {
        return Err(format!("the body gives {} values for {n} loop variables", body.outputs.len()));
    }
    if cond.num_params < n || body.num_params < n || node.inputs.len() != cond.num_params + body.num_params - n {
        return Err(format!(
            "the condition takes {} parameters and the body {}, for {n} loop variables and {} node inputs",
            cond.num_params,
            body.num_params,
            node.inputs.len()
        ));
    }
    let (vars, extra) = node.inputs.split_at(n);
    let (cond_extra, body_extra) = extra.split_at(cond.num_params - n);
    let cond_args: Vec<usize> = vars.iter().chain(cond_extra).copied().collect();
    let body_args: Vec<usize> = vars.iter().chain(body_extra).copied().collect();
    check_subgraph(g, "cond", cond, &cond_args)?;
    check_subgraph(g, "body", body, &body_args)?;
    match cond.outputs.as_slice() {
        [c] if cond.values[*c].dtype == DType::Bool && (!cond.values[*c].shape.is_known() || cond.values[*c].shape.numel() == 1) => {}
        _ => return Err("the condition must give one bool value".into()),
    }
    for (k, &init) in vars.iter().enumerate() {
        // A loop variable's type: the body's parameter (its invariant, unknown dims allowed),
        // else the initial value's.
        let (dtype, shape) = param_type(body, k).or_else(|| param_type(cond, k)).unwrap_or_else(|| type_of(g, init));
        let (bd, bs) = type_of(body, body.outputs[k]);
        if bd != dtype || !shape.admits(bs) {
            return Err(format!("the body turns loop variable {k} from {dtype}{shape} into {bd}{bs}"));
        }
        let (od, os) = type_of(g, node.outputs[k]);
        if od != dtype || !shape.admits(os) {
            return Err(format!("output {k} is {od}{os} but loop variable {k} is {dtype}{shape}"));
        }
        if history {
            let (hd, hs) = type_of(g, node.outputs[n + 1 + k]);
            if hd != dtype || *hs != shape.inserted(0, UNKNOWN) {
                return Err(format!("the history of loop variable {k} is {hd}{hs}, not {dtype}{shape} stacked"));
            }
        }
    }
    if history && type_of(g, node.outputs[n]) != (DType::I64, &Shape::scalar()) {
        return Err("the trip count must be one i64 value".into());
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

/// An epilogue's anchor gives the type its program input expects; its program's outputs and
/// its other inputs are typed as the program says.
fn check_epilogue(g: &Graph, i: usize, e: &super::Epilogue, node: &super::Node) -> Result<(), String> {
    let p = &e.program;
    let kept = e.keep_anchor as usize;
    if node.inputs.len() != e.arity + p.inputs.len() - 1 || node.outputs.len() != kept + p.outputs.len() || e.slot >= p.inputs.len() {
        return Err(format!("epilogue node {i}: its input or output count does not fit its anchor and program"));
    }
    let types: Vec<TypeRef> = node.inputs[..e.arity].iter().map(|&v| TypeRef { dtype: g.values[v].dtype, shape: &g.values[v].shape }).collect();
    let anchor = e.anchor.infer(&types).map_err(|err| format!("epilogue node {i} ({}): {err}", e.anchor.name()))?;
    if anchor != p.inputs[e.slot] || (kept == 1 && type_of(g, node.outputs[0]) != (anchor.0, &anchor.1)) {
        return Err(format!("epilogue node {i}: its anchor gives {}{}, not what the program reads", anchor.0, anchor.1));
    }
    let others = (0..p.inputs.len()).filter(|&k| k != e.slot);
    for (&v, k) in node.inputs[e.arity..].iter().zip(others) {
        if type_of(g, v) != (p.inputs[k].0, &p.inputs[k].1) {
            return Err(format!("epilogue node {i}: input {v} is not the type of program input {k}"));
        }
    }
    for (&v, &k) in node.outputs[kept..].iter().zip(&p.outputs) {
        if type_of(g, v) != (p.instrs[k].dtype, &p.shape) {
            return Err(format!("epilogue node {i}: output {v} is not the type its program gives"));
        }
    }
    Ok(())
}

fn check_fused_type(g: &Graph, i: usize, p: &super::FusedProgram, node: &super::Node) -> Result<(), String> {
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
