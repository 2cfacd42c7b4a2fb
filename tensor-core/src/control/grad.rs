//! Gradients through control flow, written with control flow: the gradient of a `cond` is a
//! `cond` on the same predicate whose branches take the vector-Jacobian product of their
//! forward branch (replayed); the gradient of a `while_loop` is a loop that walks the saved
//! iterations backwards (TF's approach: the forward loop keeps each iteration's loop
//! variables), taking the product of the body at each one and summing what the body captured.

use super::replay::{replay, replay_uses};
use super::{cond, while_loop};
use crate::autograd::{self, vjp_each, GradModeGuard};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::shape::Shape;
use crate::tensor::grad_node::{Backward, BackwardCtx, InputGrads};
use crate::tensor::{Tensor, Value};
use std::cell::Cell;
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

/// The gradient of each output, `-0.0`s where none arrived (a loop's state needs a tensor):
/// where such a gradient is only passed on or added, it leaves the eager sums' bits alone.
fn output_grads(types: &[(DType, Shape)], grads: &[Option<Tensor>]) -> Result<Vec<Tensor>> {
    types.iter().zip(grads).map(|((d, s), g)| g.clone().map_or_else(|| neg_zeros(*d, s), Ok)).collect()
}

/// The vector-Jacobian product of subgraph `g` at `inputs` for output gradients `gys`: one
/// entry per input (`None` for inputs that are not floats or that no output depends on).
///
/// `seeds` (one per input, or empty) are gradients summed so far: a seeded input's result is
/// `seed` plus its contributions added one at a time, in the order the backward engine
/// delivers them — the additions an eager backward performs when the value is used several
/// times across loop iterations, so the sum has the same bits (`(acc + a) + b`, not
/// `acc + (a + b)`).
/// Outputs whose gradient is `None` are no roots.
fn vjp(g: &Graph, inputs: &[Tensor], gys: &[Option<Tensor>], seeds: &[Option<Tensor>], create_graph: bool) -> Result<Vec<Option<Tensor>>> {
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
        if let Some(gy) = gy {
            outs.push(o);
            grads.push(gy);
        }
    }
    let float_leaves: Vec<&Tensor> = leaves.iter().filter(|l| l.dtype().is_float()).collect();
    let mut found = autograd::vjp(&outs, &grads, &float_leaves, create_graph)?.into_iter();
    Ok(leaves.iter().map(|l| if l.dtype().is_float() { found.next().flatten() } else { None }).collect())
}

/// The vector-Jacobian product of subgraph `g` at `inputs` for output gradients `gys`, as the
/// contributions of each float input's gradient edges (`edges`: see `Graph::param_edges`),
/// laid out input by input and, within an input, in the order the backward engine delivers
/// them: each use's gradient stays apart, so the grad node adds them where an eager walk over
/// the subgraph's own ops would. An edge that receives nothing gets `-0.0`s (the layout is
/// fixed), and is marked `false` in the second result. Outputs without a gradient (`None`) are
/// no roots: eagerly nothing flows back from them (zeros would, and `0 * inf` is NaN).
fn vjp_per_use(g: &Graph, inputs: &[Tensor], edges: &[usize], gys: &[Option<Tensor>], create_graph: bool) -> Result<(Vec<Tensor>, Vec<bool>)> {
    let _record = GradModeGuard::set(true);
    let locals: Vec<Tensor> = inputs.iter().map(|x| crate::trace::resolve(x, "backward")).collect::<Result<_>>()?;
    // A fresh leaf for each use of a float input, so each keeps its contributions apart.
    let mut leaves: Vec<(usize, Tensor)> = Vec::new();
    let mut fresh_leaf = |k: usize| -> Result<Tensor> {
        let x = &locals[k];
        if !x.dtype().is_float() {
            return Ok(x.clone());
        }
        let leaf = x.detach().requires_grad_(true)?;
        leaves.push((k, leaf.clone()));
        Ok(leaf)
    };
    let replayed = replay_uses(g, &g.param_of_values(), &|_, _| None, &mut fresh_leaf)?.0;
    let (outs, grads): (Vec<&Tensor>, Vec<&Tensor>) =
        replayed.iter().zip(gys).filter_map(|(o, gy)| gy.as_ref().filter(|_| o.dtype().is_float()).map(|gy| (o, gy))).unzip();
    let targets: Vec<&Tensor> = leaves.iter().map(|(_, l)| l).collect();
    let mut per_input: Vec<Vec<Tensor>> = vec![Vec::new(); inputs.len()];
    for (i, g) in vjp_each(&outs, &grads, &targets, create_graph)? {
        per_input[leaves[i].0].push(g);
    }
    let (mut out, mut real) = (Vec::new(), Vec::new());
    for (k, (x, mut got)) in inputs.iter().zip(per_input).enumerate() {
        if x.dtype().is_float() {
            real.extend((0..edges[k]).map(|j| j < got.len()));
            for _ in got.len()..edges[k] {
                got.push(neg_zeros(x.dtype(), &x.raw_shape())?);
            }
            out.extend(got);
        }
    }
    Ok((out, real))
}

/// `-0.0`s standing for each edge of each float input (a branch not taken: no contribution).
fn no_contributions(inputs: &[Tensor], edges: &[usize]) -> Result<Vec<Tensor>> {
    let mut out = Vec::new();
    for (x, &n) in inputs.iter().zip(edges).filter(|(x, _)| x.dtype().is_float()) {
        for _ in 0..n {
            out.push(neg_zeros(x.dtype(), &x.raw_shape())?);
        }
    }
    Ok(out)
}

/// Negative zeros of a float type (its shape must be known).
fn neg_zeros(dtype: DType, shape: &Shape) -> Result<Tensor> {
    if !shape.is_known() {
        return zeros(dtype, shape); // the error for an unknown shape
    }
    Ok(Tensor::full(shape.dims(), -0.0, dtype))
}

