//! The backward engine: walks the grad nodes reachable from the roots in dependency order,
//! sums the gradients arriving at each node, runs its formula and passes the results on.
//! Leaves receive the sum of their contributions once, at the end (PyTorch's
//! `AccumulateGrad`), and only if the whole walk succeeded, so a failed backward changes no
//! `.grad`. The order is fixed by the graph alone, so an eager backward and a traced
//! one perform the same additions in the same order.

use crate::error::{Error, Result};
use crate::tensor::grad_mode::GradModeGuard;
use crate::tensor::grad_node::{BackwardCtx, Edge, GradNode, InputGrads};
use crate::tensor::{Tensor, TensorInner};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// Options of one backward pass.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::BackwardOptions;
/// let x = Tensor::scalar(2.0f64).requires_grad_(true)?;
/// let y = x.mul(&x)?;
/// y.backward_opts(None, BackwardOptions { retain_graph: Some(true), create_graph: false })?;
/// y.backward()?; // the graph was kept, so it can be walked again
/// assert_eq!(x.grad().unwrap().item::<f64>()?, 8.0);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct BackwardOptions {
    /// Keep the saved tensors so the graph can be walked again (default: `create_graph`).
    pub retain_graph: Option<bool>,
    /// Record the backward pass itself, for higher-order gradients.
    pub create_graph: bool,
}

/// Where computed gradients go: the leaves' `.grad` slots, (for `grad()`) a result per
/// target, or each contribution to a target on its own (`vjp_each`).
pub(crate) enum Sink<'a> {
    LeafGrads,
    Targets {
        targets: &'a [&'a Tensor],
        results: Vec<Option<Tensor>>,
    },
    /// Every contribution reaching one of the `targets` (leaves) on its own, unsummed, in
    /// delivery order: (index into `targets`, gradient).
    Each {
        targets: &'a [&'a Tensor],
        deliveries: Vec<(usize, Tensor)>,
    },
}

impl<'a> Sink<'a> {
    /// A sink collecting the gradients of `targets`.
    pub(crate) fn targets(targets: &'a [&'a Tensor]) -> Sink<'a> {
        Sink::Targets { targets, results: vec![None; targets.len()] }
    }
}

/// A node by address (thin: a node is found by its data, whatever its formula type).
type NodeKey = *const ();
type LeafKey = *const TensorInner;

struct Walk {
    node_deps: HashMap<NodeKey, usize>,
    leaf_deps: HashMap<LeafKey, usize>,
    /// The gradient summed so far for each output of each node.
    node_grads: HashMap<NodeKey, SmallVec<[Option<Tensor>; 1]>>,
    leaf_grads: HashMap<LeafKey, Tensor>,
    ready: Vec<Arc<GradNode>>,
    done: Vec<Arc<GradNode>>,
    /// The `.grad` updates (tensor, gradient), in delivery order. They are applied only when
    /// the whole walk succeeded, so a failed backward leaves every `.grad` as it was.
    writes: Vec<(Tensor, Tensor)>,
}

/// Runs backward from `roots` (each a tensor and the gradient of the loss with respect to it).
pub(crate) fn run(roots: &[(Tensor, Tensor)], opts: BackwardOptions, sink: &mut Sink) -> Result<()> {
    let mut walk = Walk::discover(roots);
    for (t, g) in roots {
        match t.grad_fn_raw() {
            Some(node) => add_output_grad(&mut walk.node_grads, &node, t.output_nr(), g.clone())?,
            None if t.requires_grad_raw() => {
                to_leaf(&mut walk.leaf_grads, t, g.clone(), sink)?;
                if !walk.leaf_deps.contains_key(&Arc::as_ptr(&t.0)) {
                    deliver_leaf(t, &mut walk, sink)?;
                }
            }
            None => return Err(Error::NoGradFn { op: "backward" }),
        }
    }
    let _mode = GradModeGuard::set(opts.create_graph);
    while let Some(node) = walk.ready.pop() {
        walk.process(&node, opts.create_graph, sink)?;
        walk.done.push(node);
    }
    for (t, g) in std::mem::take(&mut walk.writes) {
        t.accumulate_grad(&g)?;
    }
    if !opts.retain_graph.unwrap_or(opts.create_graph) {
        walk.done.iter().for_each(|n| n.release());
    }
    Ok(())
}

impl Walk {
    /// Counts, for every node and leaf reachable from the roots, how many edges lead to it.
    fn discover(roots: &[(Tensor, Tensor)]) -> Walk {
        let mut node_deps: HashMap<NodeKey, usize> = HashMap::new();
        let mut leaf_deps: HashMap<LeafKey, usize> = HashMap::new();
        let mut seen: HashMap<NodeKey, ()> = HashMap::new();
        let mut stack: Vec<Arc<GradNode>> = roots.iter().filter_map(|(t, _)| t.grad_fn_raw()).collect();
        let starts = stack.clone();
        while let Some(node) = stack.pop() {
            if seen.insert(key(&node), ()).is_some() {
                continue;
            }
            for e in &node.edges {
                match e {
                    Edge::Node(n, _) => {
                        *node_deps.entry(key(n)).or_default() += 1;
                        stack.push(n.clone());
                    }
                    Edge::Leaf(t) => *leaf_deps.entry(Arc::as_ptr(&t.0)).or_default() += 1,
                    Edge::None => {}
                }
            }
        }
        let mut ready: Vec<Arc<GradNode>> = Vec::new();
        for n in starts {
            let k = key(&n);
            if !node_deps.contains_key(&k) && !ready.iter().any(|r| key(r) == k) {
                ready.push(n);
            }
        }
        ready.reverse();
        Walk { node_deps, leaf_deps, node_grads: HashMap::new(), leaf_grads: HashMap::new(), ready, done: Vec::new(), writes: Vec::new() }
    }

