//! Which steps of a captured GPU call share one launch ("multi-tensor apply", as PyTorch's
//! fused Adam and XLA's horizontal loop fusion). An optimizer's step over forty parameters
//! is forty runs of one fused program (and forty of its 0-d step count and bias
//! corrections), each a kernel of its own although they differ only in their sizes; on a
//! GPU each small launch costs more than its work. Fused programs with the same generated
//! kernel (the same instructions, input dtypes and access, every input contiguous or one
//! value) that do not depend on each other run as one batched kernel
//! (`cuda/source/batched.rs`), which gives every element the bits of its own kernel.
//!
//! A group launches at the plan position of one of its members, where the most of them fit:
//! a member fits at a position if every step that makes what it reads launches before it,
//! and every step that reads what it makes launches after it (none of them in its group).
//! Members that do not fit there try again as a group of their own, until nothing changes
//! (or a bound on the rounds). The simpler rule, each group at its last member, batches
//! less: an Adam step's 0-d bias corrections are read by the weight matrices' updates, which
//! are products with an epilogue and run where they stand; it remains the fallback. The
//! order is checked before it is used: every step once, after each step it reads from. A
//! group's table holds at most [`batch_capacity`] members, so a larger class starts as
//! several groups.
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
/// one step. Every value is made by an earlier launch than any that reads it (checked: an
/// order that failed the check would fall back to the last-member rule, then to none).
pub(crate) fn launch_order(plan: &Plan, num_values: usize) -> Vec<SmallVec<[usize; 1]>> {
    let links = Links::new(plan, num_values);
    let classes = initial_groups(plan);
    for placed in [best_positions(&links, classes.clone()), last_member_positions(&links, classes)] {
        let order = ordered(plan.steps.len(), &placed);
        if links.respected_by(&order) {
            return order;
        }
    }
    (0..plan.steps.len()).map(|s| SmallVec::from_elem(s, 1)).collect()
}

/// The fused steps with one kernel, in plan order, as many a group as a table holds.
fn initial_groups(plan: &Plan) -> Vec<Vec<usize>> {
    let mut classes: Vec<(Key, Vec<usize>)> = Vec::new();
    for (s, step) in plan.steps.iter().enumerate() {
        let Some(key) = kernel_key(step) else { continue };
        match classes.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(s),
            None => classes.push((key, vec![s])),
        }
    }
    let mut groups = Vec::new();
    for (_, members) in &classes {
        let step = &plan.steps[members[0]].node;
        groups.extend(members.chunks(batch_capacity(step.inputs.len() + step.outputs.len())).map(<[usize]>::to_vec));
    }
    groups
}

/// Groups with their positions (a position is one of the group's members' plan positions).
struct Placed {
    groups: Vec<Vec<usize>>,
    position: Vec<usize>,
    group_of: Vec<Option<usize>>,
}

impl Placed {
    fn new(steps: usize, groups: Vec<Vec<usize>>) -> Placed {
        let mut group_of = vec![None; steps];
        for (g, members) in groups.iter().enumerate() {
            members.iter().for_each(|&m| group_of[m] = Some(g));
        }
        let position = groups.iter().map(|g| *g.last().expect("groups are not empty")).collect();
        Placed { groups, position, group_of }
    }

    /// Where step `s` launches: its group's position, or its own.
    fn at(&self, s: usize) -> usize {
        self.group_of[s].map_or(s, |g| self.position[g])
    }

    /// Whether member `m` of group `g` can launch at `p`: what it reads is made before (by a
    /// member of its own group only if that member leaves, which the rule for the maker
    /// sees to) and what it makes is read after, by no member of its group.
    fn fits(&self, links: &Links, g: usize, m: usize, p: usize) -> bool {
        let mine = |s: usize| self.group_of[s] == Some(g);
        links.readers[m].iter().all(|&r| !mine(r) && self.at(r) > p) && links.makers[m].iter().all(|&q| mine(q) || self.at(q) < p)
    }

    /// Every member of group `g` launches alone; whether it had two or more.
    fn dissolve(&mut self, g: usize) -> bool {
        let members = std::mem::take(&mut self.groups[g]);
        members.iter().for_each(|&m| self.group_of[m] = None);
        members.len() > 1
    }

