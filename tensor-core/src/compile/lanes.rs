//! Which stream ("lane") each step of a captured GPU call is recorded on, so that the CUDA
//! graph gets the call's independent branches side by side: the optimizer's per-parameter
//! updates, a layer's weight and input gradients, attention's heads of work. A CUDA graph
//! runs nodes with no path between them concurrently; one stream records every step after
//! the one before, which hides that. Small kernels each fill a fraction of the GPU, so
//! running them side by side is what a step of a small model needs most.
//!
//! The schedule is list scheduling with one unit of time per step, in the plan's order: a
//! step goes to the lane where it can start first, preferring the lane of its latest input
//! (no wait needed), and a lane that reads a value made on another lane waits for that lane
//! first. A wait covers everything recorded on the other lane so far (a CUDA event), so the
//! simulation starts a step no earlier than the end of each lane it waits for.
//!
//! It is data, computed on the CPU and tested here; `compile/gpu.rs` records it.

use super::memory_plan::Plan;
use crate::graph::ValueId;
use smallvec::SmallVec;

/// One step's place: its lane, and the lanes it waits for before it is recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    pub lane: usize,
    pub waits: SmallVec<[usize; 2]>,
}

/// The lanes of a plan's steps, over `lanes` streams (1: every step on lane 0, no waits).
pub(crate) fn schedule(plan: &Plan, num_values: usize, lanes: usize) -> Vec<Placement> {
    simulate(plan, num_values, lanes).0
}

/// Places every step in order; returns the placements and the lanes as they end.
fn simulate(plan: &Plan, num_values: usize, lanes: usize) -> (Vec<Placement>, Lanes) {
    let mut made_on: Vec<Option<(usize, usize)>> = vec![None; num_values];
    let mut state = Lanes::new(lanes.max(1));
    let placements = plan
        .steps
        .iter()
        .map(|step| {
            let inputs: SmallVec<[(usize, usize); 4]> = step.node.inputs.iter().filter_map(|&v: &ValueId| made_on[v]).collect();
            let placement = state.place(&inputs);
            let position = state.recorded[placement.lane] - 1;
            for &v in &step.node.outputs {
                made_on[v] = Some((placement.lane, position));
            }
            placement
        })
        .collect();
    (placements, state)
}

/// What a capture of `graph` over `lanes` streams records, by the schedule above: the steps
/// on each lane, the waits between lanes, and the simulated length (one unit per step; the
/// step count on one lane). For the device checks and the docs, not part of the API.
#[doc(hidden)]
pub fn lane_summary(graph: &crate::graph::Graph, lanes: usize) -> (Vec<usize>, usize, usize) {
    let (placements, state) = simulate(&Plan::new(graph), graph.values.len(), lanes);
    let waits = placements.iter().map(|p| p.waits.len()).sum();
    (state.recorded, waits, state.time.iter().copied().max().unwrap_or(0))
}

/// The simulated lanes: each one's time, how many steps it has recorded, and how far it has
/// waited for each other lane.
struct Lanes {
    time: Vec<usize>,
    recorded: Vec<usize>,
    /// `synced[l][p]`: how many of lane `p`'s steps lane `l` is known to come after.
    synced: Vec<Vec<usize>>,
}

impl Lanes {
    fn new(lanes: usize) -> Lanes {
        Lanes { time: vec![0; lanes], recorded: vec![0; lanes], synced: vec![vec![0; lanes]; lanes] }
    }

    /// Places a step whose inputs were made at `(lane, position)`, and records it.
    fn place(&mut self, inputs: &[(usize, usize)]) -> Placement {
        // The lane of the input made last: staying there needs no wait for it.
        let latest = inputs.iter().map(|(l, _)| *l).max_by_key(|&l| (self.time[l], std::cmp::Reverse(l)));
        let (start, _, lane) =
            (0..self.time.len()).map(|l| (self.start(l, inputs), usize::from(Some(l) != latest), l)).min().expect("at least one lane");
        let (waits, synced) = self.waits(lane, inputs);
        self.synced[lane] = synced;
        self.time[lane] = start + 1;
        self.recorded[lane] += 1;
        self.synced[lane][lane] = self.recorded[lane];
        Placement { lane, waits }
    }

    /// The lanes `lane` must wait for to read `inputs`, fewest first: a wait for lane `p`
    /// also covers what `p` itself waited for. With them, how far `lane` is synced after.
    fn waits(&self, lane: usize, inputs: &[(usize, usize)]) -> (SmallVec<[usize; 2]>, Vec<usize>) {
        let mut synced = self.synced[lane].clone();
        let mut waits = SmallVec::new();
        loop {
            let uncovered = inputs.iter().filter(|(p, pos)| synced[*p] <= *pos).map(|(p, _)| *p);
            let Some(p) = uncovered.max_by_key(|&p| (self.time[p], std::cmp::Reverse(p))) else {
                break;
            };
            waits.push(p);
            synced = synced.iter().zip(&self.synced[p]).map(|(a, b)| *a.max(b)).collect();
            synced[p] = self.recorded[p];
        }
        waits.sort_unstable();
        (waits, synced)
    }

