//! Elementwise fusion: maximal groups of elementwise ops over one output shape — chains,
//! trees, siblings reading the same inputs, with scalar and broadcast operands — become one
//! `Fused` node that makes a single pass over memory. The node holds the program's
//! description; lowering the graph compiles it (see `lower.rs` and `kernels::fused`).
//!
//! Nodes are visited in program order. An elementwise node joins the groups that produced its
//! inputs (merging them) if they are still open and have its shape; a group closes as soon as
//! a node outside it reads one of its values, so moving the group's work to its last member's
//! place never delays a value another node needs earlier.

use super::pass::Pass;
use crate::graph::{FusedProgram, Graph, Instr, Node, NodeKind, Operand, StateWrite, ValueId};
use crate::ops::Op;
use crate::shape::Shape;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// Elementwise fusion.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{Fuse, Pass};
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[8], DType::F32);
/// let f = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[x.shape()], false, || Ok(vec![x.mul(1.5)?.add(0.5)?.tanh()?]))?;
/// let mut g = f.traced_graph().clone();
/// assert!(Fuse.run(&mut g));
/// assert_eq!((g.nodes.len(), g.count_op("fused")), (1, 1));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct Fuse;

struct Group {
    shape: Shape,
    members: Vec<usize>,
    open: bool,
}

impl Pass for Fuse {
    fn name(&self) -> &'static str {
        "fuse_elementwise"
    }

    fn run(&self, g: &mut Graph) -> bool {
        let groups = find_groups(g);
        if groups.is_empty() {
            return false;
        }
        let mut replace: HashMap<usize, Node> = HashMap::new();
        let mut remove = vec![false; g.nodes.len()];
        for members in groups {
            let last = *members.last().expect("groups are not empty");
            replace.insert(last, fused_node(g, &members));
            members[..members.len() - 1].iter().for_each(|&m| remove[m] = true);
        }
        let old = std::mem::take(&mut g.nodes);
        g.nodes = old.into_iter().enumerate().filter(|(i, _)| !remove[*i]).map(|(i, n)| replace.remove(&i).unwrap_or(n)).collect();
        true
    }
}

/// The member node indices of every group, each in program order.
fn find_groups(g: &Graph) -> Vec<Vec<usize>> {
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of_value: HashMap<ValueId, usize> = HashMap::new();
    let mut redirect: Vec<usize> = Vec::new();
    let root = |redirect: &Vec<usize>, mut k: usize| {
        while redirect[k] != k {
            k = redirect[k];
        }
        k
    };
    for (i, node) in g.nodes.iter().enumerate() {
        let producers: Vec<usize> = node.inputs.iter().filter_map(|v| group_of_value.get(v)).map(|&k| root(&redirect, k)).collect();
        let shape = fusible_shape(g, node);
        let mut joined = None;
        if let Some(shape) = &shape {
            let mut cands: Vec<usize> = producers.iter().copied().filter(|&k| groups[k].open && &groups[k].shape == shape).collect();
            cands.sort_unstable();
            cands.dedup();
            let target = match cands.first() {
                Some(&first) => first,
                None => {
                    groups.push(Group { shape: shape.clone(), members: Vec::new(), open: true });
                    redirect.push(groups.len() - 1);
                    groups.len() - 1
                }
            };
            for &other in cands.iter().skip(1) {
                let moved = std::mem::take(&mut groups[other].members);
                groups[target].members.extend(moved);
                redirect[other] = target;
            }
            groups[target].members.push(i);
            node.outputs.iter().for_each(|&v| {
                group_of_value.insert(v, target);
            });
            joined = Some(target);
        }
        // Any group whose value this node reads without being a member is closed.
        for k in producers {
            if Some(k) != joined {
                groups[k].open = false;
            }
        }
    }
    groups
        .into_iter()
        // One op alone gains nothing from a fused program (one pass either way) and would pay
        // for its set-up on every call: it stays an `Op` node.
        .filter(|grp| grp.members.len() >= 2)
        .map(|mut grp| {
            grp.members.sort_unstable();
            grp.members
        })
        .collect()
}

