//! The joint function of a graph call and its partition (JAX's partial evaluation,
//! AOTAutograd's joint graph). The forward graph is replayed through the op dispatch on fresh
//! leaves — one per *use* of each slot that needs a gradient — and the vector-Jacobian
//! product is taken on the replay, inside one trace: (slots, output gradients) -> each
//! contribution reaching a use, unsummed, in the order the eager walk delivers them (a use as
//! a `cond`'s branch input receives one per use inside the branch).
//!
//! The first nodes of that trace are the replayed forward (the *primal* part, one node per
//! node of the forward graph but prints: ops, `cond`s, `while_loop`s); everything after is
//! the backward formulas (the *tangent* part, whose control-flow gradients are `cond` and
//! `while_loop` nodes too). The primal values the tangent part reads are the *residuals*: the
//! values eager ops save for backward (`exp`'s output, a `matmul`'s operands made inside the
//! call, a loop's saved iterations). The forward graph returns them as extra outputs; the
//! backward graph is the tangent part alone, reading the residuals, the output gradients and
//! the slots the formulas read (saved inputs, checked against in-place changes as eagerly).

use super::gates::Use;
use super::slot_uses::uses_per_slot;
use crate::autograd::{vjp_each, GradModeGuard};
use crate::control::{is_replayed, replay_uses, Replayed};
use crate::error::{Error, Result};
use crate::graph::{Graph, InputSource, Node, NodeKind, StateWrite, ValueId};
use crate::tensor::Tensor;
use crate::trace::{TraceGuard, Traced};
use smallvec::SmallVec;
use std::collections::HashMap;

/// The backward half of a traced joint function.
pub(super) struct Split {
    /// The backward graph. Arguments: the forward's slots, the gradients of the outputs that
    /// receive one (in output order), then every residual of `residuals`.
    pub(super) graph: Graph,
    /// For each output of `graph`, the use of a forward slot it is the contribution of, in the
    /// order the eager walk delivers them.
    pub(super) contributions: Vec<Use>,
    /// The residuals: forward values (ids of the forward graph) the backward graph reads.
    pub(super) residuals: Vec<ValueId>,
    /// The forward graph the residuals are values of, when it is not `JointSpec::forward`:
    /// a `While` node the forward made without its history keeps it here, since the backward
    /// walks the iterations back (`primal_map`).
    pub(super) forward: Option<Graph>,
}

/// What the joint function is traced for.
pub(super) struct JointSpec<'a> {
    /// The forward graph (see `is_differentiable`).
    pub(super) forward: &'a Graph,
    /// The name of the backward function.
    pub(super) name: &'a str,
    /// The call's slots, and which of them need a gradient.
    pub(super) slots: &'a [&'a Tensor],
    pub(super) needs: &'a [bool],
    /// The node outputs that receive a gradient: indices into the forward's outputs followed
    /// by `known` residuals.
    pub(super) roots: &'a [usize],
    /// The residuals the forward keeps (`None`: found here, for every output receiving one).
    pub(super) known: Option<&'a [ValueId]>,
}

/// Traces the joint function for `spec` and returns its backward half.
pub(super) fn trace_split(spec: &JointSpec) -> Result<Split> {
    let joint = trace_joint(spec)?;
    let mut split = Partition::new(spec, &joint);
    split.copy_tangent()?;
    let mut split = split.finish(joint.contributions.clone());
    split.forward = joint.forward;
    Ok(split)
}

/// A traced joint function, with what its arguments and outputs stand for.
struct Joint {
    traced: Traced,
    /// The forward slot each argument leaf stands for (the output gradients follow them).
    arg_slots: Vec<usize>,
    /// The forward value each primal node output is.
    primal: HashMap<ValueId, ValueId>,
    /// The forward graph with the outputs the primal part's `While` nodes added (`None`: as
    /// given).
    forward: Option<Graph>,
    /// How many nodes the primal part has.
    primal_nodes: usize,
    /// The use each output is the contribution of (see `Split::contributions`).
    contributions: Vec<Use>,
}

