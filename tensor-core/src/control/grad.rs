//! Gradients through control flow, written with control flow: the gradient of a `cond` is a
//! `cond` on the same predicate whose branches take the vector-Jacobian product of their
//! forward branch (replayed); the gradient of a `while_loop` is a loop that walks the saved
//! iterations backwards (TF's approach: the forward loop keeps each iteration's loop
//! variables), taking the product of the body at each one and summing what the body captured.

use super::replay::replay;
use super::{cond, while_loop};
use crate::autograd::{grad_with, GradModeGuard};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::shape::Shape;
use crate::tensor::grad_node::{Backward, BackwardCtx, InputGrads};
use crate::tensor::{Tensor, Value};
use std::sync::Arc;

/// Zeros of a loop variable's or output's type (its shape must be known).
fn zeros(dtype: DType, shape: &Shape) -> Result<Tensor> {
    if !shape.is_known() {
        return Err(Error::NotDifferentiable {
            op: "cond/while_loop",
            detail: " for a loop variable or output whose shape is unknown in this trace",
        });
    }
    Ok(Tensor::zeros(shape.dims(), dtype))
}

/// The gradient of each output, zeros where none arrived.
fn output_grads(types: &[(DType, Shape)], grads: &[Option<Tensor>]) -> Result<Vec<Tensor>> {
    types.iter().zip(grads).map(|((d, s), g)| g.clone().map_or_else(|| zeros(*d, s), Ok)).collect()
}

/// The vector-Jacobian product of subgraph `g` at `inputs` for output gradients `gys`: one
/// entry per input (`None` for inputs that are not floats or that no output depends on).
///
/// `seeds` (one per input, or empty) are gradients summed so far: a seeded input's result is
/// `seed` plus its contributions added one at a time, in the order the backward engine
/// delivers them — the additions an eager backward performs when the value is used several
/// times across loop iterations, so the sum has the same bits (`(acc + a) + b`, not
/// `acc + (a + b)`).
fn vjp(g: &Graph, inputs: &[Tensor], gys: &[Tensor], seeds: &[Option<Tensor>], create_graph: bool) -> Result<Vec<Option<Tensor>>> {
    let _record = GradModeGuard::set(true);
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|x| {
            let local = crate::trace::resolve(x, "backward")?;
            if local.dtype().is_float() {
                local.detach().requires_grad_(true)
            } else {
                Ok(local)
            }
        })
        .collect::<Result<_>>()?;
    let replayed = replay(g, &leaves)?;
    // Each seed enters as the gradient of `leaf * 1` (exact), given as the first roots: the
    // engine runs the first root's node first, so the seed is the first term of the leaf's
    // sum and every contribution of the subgraph is added to it in turn.
    let seeded: Vec<(Tensor, &Tensor)> = seeds
        .iter()
        .zip(&leaves)
        .filter_map(|(s, l)| s.as_ref().filter(|_| l.dtype().is_float()).map(|s| Ok((l.mul(1.0)?, s))))
        .collect::<Result<_>>()?;
    let (mut outs, mut grads): (Vec<&Tensor>, Vec<&Tensor>) = seeded.iter().map(|(o, s)| (o, *s)).unzip();
    for (o, gy) in replayed.iter().zip(gys).filter(|(o, _)| o.dtype().is_float()) {
        outs.push(o);
        grads.push(gy);
    }
    let float_leaves: Vec<&Tensor> = leaves.iter().filter(|l| l.dtype().is_float()).collect();
    let mut found = grad_with(&outs, &grads, &float_leaves, create_graph)?.into_iter();
    Ok(leaves.iter().map(|l| if l.dtype().is_float() { found.next().flatten() } else { None }).collect())
}

/// A gradient for each float input (zeros where the product gave none), in input order.
fn dense(inputs: &[Tensor], grads: Vec<Option<Tensor>>) -> Result<Vec<Tensor>> {
    inputs.iter().zip(grads).filter(|(x, _)| x.dtype().is_float()).map(|(x, g)| g.map_or_else(|| zeros(x.dtype(), &x.shape()), Ok)).collect()
}

/// Negative zeros of a float type (its shape must be known).
fn neg_zeros(dtype: DType, shape: &Shape) -> Result<Tensor> {
    if !shape.is_known() {
        return zeros(dtype, shape); // the error for an unknown shape
    }
    Ok(Tensor::full(shape.dims(), -0.0, dtype))
}

fn float_zeros(inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    inputs.iter().filter(|x| x.dtype().is_float()).map(|x| zeros(x.dtype(), &x.shape())).collect()
}

/// Spreads gradients of the float inputs back over all inputs (`None` for the others).
fn spread(inputs: &[Tensor], grads: &mut impl Iterator<Item = Tensor>, out: &mut InputGrads) {
    for x in inputs {
        out.push(if x.dtype().is_float() { grads.next() } else { None });
    }
}

/// The backward of a `Cond` node.
pub(super) struct CondGrad {
    pub pred: Tensor,
    pub then_graph: Arc<Graph>,
    pub else_graph: Arc<Graph>,
    pub then_in: Vec<Tensor>,
    pub else_in: Vec<Tensor>,
    pub outputs: Vec<(DType, Shape)>,
}