/// The output shape of an elementwise op node whose shape is fully known.
fn fusible_shape(g: &Graph, node: &Node) -> Option<Shape> {
    match &node.kind {
        NodeKind::Op(op) if op.is_elementwise() => {
            let shape = &g.values[node.outputs[0]].shape;
            let inputs_known = node.inputs.iter().all(|&v| g.values[v].shape.is_known());
            (shape.is_known() && inputs_known && shape.numel() > 0).then(|| shape.clone())
        }
        _ => None,
    }
}

/// The `Fused` node computing `members` (node indices in program order).
pub(super) fn fused_node(g: &Graph, members: &[usize]) -> Node {
    let produced: HashMap<ValueId, usize> = members.iter().enumerate().map(|(k, &m)| (g.nodes[m].outputs[0], k)).collect();
    let mut inputs: Vec<ValueId> = Vec::new();
    let mut instrs = Vec::with_capacity(members.len());
    for &m in members {
        let node = &g.nodes[m];
        let NodeKind::Op(Op::Elementwise(op)) = &node.kind else { unreachable!("members are elementwise op nodes") };
        let args: SmallVec<[Operand; 3]> = node
            .inputs
            .iter()
            .map(|v| match produced.get(v) {
                Some(&k) => Operand::ResultOf(k),
                None => Operand::Input(inputs.iter().position(|w| w == v).unwrap_or_else(|| {
                    inputs.push(*v);
                    inputs.len() - 1
                })),
            })
            .collect();
        instrs.push(Instr { op: op.clone(), args, dtype: g.values[node.outputs[0]].dtype });
    }
    let used_outside = used_outside(g, members);
    let outputs: Vec<usize> = (0..members.len()).filter(|&k| used_outside.contains(&g.nodes[members[k]].outputs[0])).collect();
    let shape = g.values[g.nodes[members[0]].outputs[0]].shape.clone();
    let input_types = inputs.iter().map(|&v| (g.values[v].dtype, g.values[v].shape.clone())).collect();
    let out_values = outputs.iter().map(|&k| g.nodes[members[k]].outputs[0]).collect();
    let program = FusedProgram { shape, inputs: input_types, instrs, outputs };
    Node { kind: NodeKind::Fused(Arc::new(program)), inputs: inputs.into(), outputs: out_values }
}

