//! Which steps of a captured GPU call share one launch ("multi-tensor apply", as PyTorch's
//! fused Adam and XLA's horizontal loop fusion). An optimizer's step over forty parameters
//! is forty runs of one fused program (and forty of its 0-d step count and bias
//! corrections), each a kernel of its own although they differ only in their sizes; on a
//! GPU each small launch costs more than its work. Fused programs with the same generated
//! kernel (the same instructions, input dtypes and access, every input contiguous or one
//! value) that do not depend on each other run as one batched kernel
//! (`cuda/source/batched.rs`), which gives every element the bits of its own kernel.
//!
//! A group launches at the position of its last member. A member whose outputs a step
//! before that position reads (another member, or a step outside the group, at its own
//! launch's position) cannot wait that long: it leaves the group, and the members that left
//! try again as a group of their own, at their own last member. Until nothing changes (each
//! change moves a member to an earlier position, so it ends). A group's table holds at most
//! [`batch_capacity`] members, so a larger class starts as several groups.
//!
//! It is data, computed on the CPU and tested here; `compile/gpu.rs` records the launches in
//! CUDA-graph captures, and lane placement (`lanes.rs`) sees each launch as one step.

use super::memory_plan::{Plan, Step};
use crate::cuda::source::{batch_capacity, Access};
use crate::dtype::DType;
use crate::graph::{Node, NodeKind, ValueId};
use crate::math::{FusedProgram, Instr};
use smallvec::SmallVec;

/// A plan's launches, in order.
pub(crate) struct Launches {
    /// One step a launch: a batched launch's step reads and makes what its members do, and
    /// frees each value after the last launch that reads it.
    pub plan: Plan,
    /// Each launch's steps of the original plan: one (a plain launch), or a batched launch's
    /// members in their plan order.
    pub members: Vec<SmallVec<[usize; 1]>>,
}

impl Launches {
    /// The launches of `plan`, batched (`batch`) or one a step.
    pub(crate) fn new(plan: &Plan, num_values: usize, batch: bool) -> Launches {
        let order = if batch { launch_order(plan, num_values) } else { (0..plan.steps.len()).map(|s| SmallVec::from_elem(s, 1)).collect() };
        let steps = merged_steps(plan, &order, num_values);
        Launches { plan: Plan { steps, checks_shapes: plan.checks_shapes, on_worker: plan.on_worker }, members: order }
    }
}

/// What makes two fused programs one kernel: their instructions, outputs, and each input's
/// dtype and access.
type Key = (Vec<Instr>, Vec<usize>, Vec<(DType, Access)>);

/// The kernel of a step, if the step is a fused program a batched kernel can run: every shape
/// known and not empty, every input contiguous (the output's shape) or one value.
fn kernel_key(step: &Step) -> Option<Key> {
    let NodeKind::Fused(p) = &step.node.kind else { return None };
    let access = batchable_access(p)?;
    Some((p.instrs.clone(), p.outputs.clone(), access))
}

fn batchable_access(p: &FusedProgram) -> Option<Vec<(DType, Access)>> {
    if !p.shape.is_known() || p.shape.numel() == 0 {
        return None;
    }
    p.inputs
        .iter()
        .map(|(d, s)| match s {
            s if !s.is_known() => None,
            s if *s == p.shape => Some((*d, Access::Contiguous)),
            s if s.numel() == 1 => Some((*d, Access::Scalar)),
            _ => None,
        })
        .collect()
}