/// Spreads gradients of the float inputs back over all inputs (`None` for the others).
fn spread(inputs: &[Tensor], grads: &mut impl Iterator<Item = Tensor>, out: &mut InputGrads) {
    for x in inputs {
        out.push(if x.dtype().is_float() { grads.next() } else { None });
    }
}

/// The backward of a `Cond` node. Its grad node has an edge per use of each branch input
/// inside its branch (`edge_inputs`), as the branch's ops would have eagerly, each taking
/// that use's contribution (`vjp_per_use`).
pub(super) struct CondGrad {
    pub pred: Tensor,
    pub then_graph: Arc<Graph>,
    pub else_graph: Arc<Graph>,
    pub then_in: Vec<Tensor>,
    pub else_in: Vec<Tensor>,
    /// The gradient edges of each input inside its branch (`Graph::param_edges`).
    pub then_edges: Vec<usize>,
    pub else_edges: Vec<usize>,
}

impl CondGrad {
    /// The inputs of its grad node: the predicate, then each branch input once per use.
    pub(super) fn edge_inputs(&self) -> Vec<Tensor> {
        let mut edges = vec![self.pred.clone()];
        for (inputs, uses) in [(&self.then_in, &self.then_edges), (&self.else_in, &self.else_edges)] {
            edges.extend(inputs.iter().zip(uses).flat_map(|(t, &n)| std::iter::repeat_n(t.clone(), n)));
        }
        edges
    }
}

impl Backward for CondGrad {
    fn name(&self) -> &'static str {
        "CondBackward"
    }

    /// Both branches are traced, so which edges each branch's product reaches is known here:
    /// an edge neither reaches gets no gradient (`None`), as eagerly — `-0.0`s flowing on into
    /// a node that eagerly gets nothing could turn into `+0.0` or NaN there.
    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<InputGrads> {
        let (create_graph, gys) = (ctx.create_graph(), grads);
        let (then_in, else_in) = (&self.then_in, &self.else_in);
        let (then_real, else_real) = (Cell::new(Vec::new()), Cell::new(Vec::new()));
        let taken = cond(
            &self.pred,
            || {
                let (mut d, real) = vjp_per_use(&self.then_graph, then_in, &self.then_edges, gys, create_graph)?;
                then_real.set(real);
                d.extend(no_contributions(else_in, &self.else_edges)?);
                Ok(d)
            },
            || {
                let mut d = no_contributions(then_in, &self.then_edges)?;
                let (e, real) = vjp_per_use(&self.else_graph, else_in, &self.else_edges, gys, create_graph)?;
                else_real.set(real);
                d.extend(e);
                Ok(d)
            },
        )?;
        // A branch not traced (a predicate known while tracing) reaches nothing.
        let reached = |real: Vec<bool>, inputs: &[Tensor], edges: &[usize]| {
            let n = inputs.iter().zip(edges).filter(|(x, _)| x.dtype().is_float()).map(|(_, &n)| n).sum();
            let mut real = real;
            real.resize(n, false);
            real
        };
        let then_real = reached(then_real.take(), then_in, &self.then_edges);
        let mut real = then_real.into_iter().chain(reached(else_real.take(), else_in, &self.else_edges));
        let mut out: InputGrads = smallvec::smallvec![None];
        let mut it = taken.into_iter();
        for (inputs, edges) in [(then_in, &self.then_edges), (else_in, &self.else_edges)] {
            for (x, &n) in inputs.iter().zip(edges) {
                for _ in 0..n {
                    let g = if x.dtype().is_float() { it.next().filter(|_| real.next().unwrap_or(false)) } else { None };
                    out.push(g);
                }
            }
        }
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

impl WhileGrad {
    /// The loop variables that receive a gradient eagerly: those whose output (or saved
    /// iterations) got one, and every variable the body computes a live one from. The others
    /// send nothing back (zeros would make `0 * inf` NaNs and `+0.0` terms) and get nothing.
    fn live_variables(&self, grads: &[Option<Tensor>], history_grads: &[Option<Tensor>]) -> Vec<bool> {
        let n = self.vars;
        let reach = self.body.outputs_reach_params();
        let mut live: Vec<bool> = (0..n).map(|k| grads.get(k).is_some_and(Option::is_some) || history_grads[k].is_some()).collect();
        let mut changed = true;
        while changed {
            changed = false;
            for (k, j) in (0..n).flat_map(|k| (0..n).map(move |j| (k, j))) {
                if live[k] && reach[k][j] && !live[j] && self.types[j].0.is_float() {
                    live[j] = true;
                    changed = true;
                }
            }
        }
        live
    }
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
        let live = self.live_variables(grads, &history_grads);
        let mut state = vec![self.trip.sub(1i64)?];
        state.extend(output_grads(&self.types, grads)?);
        // The sums start at -0.0, the identity of IEEE addition (`-0.0 + x` is `x`, bit for
        // bit, also for `x = -0.0`), so the first iteration's terms come out exactly as an
        // eager backward (which has no starting value) computes them.
        state.extend(self.body_in.iter().filter(|x| x.dtype().is_float()).map(|x| neg_zeros(x.dtype(), &x.raw_shape())).collect::<Result<Vec<_>>>()?);
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
                // Only live variables' gradients are roots (eagerly the others get none).
                let gys: Vec<Option<Tensor>> = s[1..1 + n].iter().zip(&live).map(|(g, &l)| l.then(|| g.clone())).collect();
                let d = vjp(&self.body, &inputs, &gys, &seeds, create_graph)?;
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
            out.push((live[k] && self.types[k].0.is_float()).then(|| g.clone()));
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
