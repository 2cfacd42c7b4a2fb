//! `while_loop(cond_fn, body_fn, loop_vars)`.

use super::carried_state::{carry_loop_updates, unalias, write_back};
use super::grad::WhileGrad;
use super::{check_predicate, describe, types_of};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{Graph, NodeKind};
use crate::shape::{Shape, UNKNOWN};
use crate::tensor::Tensor;
use crate::trace::{self, GraphOutput, Nested, TraceGuard};
use std::sync::Arc;

/// Options of [`while_loop_opts`].
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::control::{while_loop_opts, WhileOptions};
/// let opts = WhileOptions { max_iterations: Some(3), ..WhileOptions::default() };
/// let n = while_loop_opts(&opts, |n: &Tensor| Ok(n.lt(100)?), |n| Ok(&n + 1), Tensor::scalar(0i32))?;
/// assert_eq!(n.item::<i32>()?, 3); // stopped by max_iterations
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct WhileOptions {
    /// Stop after this many iterations even if the condition still holds (TF's
    /// `maximum_iterations`).
    pub max_iterations: Option<usize>,
    /// The shape each loop variable keeps, unknown dims allowed (default: the initial shapes).
    pub shape_invariants: Option<Vec<Shape>>,
    /// The loop variables' names, for error messages (default `loop_vars[i]`).
    pub names: Option<Vec<String>>,
}

/// Runs `body_fn` on the loop variables while `cond_fn` of them is true, and returns them.
/// Eagerly this is a plain loop. While tracing, the condition and the body are traced once
/// into one `While` node, whose trip count is decided when the graph runs. Loop variables
/// keep their dtype and shape; a body that changes them is an error naming the variable.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::control::while_loop;
/// let start = (Tensor::scalar(0i32), Tensor::scalar(10i32));
/// let (a, b) = while_loop(|(a, b)| Ok(a.lt(b)?), |(a, b)| Ok((&a + 2, &b + 1)), start)?;
/// assert_eq!((a.item::<i32>()?, b.item::<i32>()?), (20, 20));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn while_loop<T: GraphOutput>(cond_fn: impl FnMut(&T) -> Result<Tensor>, body_fn: impl FnMut(T) -> Result<T>, loop_vars: T) -> Result<T> {
    while_loop_opts(&WhileOptions::default(), cond_fn, body_fn, loop_vars)
}

/// [`while_loop`] with options: a maximum number of iterations, shape invariants with
/// unknown dims, names for messages.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::control::{while_loop_opts, WhileOptions};
/// use tensor_core::shape::UNKNOWN;
/// // A loop variable that grows: its dim is declared unknown.
/// let opts = WhileOptions { shape_invariants: Some(vec![Shape::new(&[UNKNOWN])]), ..WhileOptions::default() };
/// let x = Tensor::ones(&[1], DType::F32);
/// let y = while_loop_opts(&opts, |v: &Tensor| Ok(v.sum()?.lt(8.0)?), |v| Tensor::concat(&[&v, &v], 0), x)?;
/// assert_eq!(y.dims(), vec![8]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn while_loop_opts<T: GraphOutput>(
    opts: &WhileOptions,
    mut cond_fn: impl FnMut(&T) -> Result<Tensor>,
    mut body_fn: impl FnMut(T) -> Result<T>,
    loop_vars: T,
) -> Result<T> {
    let mut leaves = Vec::new();
    let structure = loop_vars.into_parts(&mut leaves);
    let names = names(opts, leaves.len());
    let types = loop_types(opts, &leaves, &names)?;
    let rebuild = |vars: Vec<Tensor>| T::from_parts(&structure, &mut vars.into_iter());
    if !trace::is_active() {
        let mut vars = leaves;
        let mut count = 0;
        while opts.max_iterations.is_none_or(|m| count < m) {
            let c = cond_fn(&rebuild(vars.clone()))?;
            check_predicate("while_loop", &c)?;
            if !c.item::<bool>()? {
                break;
            }
            vars = run_body(&mut body_fn, rebuild(vars), &types, &names)?;
            count += 1;
        }
        return Ok(rebuild(vars));
    }
    let inits: Vec<Tensor> = leaves.iter().map(|t| trace::resolve(t, "while_loop")).collect::<Result<_>>()?;
    let guard = TraceGuard::begin_nested("while_cond");
    let c = cond_fn(&rebuild(placeholders(&guard, &types, &names)))?;
    check_predicate("while_loop", &c)?;
    let cond = guard.finish_nested(&[c])?;
    let guard = TraceGuard::begin_nested("while_body");
    let out = run_body(&mut body_fn, rebuild(placeholders(&guard, &types, &names)), &types, &names)?;
    let body = guard.finish_nested(&out)?;
    let outs = while_nodes(&inits, cond, body, opts.max_iterations, &types)?;
    Ok(rebuild(outs))
}

fn names(opts: &WhileOptions, n: usize) -> Vec<String> {
    match &opts.names {
        Some(names) if names.len() == n => names.clone(),
        _ => (0..n).map(|i| format!("loop_vars[{i}]")).collect(),
    }
}