fn trace_joint(spec: &JointSpec) -> Result<Joint> {
    let g = spec.forward;
    let (args, first_use) = use_leaves(spec)?;
    let guard = TraceGuard::begin(spec.name);
    for (k, (slot, t)) in args.iter().enumerate() {
        guard.bind_arg(t, k, &format!("{}.{}", g.slot_names[*slot], k - first_use[*slot]), t.raw_shape());
    }
    let _record = GradModeGuard::set(true);
    let mut cursor = first_use.clone();
    // A size computed from a slot's dims (a relaxed trace's) takes them from the slot's
    // first use: every use of a slot is the same tensor's.
    let dims = |slot: usize, axis: usize| args.iter().find(|(s, _)| *s == slot).and_then(|(_, t)| t.0.shape.dims().get(axis).copied());
    let (outputs, replayed) = replay_uses(g, &g.slot_of_values(), &dims, |slot| {
        let t = args[cursor[slot]].1.clone();
        cursor[slot] += usize::from(spec.needs[slot]);
        Ok(t)
    })?;
    let primal_nodes = g.nodes.iter().filter(|n| is_replayed(n)).count();
    let residual = |v: ValueId| {
        let problem = "a residual receiving a gradient was not made by the replayed forward";
        replayed.get(v).cloned().ok_or_else(|| Error::InvalidGraph { graph: spec.name.to_string(), problem: problem.to_string() })
    };
    let roots: Vec<Tensor> = spec
        .roots
        .iter()
        .map(|&k| if k < outputs.len() { Ok(outputs[k].clone()) } else { residual(spec.known.expect("residual roots are known")[k - outputs.len()]) })
        .collect::<Result<_>>()?;
    // The output gradients are arguments too, of the roots' types (dims may be unknown, in a
    // graph traced for several shapes): a one-element tensor binds each, and the backward
    // formulas see its stand-in, which has the declared type.
    let placeholders: Vec<Tensor> = roots.iter().map(|r| Tensor::zeros(&[], r.0.dtype)).collect();
    for (j, ((gy, k), r)) in placeholders.iter().zip(spec.roots).zip(&roots).enumerate() {
        guard.bind_arg(gy, args.len() + j, &format!("grad_output{k}"), r.0.shape.clone());
    }
    let gys: Vec<Tensor> = placeholders.iter().map(Tensor::stand_in).collect();
    let targets: Vec<&Tensor> = args.iter().filter(|(s, _)| spec.needs[*s]).map(|(_, t)| t).collect();
    let target_use: Vec<Use> =
        args.iter().enumerate().filter(|(_, (s, _))| spec.needs[*s]).map(|(j, (s, _))| Use { slot: *s, nth: j - first_use[*s] }).collect();
    let (root_refs, gy_refs): (Vec<&Tensor>, Vec<&Tensor>) = (roots.iter().collect(), gys.iter().collect());
    let deliveries = vjp_each(&root_refs, &gy_refs, &targets, false)?;
    let found: Vec<Tensor> = deliveries.iter().map(|(_, g)| g.clone()).collect();
    let contributions = deliveries.iter().map(|&(i, _)| target_use[i]).collect();
    let traced = guard.finish(&found)?;
    let (primal, forward) = primal_map(g, &traced.graph, &replayed, primal_nodes);
    let arg_slots = args.iter().map(|(s, _)| *s).collect();
    Ok(Joint { traced, arg_slots, primal, forward, primal_nodes, contributions })
}