impl Backward for CondGrad {
    fn name(&self) -> &'static str {
        "CondBackward"
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<InputGrads> {
        let create_graph = ctx.create_graph();
        let gys = output_grads(&self.outputs, grads)?;
        let taken = cond(
            &self.pred,
            || {
                let mut d = dense(&self.then_in, vjp(&self.then_graph, &self.then_in, &gys, &[], create_graph)?)?;
                d.extend(float_zeros(&self.else_in)?);
                Ok(d)
            },
            || {
                let mut d = float_zeros(&self.then_in)?;
                d.extend(dense(&self.else_in, vjp(&self.else_graph, &self.else_in, &gys, &[], create_graph)?)?);
                Ok(d)
            },
        )?;
        let mut out: InputGrads = smallvec::smallvec![None];
        let mut it = taken.into_iter();
        spread(&self.then_in, &mut it, &mut out);
        spread(&self.else_in, &mut it, &mut out);
        Ok(out)
    }
}

/// The backward of a `While` node that kept its history. Its outputs are the loop variables,
/// the trip count and the history; a gradient reaching the history (`history[k][i]` is
/// variable `k` at the start of iteration `i`) joins the variables' gradients at iteration `i`.
pub(super) struct WhileGrad {
    pub body: Arc<Graph>,
    pub vars: usize,
    pub cond_inputs: usize,
    pub body_in: Vec<Tensor>,
    pub trip: Tensor,
    /// Each variable's stacked iterations, as the node's outputs hold them (kept as values,
    /// so that the node and its outputs do not keep each other alive).
    pub history: Vec<Value>,
    pub types: Vec<(DType, Shape)>,
}

impl Backward for WhileGrad {
    fn name(&self) -> &'static str {
        "WhileBackward"
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<InputGrads> {
        let (n, create_graph) = (self.vars, ctx.create_graph());
        let history_grads: Vec<Option<Tensor>> = (0..n).map(|k| grads.get(n + 1 + k).cloned().flatten()).collect();
        // With create_graph the saved iterations carry this node, so a second derivative
        // reaches the loop through them too.
        let history: Vec<Tensor> = self.history.iter().enumerate().map(|(k, v)| ctx.kept_output(n + 1 + k, v.clone())).collect();
        // Loop state: the iteration index (counting down), the loop variables' gradients, the
        // gradients summed so far for the float values the body captured.
        let mut state = vec![self.trip.sub(1i64)?];
        state.extend(output_grads(&self.types, grads)?);
        // The sums start at -0.0, the identity of IEEE addition (`-0.0 + x` is `x`, bit for
        // bit, also for `x = -0.0`), so the first iteration's terms come out exactly as an
        // eager backward (which has no starting value) computes them.
        state.extend(self.body_in.iter().filter(|x| x.dtype().is_float()).map(|x| neg_zeros(x.dtype(), &x.shape())).collect::<Result<Vec<_>>>()?);
        let done = while_loop(
            |s: &Vec<Tensor>| s[0].ge(0i64),
            |s: Vec<Tensor>| {
                let index = s[0].reshape([1])?;
                let mut inputs: Vec<Tensor> = history.iter().map(|h| h.index_select(0, &index)?.squeeze(0)).collect::<Result<_>>()?;
                inputs.extend(self.body_in.iter().cloned());
                // The captured values' sums so far seed their products, so each use adds to
                // the running sum in the eager backward's order.
                let mut sums = s[1 + n..].iter();
                let mut seeds: Vec<Option<Tensor>> = vec![None; n];
                seeds.extend(self.body_in.iter().map(|x| if x.dtype().is_float() { sums.next().cloned() } else { None }));
                let d = vjp(&self.body, &inputs, &s[1..1 + n], &seeds, create_graph)?;
                let mut next = vec![s[0].sub(1i64)?];
                for (k, (dtype, shape)) in self.types.iter().enumerate() {
                    let direct = history_grads[k].as_ref().map(|h| h.index_select(0, &index)?.squeeze(0)).transpose()?;
                    next.push(match (d[k].clone(), direct) {
                        (Some(through_body), Some(direct)) => through_body.add(&direct)?,
                        (None, Some(direct)) => direct,
                        (through_body, None) => through_body.map_or_else(|| zeros(*dtype, shape), Ok)?,
                    });
                }
                let captured = self.body_in.iter().zip(&d[n..]).filter(|(x, _)| x.dtype().is_float());
                for ((_, dk), acc) in captured.zip(&s[1 + n..]) {
                    // A seeded product always includes its seed.
                    next.push(dk.clone().unwrap_or_else(|| acc.clone()));
                }
                Ok(next)
            },
            state,
        )?;
        let mut out = InputGrads::new();
        for (k, g) in done[1..1 + n].iter().enumerate() {
            out.push(self.types[k].0.is_float().then(|| g.clone()));
        }
        out.extend(std::iter::repeat_n(None, self.cond_inputs));
        spread(&self.body_in, &mut done[1 + n..].iter().cloned(), &mut out);
        Ok(out)
    }
}

/// The backward of a traced loop whose variables change shape between iterations: they
/// cannot be stacked into a history, so there is nothing to walk back through.
pub(crate) struct UnstackableWhileGrad;

impl Backward for UnstackableWhileGrad {
    fn name(&self) -> &'static str {
        "WhileBackward"
    }

    fn backward(&self, _: &BackwardCtx, _: &[Option<Tensor>]) -> Result<InputGrads> {
        Err(Error::NotDifferentiable {
            op: "cond/while_loop",
            detail: " for a loop variable or output whose shape is unknown in this trace (it may change between iterations)",
        })
    }
}