    /// When a step reading `inputs` could start on `lane`: after the lane's own work and
    /// after all the work of each lane it must wait for.
    fn start(&self, lane: usize, inputs: &[(usize, usize)]) -> usize {
        self.waits(lane, inputs).0.iter().map(|&p| self.time[p]).fold(self.time[lane], usize::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Node, NodeKind};
    use crate::ops::{ElementwiseOp, Op, UnaryOp};

    /// A plan of unary steps, each `(inputs, output)`.
    fn plan(steps: &[(&[usize], usize)]) -> Plan {
        let op: Op = ElementwiseOp::Unary(UnaryOp::Neg).into();
        let steps = steps
            .iter()
            .map(|(inputs, out)| super::super::memory_plan::Step {
                node: Node { kind: NodeKind::Op(op.clone()), inputs: inputs.iter().copied().collect(), outputs: smallvec::smallvec![*out] },
                frees: SmallVec::new(),
                donate: SmallVec::from_elem(false, inputs.len()),
                with_next: false,
                streams: false,
            })
            .collect();
        Plan { steps, checks_shapes: false, on_worker: false }
    }

    fn lanes_of(p: &[Placement]) -> Vec<usize> {
        p.iter().map(|s| s.lane).collect()
    }

    #[test]
    fn a_chain_stays_on_one_lane() {
        // v0 -> v1 -> v2 -> v3
        let s = schedule(&plan(&[(&[0], 1), (&[1], 2), (&[2], 3)]), 4, 4);
        assert_eq!(lanes_of(&s), [0, 0, 0]);
        assert!(s.iter().all(|p| p.waits.is_empty()));
    }

    #[test]
    fn independent_steps_spread_and_a_join_waits_for_each() {
        // Four independent steps from the input, then one step reading all four.
        let s = schedule(&plan(&[(&[0], 1), (&[0], 2), (&[0], 3), (&[0], 4), (&[1, 2, 3, 4], 5)]), 6, 4);
        assert_eq!(lanes_of(&s), [0, 1, 2, 3, 0]);
        assert!(s[..4].iter().all(|p| p.waits.is_empty()));
        assert_eq!(s[4].waits.as_slice(), [1, 2, 3]);
    }

    #[test]
    fn more_branches_than_lanes_queue_behind_each_other() {
        let s = schedule(&plan(&[(&[0], 1), (&[0], 2), (&[0], 3)]), 4, 2);
        assert_eq!(lanes_of(&s), [0, 1, 0]);
    }

    #[test]
    fn a_wait_is_not_repeated_once_the_lane_has_caught_up() {
        // v1 and v2 side by side; v3 reads both (waits for lane 1); v4 reads v2 again.
        let s = schedule(&plan(&[(&[0], 1), (&[0], 2), (&[1, 2], 3), (&[2, 3], 4)]), 5, 2);
        assert_eq!(lanes_of(&s), [0, 1, 0, 0]);
        assert_eq!(s[2].waits.as_slice(), [1]);
        assert!(s[3].waits.is_empty());
    }

    #[test]
    fn waits_pass_through_the_lane_waited_for() {
        // Lane 1 waits for lane 2's step; the last step, on lane 1, reads lane 2's value
        // again with no second wait, and waits for lane 0 only.
        let s = schedule(&plan(&[(&[0], 1), (&[0], 2), (&[0], 3), (&[2, 3], 4), (&[1, 4, 3], 5)]), 6, 3);
        assert_eq!(lanes_of(&s), [0, 1, 2, 1, 1]);
        assert_eq!(s[3].waits.as_slice(), [2]);
        assert_eq!(s[4].waits.as_slice(), [0]);
        // Placed on lane 0 instead, one wait (for lane 1) would cover lane 2 as well.
        let mut lanes = Lanes::new(3);
        for inputs in [&[][..], &[], &[], &[(1, 0), (2, 0)]] {
            lanes.place(inputs);
        }
        assert_eq!(lanes.waits(0, &[(0, 0), (1, 1), (2, 0)]).0.as_slice(), [1]);
    }

    #[test]
    fn one_lane_records_everything_in_order() {
        let s = schedule(&plan(&[(&[0], 1), (&[0], 2), (&[1, 2], 3)]), 4, 1);
        assert_eq!(lanes_of(&s), [0, 0, 0]);
        assert!(s.iter().all(|p| p.waits.is_empty()));
    }
}