/// The plan's launches in order, each the steps it runs: a batched launch's members, or
/// one step. Every value is made by an earlier launch than any that reads it.
pub(crate) fn launch_order(plan: &Plan, num_values: usize) -> Vec<SmallVec<[usize; 1]>> {
    let steps = &plan.steps;
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut classes: Vec<(Key, Vec<usize>)> = Vec::new();
    for (s, step) in steps.iter().enumerate() {
        let Some(key) = kernel_key(step) else { continue };
        match classes.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(s),
            None => classes.push((key, vec![s])),
        }
    }
    for (_, members) in &classes {
        let step = &steps[members[0]].node;
        groups.extend(members.chunks(batch_capacity(step.inputs.len() + step.outputs.len())).map(<[usize]>::to_vec));
    }
    let readers = readers(plan, num_values);
    let mut group_of: Vec<Option<usize>> = vec![None; steps.len()];
    for (g, members) in groups.iter().enumerate() {
        members.iter().for_each(|&m| group_of[m] = Some(g));
    }
    let mut changed = true;
    while changed {
        changed = false;
        let mut g = 0;
        while g < groups.len() {
            let at = |s: usize, group_of: &[Option<usize>]| group_of[s].map_or(s, |h| *groups[h].last().expect("groups are not empty"));
            let Some(&position) = groups[g].last() else {
                g += 1;
                continue;
            };
            let waits_too_long = |m: usize| readers[m].iter().any(|&r| group_of[r] == Some(g) || at(r, &group_of) < position);
            let (left, kept): (Vec<usize>, Vec<usize>) = groups[g].iter().partition(|&&m| waits_too_long(m));
            if !left.is_empty() {
                changed = true;
                left.iter().for_each(|&m| group_of[m] = Some(groups.len()));
                groups[g] = kept;
                groups.push(left);
            }
            g += 1;
        }
    }
    let mut launches: Vec<(usize, SmallVec<[usize; 1]>)> =
        (0..steps.len()).filter(|&s| group_of[s].is_none_or(|g| groups[g].len() < 2)).map(|s| (s, SmallVec::from_elem(s, 1))).collect();
    launches.extend(groups.iter().filter(|g| g.len() >= 2).map(|g| (*g.last().expect("two members"), g.iter().copied().collect())));
    launches.sort_by_key(|(position, _)| *position);
    launches.into_iter().map(|(_, members)| members).collect()
}

/// For each step, the steps that read its outputs.
fn readers(plan: &Plan, num_values: usize) -> Vec<SmallVec<[usize; 2]>> {
    let mut made_by: Vec<Option<usize>> = vec![None; num_values];
    let mut readers = vec![SmallVec::new(); plan.steps.len()];
    for (s, step) in plan.steps.iter().enumerate() {
        for &v in &step.node.inputs {
            if let Some(p) = made_by[v]
                && !readers[p].contains(&s)
            {
                readers[p].push(s);
            }
        }
        step.node.outputs.iter().for_each(|&v| made_by[v] = Some(s));
    }
    readers
}

/// One step a launch: a batched launch's node reads every member's inputs and makes every
/// member's outputs (its kind is the first member's: only its values are read). A value the
/// plan frees is freed after the last launch that reads it.
fn merged_steps(plan: &Plan, order: &[SmallVec<[usize; 1]>], num_values: usize) -> Vec<Step> {
    let freed: Vec<bool> = plan.steps.iter().flat_map(|s| s.frees.iter()).fold(vec![false; num_values], |mut f, &v| {
        f[v] = true;
        f
    });
    let nodes: Vec<Node> = order
        .iter()
        .map(|members| match members.as_slice() {
            [one] => plan.steps[*one].node.clone(),
            many => {
                let of = |s: &usize| &plan.steps[*s].node;
                Node {
                    kind: of(&many[0]).kind.clone(),
                    inputs: many.iter().flat_map(|s| of(s).inputs.iter().copied()).collect(),
                    outputs: many.iter().flat_map(|s| of(s).outputs.iter().copied()).collect(),
                }
            }
        })
        .collect();
    let mut last: Vec<Option<usize>> = vec![None; num_values];
    for (l, node) in nodes.iter().enumerate() {
        node.inputs.iter().for_each(|&v| last[v] = Some(l));
    }
    nodes
        .into_iter()
        .enumerate()
        .map(|(l, node)| {
            let mut frees: SmallVec<[ValueId; 4]> = node.inputs.iter().copied().filter(|&v| freed[v] && last[v] == Some(l)).collect();
            frees.sort_unstable();
            frees.dedup();
            let donate = SmallVec::from_elem(false, node.inputs.len());
            Step { node, frees, donate, with_next: false, streams: false }
        })
        .collect()
}

/// A graph's launches in a CUDA-graph capture: its plan's steps (each one kernel or cuBLAS
/// call, but for a few ops of several: a concat copies each region), the launches with
/// batching, and the size of each batched launch. For the device checks and the docs, not
/// part of the API.
#[doc(hidden)]
pub fn launch_summary(graph: &crate::graph::Graph) -> (usize, usize, Vec<usize>) {
    let plan = Plan::new(graph);
    let order = launch_order(&plan, graph.values.len());
    let sizes = order.iter().map(|m| m.len()).filter(|&n| n > 1).collect();
    (plan.steps.len(), order.len(), sizes)
}

#[cfg(test)]
mod tests;
