//! State changed under a tensor condition: TF's way of carrying variables through control
//! flow. A tensor from outside a cond branch or loop body that the traced code updates in
//! place (a counter, a running statistic, a generator's state) becomes an implicit output of
//! the `Cond` node — the branch that leaves it alone passes its old value through — or an
//! implicit loop variable of the `While` node. After the node, the outer tensor takes the
//! node's output, as an in-place update at that level would: a slot's proxy then ends in a
//! state write, so after a call the external tensor holds what the eager run left in it.
//!
//! Only the subgraphs' parameter lists and outputs change, so a node carrying state has the
//! structure of any other `Cond`/`While` node (export, validation and gradients see nothing new).

use crate::error::{Error, Result};
use crate::graph::{Graph, InputSource, ValueId};
use crate::tensor::{Tensor, Value};
use crate::trace::Nested;

/// The outer tensors either branch updated, in order (then-branch's first), each added as one
/// more output of both branches: its new value where updated, its old value passed through
/// (captured if the branch did not read it) elsewhere.
pub(super) fn merge_branch_updates(then: &mut Nested, other: &mut Nested) -> Vec<Tensor> {
    let mut outers: Vec<Tensor> = Vec::new();
    for u in then.updates.iter().chain(&other.updates) {
        if !outers.iter().any(|o| o.same_as(&u.outer)) {
            outers.push(u.outer.clone());
        }
    }
    for branch in [then, other] {
        for outer in &outers {
            let value = match branch.updates.iter().find(|u| u.outer.same_as(outer)) {
                Some(u) => u.value,
                None => {
                    let k = param_for(branch, outer);
                    param_value(&branch.graph, k)
                }
            };
            branch.graph.outputs.push(value);
        }
    }
    outers
}

/// Makes every outer tensor the loop body updated a loop variable after the `first` declared
/// ones: in both subgraphs its parameter moves to follow them (the condition gets one if it
/// did not read the tensor), and the body outputs its new value. Returns those outer tensors,
/// whose values start the new loop variables. An update in the condition is an error: a
/// condition is evaluated once more than the body, which a state change cannot follow.
pub(super) fn carry_loop_updates(first: usize, cond: &mut Nested, body: &mut Nested) -> Result<Vec<Tensor>> {
    if let Some(u) = cond.updates.first() {
        let what = u.outer.symbol().map_or_else(String::new, |s| format!(" `{}`", s.name()));
        return Err(Error::ControlFlow {
            construct: format!(
                "an in-place update of the tensor{what} in a while_loop condition: the condition runs once more than the body, so it cannot change state; update the tensor in the body instead"
            ),
        });
    }
    let outers: Vec<Tensor> = body.updates.iter().map(|u| u.outer.clone()).collect();
    let values: Vec<ValueId> = body.updates.iter().map(|u| u.value).collect();
    lead_with(cond, first, &outers);
    lead_with(body, first, &outers);
    body.graph.outputs.extend(values);
    Ok(outers)
}

/// Gives each outer tensor the value the node computed for it, as an in-place update at this
/// level does: the outer tensor's value (kept as a slot's proxy, with its label) and its
/// history become the node output's.
pub(super) fn write_back(outers: &[Tensor], values: &[Tensor]) {
    for (outer, new) in outers.iter().zip(values) {
        let old = outer.symbol().expect("captured values are symbolic");
        let mut sym = new.symbol().expect("node outputs are symbolic");
        (sym.slot, sym.label) = (old.slot, old.label);
        outer.set_value(Value::Symbolic(sym));
        match new.grad_fn_raw() {
            Some(f) => outer.set_grad_fn(Some(f), new.output_nr()),
            // As an in-place update with no gradient cuts the history (none under no_grad).
            None if crate::is_grad_enabled() => outer.detach_in_place(),
            None => {}
        }
    }
}

/// Handles for the node's inputs that are not the outer tensors `write_back` changes: each
/// input that is one of them becomes a new handle to its value and history (as an eager
/// in-place op's grad node keeps "the old value"), so what the node saved stays as it was.
pub(super) fn unalias(inputs: &mut [Tensor], outers: &[Tensor]) {
    for t in inputs.iter_mut() {
        if outers.iter().any(|o| o.same_as(t)) {
            *t = t.alias();
        }
    }
}

/// The parameter of `branch` standing for `outer`, captured now if the branch never read it.
fn param_for(branch: &mut Nested, outer: &Tensor) -> usize {
    let captures_start = branch.graph.num_params - branch.captured.len();
    if let Some(i) = branch.captured.iter().position(|c| c.same_as(outer)) {
        return captures_start + i;
    }
    let k = branch.graph.num_params;
    let label = outer.symbol().and_then(|s| s.label).map(|l| l.to_string());
    let v = branch.graph.add_value(outer.dtype(), outer.raw_shape(), label);
    branch.graph.inputs.push((v, InputSource::Param(k)));
    branch.graph.num_params += 1;
    branch.captured.push(outer.clone());
    k
}

/// The value parameter `k` of `graph` defines.
fn param_value(graph: &Graph, k: usize) -> ValueId {
    graph.inputs.iter().find(|(_, src)| *src == InputSource::Param(k)).map(|(v, _)| *v).expect("every parameter is an input")
}

/// Reorders the parameters of `nested` so that those standing for `outers` (captured now where
/// missing) come right after the first `first`, in order; they leave the captured list.
fn lead_with(nested: &mut Nested, first: usize, outers: &[Tensor]) {
    let chosen: Vec<usize> = outers.iter().map(|o| param_for(nested, o)).collect();
    let captures_start = nested.graph.num_params - nested.captured.len();
    let rest: Vec<usize> = (captures_start..nested.graph.num_params).filter(|k| !chosen.contains(k)).collect();
    let order: Vec<usize> = (0..first).chain(chosen.iter().copied()).chain(rest.iter().copied()).collect();
    let mut new_index = vec![0; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    for (_, src) in nested.graph.inputs.iter_mut() {
        if let InputSource::Param(k) = src {
            *k = new_index[*k];
        }
    }
    nested.captured = rest.iter().map(|&k| nested.captured[k - captures_start].clone()).collect();
}