    fn process(&mut self, node: &Arc<GradNode>, create_graph: bool, sink: &mut Sink) -> Result<()> {
        // A node every path to which carried no gradient still counts its inputs down.
        let grads = match self.node_grads.remove(&key(node)) {
            Some(outs) => {
                for (n, g) in outs.iter().enumerate() {
                    if let (Some(g), Some(out)) = (g, node.output_tensor(n)) {
                        deliver_non_leaf(&out, node, n, g, sink, &mut self.writes);
                    }
                }
                node.formula.backward(&BackwardCtx::new(node, create_graph)?, &outs)?
            }
            None => InputGrads::new(),
        };
        for (i, edge) in node.edges.iter().enumerate() {
            let grad = grads.get(i).cloned().flatten();
            match edge {
                Edge::None => {}
                Edge::Node(n, out) => {
                    let k = key(n);
                    if let Some(grad) = grad {
                        add_output_grad(&mut self.node_grads, n, *out, grad)?;
                    }
                    if countdown(&mut self.node_deps, k) {
                        self.ready.push(n.clone());
                    }
                }
                Edge::Leaf(t) => {
                    let k = Arc::as_ptr(&t.0);
                    if let Some(grad) = grad {
                        to_leaf(&mut self.leaf_grads, t, grad, sink)?;
                    }
                    if countdown(&mut self.leaf_deps, k) {
                        deliver_leaf(t, self, sink)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The key of a node.
fn key(n: &Arc<GradNode>) -> NodeKey {
    Arc::as_ptr(n) as *const ()
}

/// Decrements a dependency count; true when it reaches zero.
fn countdown<K: std::hash::Hash + Eq>(deps: &mut HashMap<K, usize>, k: K) -> bool {
    match deps.get_mut(&k) {
        Some(c) => {
            *c -= 1;
            *c == 0
        }
        None => true,
    }
}

/// Adds `g` to the gradient of output `n` of `node`.
fn add_output_grad(map: &mut HashMap<NodeKey, SmallVec<[Option<Tensor>; 1]>>, node: &Arc<GradNode>, n: usize, g: Tensor) -> Result<()> {
    let entry = map.entry(key(node)).or_insert_with(|| SmallVec::from_elem(None, node.num_outputs()));
    entry[n] = Some(match entry[n].take() {
        Some(prev) => prev.add(&g)?,
        None => g,
    });
    Ok(())
}

fn add_into<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Tensor>, k: K, g: Tensor) -> Result<()> {
    let sum = match map.remove(&k) {
        Some(prev) => prev.add(&g)?,
        None => g,
    };
    map.insert(k, sum);
    Ok(())
}

/// Gives `g` to leaf `t`: on its own to a sink that takes each contribution of its targets,
/// else added to the leaf's sum.
fn to_leaf(leaf_grads: &mut HashMap<LeafKey, Tensor>, t: &Tensor, g: Tensor, sink: &mut Sink) -> Result<()> {
    if let Sink::Each { targets, deliveries } = sink
        && let Some(i) = targets.iter().position(|x| x.same_as(t))
    {
        deliveries.push((i, g));
        return Ok(());
    }
    add_into(leaf_grads, Arc::as_ptr(&t.0), g)
}

/// Hands a leaf its summed gradient: into `.grad`, or into the results of `grad()`.
fn deliver_leaf(t: &Tensor, walk: &mut Walk, sink: &mut Sink) -> Result<()> {
    let Some(g) = walk.leaf_grads.remove(&Arc::as_ptr(&t.0)) else { return Ok(()) };
    match sink {
        Sink::LeafGrads => {
            walk.writes.push((t.clone(), g));
            Ok(())
        }
        Sink::Targets { targets, results } => {
            for (i, target) in targets.iter().enumerate() {
                if target.same_as(t) {
                    results[i] = Some(g.clone());
                }
            }
            Ok(())
        }
        // Its targets took theirs one by one; other leaves' gradients are not asked for.
        Sink::Each { .. } => Ok(()),
    }
}

/// A non-leaf's gradient is kept if it asked (`retain_grad`) or is a target of `grad()`.
fn deliver_non_leaf(out: &Tensor, node: &Arc<GradNode>, n: usize, g: &Tensor, sink: &mut Sink, writes: &mut Vec<(Tensor, Tensor)>) {
    match sink {
        Sink::LeafGrads => {
            if out.retains_grad() {
                writes.push((out.clone(), g.clone()));
            }
        }
        Sink::Targets { targets, results } => {
            for (i, target) in targets.iter().enumerate() {
                if target.grad_fn_raw().is_some_and(|f| Arc::ptr_eq(&f, node)) && target.output_nr() == n {
                    results[i] = Some(g.clone());
                }
            }
        }
        // Only leaves are its targets.
        Sink::Each { .. } => {}
    }
}