    /// Keeps the members of group `g` that fit at `p` there; the others form a new group.
    fn split(&mut self, links: &Links, g: usize, p: usize) -> bool {
        let (kept, left): (Vec<usize>, Vec<usize>) = self.groups[g].iter().partition(|&&m| self.fits(links, g, m, p));
        self.position[g] = p;
        if left.is_empty() {
            return false;
        }
        let new = self.groups.len();
        left.iter().for_each(|&m| self.group_of[m] = Some(new));
        self.position.push(*left.last().expect("not empty"));
        self.groups[g] = kept;
        self.groups.push(left);
        true
    }
}

/// Each group at the member's position where most of its members fit (the latest of
/// equals); the members that do not fit try again as a group of their own. Until nothing
/// changes, or a bound on the rounds (the order is checked either way).
fn best_positions(links: &Links, groups: Vec<Vec<usize>>) -> Placed {
    let mut placed = Placed::new(links.readers.len(), groups);
    for _ in 0..4 * links.readers.len().max(1) {
        let mut changed = false;
        let mut g = 0;
        while g < placed.groups.len() {
            let members = &placed.groups[g];
            let count = |p: usize| members.iter().filter(|&&m| placed.fits(links, g, m, p)).count();
            let best = members.iter().copied().filter(|&p| placed.fits(links, g, p, p)).max_by_key(|&p| (count(p), p));
            let moved = best.is_some_and(|p| p != placed.position[g]);
            changed |= match best {
                Some(p) => placed.split(links, g, p) || moved,
                // No member fits where it stands: each launches alone.
                None => placed.dissolve(g),
            };
            g += 1;
        }
        if !changed {
            break;
        }
    }
    placed
}

/// The simplest valid rule: each group at its last member; a member whose outputs are read
/// before that position leaves, and the members that left try again as a group of their
/// own. Each move is to an earlier position, so it ends.
fn last_member_positions(links: &Links, groups: Vec<Vec<usize>>) -> Placed {
    let mut placed = Placed::new(links.readers.len(), groups);
    let mut changed = true;
    while changed {
        changed = false;
        let mut g = 0;
        while g < placed.groups.len() {
            let position = placed.position[g];
            let waits_too_long = |m: usize| links.readers[m].iter().any(|&r| placed.group_of[r] == Some(g) || placed.at(r) < position);
            let (left, kept): (Vec<usize>, Vec<usize>) = placed.groups[g].iter().partition(|&&m| waits_too_long(m));
            if !left.is_empty() {
                changed = true;
                let new = placed.groups.len();
                left.iter().for_each(|&m| placed.group_of[m] = Some(new));
                placed.position.push(*left.last().expect("not empty"));
                placed.groups[g] = kept;
                placed.groups.push(left);
            }
            g += 1;
        }
    }
    placed
}

/// The launches by position: each group of two or more at its position, every other step
/// at its own.
fn ordered(steps: usize, placed: &Placed) -> Vec<SmallVec<[usize; 1]>> {
    let batched = |s: usize| placed.group_of[s].is_some_and(|g| placed.groups[g].len() > 1);
    let mut launches: Vec<(usize, SmallVec<[usize; 1]>)> = (0..steps).filter(|&s| !batched(s)).map(|s| (s, SmallVec::from_elem(s, 1))).collect();
    launches.extend(placed.groups.iter().zip(&placed.position).filter(|(g, _)| g.len() > 1).map(|(g, &p)| (p, g.iter().copied().collect())));
    launches.sort_by_key(|(position, _)| *position);
    launches.into_iter().map(|(_, members)| members).collect()
}

/// Which steps read each step's outputs, and which make each step's inputs.
struct Links {
    readers: Vec<SmallVec<[usize; 2]>>,
    makers: Vec<SmallVec<[usize; 2]>>,
}

impl Links {
    fn new(plan: &Plan, num_values: usize) -> Links {
        let readers = readers(plan, num_values);
        let mut makers = vec![SmallVec::new(); readers.len()];
        for (q, rs) in readers.iter().enumerate() {
            rs.iter().for_each(|&r| makers[r].push(q));
        }
        Links { readers, makers }
    }

    /// Whether every step runs once, after each step that makes what it reads, and no
    /// launch holds a step and one that reads it.
    fn respected_by(&self, order: &[SmallVec<[usize; 1]>]) -> bool {
        let mut launch_of = vec![usize::MAX; self.readers.len()];
        for (l, members) in order.iter().enumerate() {
            for &s in members {
                if launch_of[s] != usize::MAX {
                    return false;
                }
                launch_of[s] = l;
            }
        }
        launch_of.iter().all(|&l| l != usize::MAX) && self.readers.iter().enumerate().all(|(s, rs)| rs.iter().all(|&r| launch_of[s] < launch_of[r]))
    }
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