/// The members' values read by anything outside the group: other nodes, outputs, writes.
fn used_outside(g: &Graph, members: &[usize]) -> Vec<ValueId> {
    // Masks by node and by value, so a group of any size costs one pass over the graph.
    let mut member = vec![false; g.nodes.len()];
    let mut mine = vec![false; g.values.len()];
    for &m in members {
        member[m] = true;
        mine[g.nodes[m].outputs[0]] = true;
    }
    let mut used: Vec<ValueId> = Vec::new();
    let mut mark = |v: ValueId| {
        if std::mem::take(&mut mine[v]) {
            used.push(v);
        }
    };
    for (i, node) in g.nodes.iter().enumerate() {
        if !member[i] {
            node.inputs.iter().for_each(|&v| mark(v));
        }
    }
    g.outputs.iter().for_each(|&v| mark(v));
    for w in &g.writes {
        match w {
            StateWrite::Data { value, .. } | StateWrite::Grad { value: Some(value), .. } => mark(*value),
            StateWrite::Grad { value: None, .. } => {}
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::tests::{assert_same, traced};
    use crate::prelude::*;

    #[test]
    fn fuses_the_w2_expression_into_one_node() -> Result<()> {
        let x = Tensor::randn(&[1000], DType::F32, 0);
        let mut g = traced(&[&x], || Ok(vec![((&x * 1.5f32 + 0.5f32).tanh()? * x.sigmoid()? - &x * 0.5f32)]));
        assert_eq!(g.nodes.len(), 7);
        let before = g.clone();
        assert!(Fuse.run(&mut g));
        assert_eq!(g.nodes.len(), 1, "{}", g.to_text());
        assert_same(&before, &g, &[&x]);
        Ok(())
    }

    /// Runs of scalar ops run as one chain kernel (`kernels::fused::chain`): the same bits as
    /// op by op, for every dtype and side, any length, with intermediates that are outputs or
    /// read twice breaking the run.
    #[test]
    fn scalar_chains_keep_the_bits() -> Result<()> {
        for (dtype, n) in [(DType::F32, 37), (DType::F64, 8), (DType::I32, 19), (DType::I64, 1), (DType::F32, 3000)] {
            let x = Tensor::randn(&[n], DType::F64, n as u64).mul(7.0)?.cast(dtype)?;
            let mut g = traced(&[&x], || {
                let mut y = x.clone();
                for i in 0..20 {
                    let s = 1.0 + i as f64 * 0.37;
                    y = (&y * s + 0.5 - 3.0).div(s)?;
                    y = (2.0 - &y) * 1.5;
                    y = 7.0 / (&y * &y + 1.0);
                }
                let mid = &y * 3.0; // read twice and an output: ends a run
                let z = (&mid + 1.0) * 0.25 + &mid;
                Ok(vec![z, mid])
            });
            let before = g.clone();
            assert!(Fuse.run(&mut g));
            assert_eq!(g.count_op("fused"), 1, "{}", g.to_text());
            let program = g.nodes.iter().find_map(|n| if let crate::graph::NodeKind::Fused(p) = &n.kind { Some(p.clone()) } else { None }).unwrap();
            let compiled = crate::kernels::fused::CompiledProgram::new(&program);
            // 20 x 10 scalar ops, one binary op per `y * y + 1.0` and per `/ (..)`, a run per
            // stretch between them: far fewer loops than ops.
            assert!(compiled.num_kernels() * 2 < program.instrs.len(), "{} loops for {} ops", compiled.num_kernels(), program.instrs.len());
            assert_same(&before, &g, &[&x]);
        }
        Ok(())
    }

    #[test]
    fn a_lone_elementwise_op_stays_an_op() -> Result<()> {
        let x = Tensor::randn(&[2, 8], DType::F32, 5);
        let w = Tensor::randn(&[8, 8], DType::F32, 6);
        // Each elementwise op is cut off from the others by a matmul: nothing to fuse.
        let mut g = traced(&[&x, &w], || Ok(vec![x.add(1.0f32)?.matmul(&w)?.relu()?]));
        assert!(!Fuse.run(&mut g), "{}", g.to_text());
        assert_eq!(g.count_op("fused"), 0);
        Ok(())
    }

    #[test]
    fn keeps_values_needed_before_the_group_ends() -> Result<()> {
        let x = Tensor::randn(&[4, 3], DType::F64, 1);
        let w = Tensor::randn(&[3, 3], DType::F64, 2);
        let mut g = traced(&[&x, &w], || {
            let a = x.mul(2.0)?.exp()?; // group 1, read by the matmul: closes
            let m = a.matmul(&w)?;
            let b = a.add(&m)?.relu()?; // may not join group 1
            let c = Tensor::where_(&b.gt(0.5)?, &b, &x.neg()?)?; // bool, where and a sibling
            Ok(vec![c, a])
        });
        let before = g.clone();
        assert!(Fuse.run(&mut g));
        assert_eq!(g.count_op("fused"), 2, "{}", g.to_text());
        assert_eq!(g.count_op("matmul"), 1);
        crate::graph::validate(&g).unwrap();
        assert_same(&before, &g, &[&x, &w]);
        Ok(())
    }

    #[test]
    fn broadcast_and_scalar_operands_join() -> Result<()> {
        let x = Tensor::randn(&[5, 4], DType::F32, 3);
        let b = Tensor::randn(&[4], DType::F32, 4);
        let s = Tensor::scalar(0.25f32);
        let mut g = traced(&[&x, &b, &s], || Ok(vec![x.add(&b)?.mul(&s)?.relu()?.sub(&b.broadcast_to(&[5, 4])?)?]));
        let before = g.clone();
        assert!(Fuse.run(&mut g));
        assert_eq!(g.count_op("fused"), 1, "{}", g.to_text());
        assert_same(&before, &g, &[&x, &b, &s]);
        Ok(())
    }
}