/// Each loop variable's dtype and invariant shape.
fn loop_types(opts: &WhileOptions, leaves: &[Tensor], names: &[String]) -> Result<Vec<(DType, Shape)>> {
    let Some(inv) = &opts.shape_invariants else { return Ok(types_of(leaves)) };
    if inv.len() != leaves.len() {
        return Err(Error::invalid("while_loop", "shape_invariants", format!("{} shapes for {} loop variables", inv.len(), leaves.len())));
    }
    for ((t, s), name) in leaves.iter().zip(inv).zip(names) {
        if !s.admits(&t.raw_shape()) {
            return Err(Error::LoopVarChanged { var: name.clone(), old: describe(t.dtype(), s), new: describe(t.dtype(), &t.raw_shape()) });
        }
    }
    Ok(leaves.iter().zip(inv).map(|(t, s)| (t.dtype(), s.clone())).collect())
}

pub(super) fn placeholders(guard: &TraceGuard, types: &[(DType, Shape)], names: &[String]) -> Vec<Tensor> {
    types.iter().zip(names).map(|((d, s), name)| guard.param(*d, s.clone(), name)).collect()
}

/// One run of the body, checking that the loop variables keep their dtypes and shapes.
fn run_body<T: GraphOutput>(body_fn: &mut impl FnMut(T) -> Result<T>, vars: T, types: &[(DType, Shape)], names: &[String]) -> Result<Vec<Tensor>> {
    let mut out = Vec::new();
    body_fn(vars)?.into_parts(&mut out);
    check_loop_vars(&out, types, names)?;
    Ok(out)
}

/// Checks that the loop variables kept their count, dtypes and shapes.
pub(super) fn check_loop_vars(out: &[Tensor], types: &[(DType, Shape)], names: &[String]) -> Result<()> {
    if out.len() != types.len() {
        return Err(Error::LoopVarChanged {
            var: "the loop variables".into(),
            old: format!("{} tensors", types.len()),
            new: format!("{} tensors", out.len()),
        });
    }
    for ((t, (dtype, shape)), name) in out.iter().zip(types).zip(names) {
        if t.dtype() != *dtype || !shape.admits(&t.raw_shape()) {
            return Err(Error::LoopVarChanged { var: name.clone(), old: describe(*dtype, shape), new: describe(t.dtype(), &t.raw_shape()) });
        }
    }
    Ok(())
}

/// Appends a `While` node over a traced condition and body and returns the final loop
/// variables. Outer tensors the body updated in place become extra loop variables, written
/// back to them after the node (`carried_state.rs`).
pub(crate) fn while_nodes(
    inits: &[Tensor],
    mut cond: Nested,
    mut body: Nested,
    max_iterations: Option<usize>,
    types: &[(DType, Shape)],
) -> Result<Vec<Tensor>> {
    let n = inits.len();
    let outers = carry_loop_updates(n, &mut cond, &mut body)?;
    let mut inits: Vec<Tensor> = inits.iter().chain(&outers).cloned().collect();
    for inputs in [&mut inits[..], &mut cond.captured, &mut body.captured] {
        unalias(inputs, &outers);
    }
    let types: Vec<(DType, Shape)> = types.iter().cloned().chain(outers.iter().map(|o| (o.dtype(), o.raw_shape()))).collect();
    let mut outs = while_graphs(&inits, cond.graph, body.graph, &cond.captured, &body.captured, max_iterations, &types)?;
    write_back(&outers, &outs[n..]);
    outs.truncate(n);
    Ok(outs)
}

/// Appends a `While` node over traced condition and body graphs and records its gradient.
/// When an input requires grad, the node also keeps each iteration's loop variables. Returns
/// every output of the node: the final loop variables, then (when it keeps its history) the
/// trip count and each variable's stacked iterations.
pub(crate) fn while_graphs(
    inits: &[Tensor],
    cond_graph: Graph,
    body_graph: Graph,
    cond_in: &[Tensor],
    body_in: &[Tensor],
    max_iterations: Option<usize>,
    types: &[(DType, Shape)],
) -> Result<Vec<Tensor>> {
    let inputs: Vec<Tensor> = inits.iter().chain(cond_in).chain(body_in).map(|t| trace::resolve(t, "while_loop")).collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let wants_grad = crate::is_grad_enabled() && inputs.iter().any(|t| t.requires_grad_raw());
    // Iterations can be stacked for the backward pass only when the loop variables keep one
    // shape; a loop whose variables grow saves nothing and its backward says why.
    let history = wants_grad && types.iter().all(|(_, s)| s.is_known());
    let mut out_types = types.to_vec();
    if history {
        out_types.push((DType::I64, Shape::scalar()));
        out_types.extend(types.iter().map(|(d, s)| (*d, s.inserted(0, UNKNOWN))));
    }
    let (cond, body) = (Arc::new(cond_graph), Arc::new(body_graph));
    let outs = trace::append_node(NodeKind::While { cond, body: body.clone(), max_iterations, history }, &refs, &out_types);
    let n = types.len();
    if history {
        let grad = WhileGrad {
            body,
            vars: n,
            cond_inputs: cond_in.len(),
            body_in: inputs[n + cond_in.len()..].to_vec(),
            trip: outs[n].clone(),
            history: outs[n + 1..].iter().map(|h| h.detach().read_value().clone()).collect(),
            types: types.to_vec(),
        };
        // Every output carries the node (the history too: a graph call's backward reads it as
        // a residual, and a second derivative sends gradients into it).
        let out_refs: Vec<&Tensor> = outs.iter().collect();
        crate::tensor::grad_node::record_many(grad, &refs, &out_refs);
    } else if wants_grad {
        let out_refs: Vec<&Tensor> = outs[..n].iter().collect();
        crate::tensor::grad_node::record_many(super::grad::UnstackableWhileGrad, &refs, &out_refs);
    }
    Ok(outs)
}