/// The forward value each output of the primal part of `joint` is (the replay made one
/// joint node per replayed node of `forward`, in order). A `While` node replayed with inputs
/// that require grad keeps its history (the trip count and every iteration's variables, which
/// its backward reads) even where the forward's node did not (traced with no input requiring
/// grad): those outputs are added to a copy of `forward`, returned with the map.
fn primal_map(forward: &Graph, joint: &Graph, replayed: &Replayed, primal_nodes: usize) -> (HashMap<ValueId, ValueId>, Option<Graph>) {
    let made_by: HashMap<ValueId, usize> =
        joint.nodes[..primal_nodes].iter().enumerate().filter_map(|(j, n)| n.outputs.first().map(|&v| (v, j))).collect();
    let mut map = HashMap::new();
    let mut grown: Option<Graph> = None;
    for (i, node) in forward.nodes.iter().enumerate().filter(|(_, n)| is_replayed(n)) {
        let Some(first) = node.outputs.first().and_then(|&v| replayed.get(v)).and_then(Tensor::symbol) else { continue };
        let Some(&j) = made_by.get(&first.value) else { continue };
        let made = &joint.nodes[j];
        map.extend(made.outputs.iter().zip(&node.outputs).map(|(&jv, &fv)| (jv, fv)));
        if made.outputs.len() <= node.outputs.len() {
            continue;
        }
        let g = grown.get_or_insert_with(|| forward.clone());
        if let (NodeKind::While { history, .. }, NodeKind::While { history: kept, .. }) = (&mut g.nodes[i].kind, &made.kind) {
            *history = *kept;
        }
        for &jv in &made.outputs[node.outputs.len()..] {
            let info = &joint.values[jv];
            let fv = g.add_value(info.dtype, info.shape.clone(), None);
            g.nodes[i].outputs.push(fv);
            map.insert(jv, fv);
        }
    }
    (map, grown)
}

/// Argument leaves of the joint function, each with the forward slot it stands for.
type Leaves = Vec<(usize, Tensor)>;

/// The argument leaves of the joint function: per slot, a fresh leaf for each use when it
/// needs a gradient (so each use's contribution stays apart), else one detached tensor.
/// Returns them, and the index of each slot's first one.
fn use_leaves(spec: &JointSpec) -> Result<(Leaves, Vec<usize>)> {
    let uses = uses_per_slot(spec.forward, spec.slots.len());
    let mut args = Vec::new();
    let mut first = Vec::with_capacity(spec.slots.len());
    for (i, t) in spec.slots.iter().enumerate() {
        first.push(args.len());
        if spec.needs[i] {
            for _ in 0..uses[i] {
                args.push((i, t.detach().requires_grad_(true)?));
            }
        } else {
            args.push((i, t.detach()));
        }
    }
    Ok((args, first))
}

/// What a value of the joint graph read by the tangent part is in the backward graph
/// (values the tangent part makes are mapped when made).
#[derive(Clone, Copy)]
enum Source {
    /// An input: slot `k` of the backward function.
    Slot(usize),
    /// A constant of the joint graph.
    Constant(usize),
}

/// Copies the tangent part of a joint graph into the backward graph.
struct Partition<'a> {
    spec: &'a JointSpec<'a>,
    joint: &'a Joint,
    graph: Graph,
    /// Joint value -> backward value.
    map: HashMap<ValueId, ValueId>,
    /// Backward slot -> its input value (several use leaves of a slot are one input).
    inputs: HashMap<usize, ValueId>,
    residuals: Vec<ValueId>,
    num_gys: usize,
}

impl<'a> Partition<'a> {
    fn new(spec: &'a JointSpec<'a>, joint: &'a Joint) -> Partition<'a> {
        let graph = Graph::new(spec.name);
        let residuals = spec.known.map(<[ValueId]>::to_vec).unwrap_or_default();
        Partition { spec, joint, graph, map: HashMap::new(), inputs: HashMap::new(), residuals, num_gys: spec.roots.len() }
    }

    fn copy_tangent(&mut self) -> Result<()> {
        let joint = self.joint;
        let jg = &joint.traced.graph;
        if !joint.traced.captures.is_empty() || !jg.writes.is_empty() {
            return Err(self.problem("the backward formulas read or wrote state outside the call"));
        }
        for node in &jg.nodes[joint.primal_nodes..] {
            // Ops, and the cond/while_loop nodes of control-flow gradients (their subgraphs
            // read only their inputs).
            if !matches!(node.kind, NodeKind::Op(_) | NodeKind::Cond { .. } | NodeKind::While { .. }) {
                return Err(self.problem("a backward formula made a node that is neither an op nor control flow"));
            }
            let control = !matches!(node.kind, NodeKind::Op(_));
            let predicate = |position: usize| position == 0 && matches!(node.kind, NodeKind::Cond { .. });
            let inputs: SmallVec<[ValueId; 3]> = node
                .inputs
                .iter()
                .enumerate()
                .map(|(p, &v)| if control { self.control_input(v, predicate(p)) } else { self.value(v) })
                .collect::<Result<_>>()?;
            let outputs: SmallVec<[ValueId; 1]> = node.outputs.iter().map(|&v| self.made(v)).collect();
            self.graph.nodes.push(Node { kind: node.kind.clone(), inputs, outputs });
        }
        self.graph.outputs = jg.outputs.iter().map(|&v| self.value(v)).collect::<Result<_>>()?;
        Ok(())
    }

    /// The backward value for joint value `v`, made on first use.
    fn value(&mut self, v: ValueId) -> Result<ValueId> {
        if let Some(&b) = self.map.get(&v) {
            return Ok(b);
        }
        let b = match self.source(v)? {
            Source::Slot(slot) => self.input_of(slot, v),
            Source::Constant(k) => {
                let joint = self.joint;
                let (_, storage) = &joint.traced.graph.constants[k];
                let id = self.fresh(v);
                self.graph.constants.push((id, storage.clone()));
                id
            }
        };
        self.map.insert(v, b);
        Ok(b)
    }

    /// The input of backward slot `slot` (several joint values may stand for one), made on
    /// first use with the type of joint value `v`.
    fn input_of(&mut self, slot: usize, v: ValueId) -> ValueId {
        match self.inputs.get(&slot) {
            Some(&id) => id,
            None => {
                let id = self.fresh(v);
                self.inputs.insert(slot, id);
                id
            }
        }
    }

    /// The backward value a control-flow node of the tangent part reads for joint value `v`
    /// (`predicate`: as a `cond`'s predicate). Such a node replays a branch or a body on the
    /// values the forward ran on, so a slot the call updates in place (state carried through a
    /// `cond`) is read as the call read it, kept as a residual: eagerly no formula saved it, so
    /// its update is no version error. So is a slot that is a predicate (a bool flag argument),
    /// which eager code reads once, when it picks the branch.
    fn control_input(&mut self, v: ValueId, predicate: bool) -> Result<ValueId> {
        let Some(slot) = self.slot_read_as_called(v, predicate) else { return self.value(v) };
        let forward = self.spec.forward;
        let Some(&(forward_value, _)) = forward.inputs.iter().find(|(_, s)| *s == InputSource::Data(slot)) else { return self.value(v) };
        let r = self.residual_index(forward_value)?;
        Ok(self.input_of(self.spec.slots.len() + self.num_gys + r, v))
    }

    /// The forward slot joint value `v` reads, when it is an argument leaf of a slot that is a
    /// `predicate` or that the forward graph updates in place.
    fn slot_read_as_called(&self, v: ValueId, predicate: bool) -> Option<usize> {
        let jg = &self.joint.traced.graph;
        let &(_, InputSource::Data(j)) = jg.inputs.iter().find(|(id, _)| *id == v)? else { return None };
        let slot = *self.joint.arg_slots.get(j)?;
        let written = || self.spec.forward.writes.iter().any(|w| matches!(w, StateWrite::Data { slot: s, .. } if *s == slot));
        (predicate || written()).then_some(slot)
    }

    fn made(&mut self, v: ValueId) -> ValueId {
        let id = self.fresh(v);
        self.map.insert(v, id);
        id
    }

    fn fresh(&mut self, v: ValueId) -> ValueId {
        let joint = self.joint;
        let info = &joint.traced.graph.values[v];
        self.graph.add_value(info.dtype, info.shape.clone(), None)
    }

    /// Where joint value `v` (not yet mapped) comes from in the backward function.
    fn source(&mut self, v: ValueId) -> Result<Source> {
        let joint = self.joint;
        let jg = &joint.traced.graph;
        if let Some((_, src)) = jg.inputs.iter().find(|(id, _)| *id == v) {
            let InputSource::Data(j) = *src else { return Err(self.problem("the joint graph read a .grad")) };
            let forward_slots = self.spec.slots.len();
            return Ok(match self.joint.arg_slots.get(j) {
                Some(&slot) => Source::Slot(slot),
                None => Source::Slot(forward_slots + (j - self.joint.arg_slots.len())),
            });
        }
        if let Some(k) = jg.constants.iter().position(|(id, _)| *id == v) {
            return Ok(Source::Constant(k));
        }
        let Some(&forward_value) = self.joint.primal.get(&v) else { return Err(self.problem("a value of no known part")) };
        let r = self.residual_index(forward_value)?;
        Ok(Source::Slot(self.spec.slots.len() + self.num_gys + r))
    }

    /// The index of forward value `forward_value` among the residuals, added when they are
    /// being found.
    fn residual_index(&mut self, forward_value: ValueId) -> Result<usize> {
        match self.residuals.iter().position(|&r| r == forward_value) {
            Some(r) => Ok(r),
            None if self.spec.known.is_none() => {
                self.residuals.push(forward_value);
                Ok(self.residuals.len() - 1)
            }
            None => Err(self.problem("a backward needs a value the forward call did not keep")),
        }
    }

    fn problem(&self, problem: &str) -> Error {
        Error::InvalidGraph { graph: self.spec.name.to_string(), problem: problem.to_string() }
    }

    /// Gives every argument of the backward function an input, in slot order (a concrete
    /// function's inputs are its slots), names them, and returns the split.
    fn finish(mut self, contributions: Vec<Use>) -> Split {
        let g = self.spec.forward;
        let mut names: Vec<String> = g.slot_names.clone();
        names.extend(self.spec.roots.iter().map(|k| format!("grad_output{k}")));
        names.extend((0..self.residuals.len()).map(|r| format!("residual{r}")));
        let mut inputs = Vec::with_capacity(names.len());
        for (slot, name) in names.iter().enumerate() {
            let id = match self.inputs.get(&slot) {
                Some(&id) => id,
                None => {
                    let (dtype, shape) = self.arg_type(slot);
                    self.graph.add_value(dtype, shape, None)
                }
            };
            self.graph.values[id].name = name.clone();
            inputs.push((id, InputSource::Data(slot)));
        }
        self.graph.inputs = inputs;
        self.graph.num_arg_slots = names.len();
        self.graph.slot_names = names;
        Split { graph: self.graph, contributions, residuals: self.residuals, forward: None }
    }

    /// The type of argument `slot` of the backward function.
    fn arg_type(&self, slot: usize) -> (crate::dtype::DType, crate::shape::Shape) {
        let jg = &self.joint.traced.graph;
        let (n, gys) = (self.spec.slots.len(), self.num_gys);
        let joint_value = if slot < n {
            return (self.spec.slots[slot].0.dtype, self.spec.slots[slot].0.shape.clone());
        } else if slot < n + gys {
            jg.inputs[self.joint.arg_slots.len() + slot - n].0
        } else {
            let forward = self.residuals[slot - n - gys];
            // A slot kept as read (`control_input`): the slot's type.
            if let Some(&(_, InputSource::Data(s))) = self.spec.forward.inputs.iter().find(|(v, _)| *v == forward) {
                return (self.spec.slots[s].0.dtype, self.spec.slots[s].0.shape.clone());
            }
            *self.joint.primal.iter().find(|(_, f)| **f == forward).expect("every forward value is replayed").0
        };
        (jg.values[joint_value].dtype, jg.values[joint_value].shape.clone())
    }
}
