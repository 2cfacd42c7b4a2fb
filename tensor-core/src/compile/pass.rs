//! The pass trait, the default pipeline, and the rewrites passes share (substituting one
//! value for another, dropping nodes).

use crate::graph::{Graph, StateWrite, ValueId};
use std::collections::HashMap;

/// One optimization over the graph IR. A pass must not change any value's bits.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::Pass;
/// use tensor_core::graph::Graph;
/// /// A pass that changes nothing (a pass must never change a value's bits).
/// struct Nothing;
/// impl Pass for Nothing {
///     fn name(&self) -> &'static str {
///         "nothing"
///     }
///     fn run(&self, _: &mut Graph) -> bool {
///         false
///     }
/// }
/// assert!(!Nothing.run(&mut Graph::new("g")));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait Pass {
    /// The pass's name, for logs.
    fn name(&self) -> &'static str;
    /// Rewrites `g`; true if anything changed.
    fn run(&self, g: &mut Graph) -> bool;
}

/// A list of passes, run in order.
///
/// ```
/// use tensor_core::prelude::*;
/// let (cleanup, lowering) = tensor_core::compile::default_passes();
/// assert!(cleanup.iter().any(|p| p.name() == "cse"));
/// assert_eq!(lowering[0].name(), "pad_sum_to_concat");
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub type PassList = Vec<Box<dyn Pass>>;

/// The passes that keep ops as ops (simplification, constant folding, common
/// subexpressions, dead code), run to a fixed point: what every graph gets first, and all an
/// ONNX export gets.
///
/// ```
/// let names: Vec<&str> = tensor_core::compile::cleanup_passes().iter().map(|p| p.name()).collect();
/// assert_eq!(names, ["simplify", "constant_fold", "cse", "dce"]);
/// ```
pub fn cleanup_passes() -> PassList {
    vec![Box::new(super::Simplify), Box::new(super::ConstantFold), Box::new(super::Cse), Box::new(super::Dce)]
}

/// The passes that lower a cleaned graph for the executor, run once each in order: sums of
/// pads tiling an axis made concats, operands read broadcast in place of `broadcast_to`
/// copies, fusion (elementwise groups, then epilogues) and the dead code they leave.
///
/// ```
/// let names: Vec<&str> = tensor_core::compile::lowering_passes().iter().map(|p| p.name()).collect();
/// assert_eq!(names, ["pad_sum_to_concat", "implicit_broadcast", "fuse_elementwise", "fuse_epilogue", "dce"]);
/// ```
pub fn lowering_passes() -> PassList {
    vec![
        Box::new(super::PadSumToConcat),
        Box::new(super::ImplicitBroadcast),
        Box::new(super::Fuse),
        Box::new(super::FuseEpilogue),
        Box::new(super::Dce),
    ]
}

/// The passes in the order they run: the cleanup passes to a fixed point, then the lowering
/// (pad sums as concats, implicit broadcasts, elementwise groups, epilogues).
///
/// ```
/// use tensor_core::prelude::*;
/// let (cleanup, lowering) = tensor_core::compile::default_passes();
/// let names: Vec<&str> = cleanup.iter().chain(&lowering).map(|p| p.name()).collect();
/// assert_eq!(names, ["simplify", "constant_fold", "cse", "dce", "pad_sum_to_concat", "implicit_broadcast", "fuse_elementwise", "fuse_epilogue", "dce"]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn default_passes() -> (PassList, PassList) {
    (cleanup_passes(), lowering_passes())
}

/// The most rounds [`run_to_fixed_point`] runs its passes.
pub const MAX_ROUNDS: usize = 8;

/// The graph after each pass that changed it: (pass name, text form).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{optimize, PassLog};
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(1.0)?.exp()?]))?;
/// let mut log = PassLog::new();
/// optimize(f.traced_graph(), Some(&mut log));
/// assert_eq!(log[0].0, "traced");
/// assert!(log.iter().any(|(pass, _)| *pass == "simplify"));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub type PassLog = Vec<(&'static str, String)>;

/// Runs each pass once, in order, recording the graph after each change if `log` is given;
/// true if any pass changed `g`.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{lowering_passes, run_once};
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?.neg()?]))?;
/// let mut g = f.traced_graph().clone();
/// assert!(run_once(&mut g, &lowering_passes(), None));
/// assert_eq!(g.count_op("fused"), 1);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn run_once(g: &mut Graph, passes: &[Box<dyn Pass>], mut log: Option<&mut PassLog>) -> bool {
    let mut changed = false;
    for p in passes {
        if p.run(g) {
            changed = true;
            if let Some(l) = log.as_deref_mut() {
                l.push((p.name(), g.to_text()));
            }
        }
    }
    changed
}

/// Runs the passes in rounds until a round changes nothing (at most [`MAX_ROUNDS`]),
/// recording the graph after each change if `log` is given; true if anything changed. The
/// one fixed-point loop every caller uses.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{cleanup_passes, run_to_fixed_point};
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(1.0)?.neg()?.neg()?]))?;
/// let mut g = f.traced_graph().clone();
/// assert!(run_to_fixed_point(&mut g, &cleanup_passes(), None));
/// assert_eq!((g.count_op("mul"), g.count_op("neg")), (0, 0));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn run_to_fixed_point(g: &mut Graph, passes: &[Box<dyn Pass>], mut log: Option<&mut PassLog>) -> bool {
    let mut changed = false;
    for _round in 0..MAX_ROUNDS {
        if !run_once(g, passes, log.as_deref_mut()) {
            break;
        }
        changed = true;
    }
    changed
}

/// A copy of `g` after the cleanup passes alone (to a fixed point): ops stay ops, so every
/// node is one the graph's text, a gradient or an ONNX export can name.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.add(0.0)?.exp()?.neg()?]))?;
/// let g = tensor_core::compile::cleanup(f.traced_graph());
/// assert_eq!((g.count_op("exp"), g.count_op("neg"), g.count_op("fused")), (1, 1, 0));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn cleanup(g: &Graph) -> Graph {
    let mut g = g.clone();
    run_to_fixed_point(&mut g, &cleanup_passes(), None);
    g
}

/// Runs the default pipeline on a copy of `g` — the cleanup passes to a fixed point, then the
/// lowering passes once — recording the graph after each change if `log` is given. The
/// subgraphs of control-flow nodes are left as they are (see [`optimize_subgraphs`]).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.add(0.0)?.exp()?.neg()?.neg()?]))?;
/// let g = tensor_core::compile::optimize(f.traced_graph(), None);
/// assert!(g.nodes.len() < f.traced_graph().nodes.len());
/// # Ok::<(), tensor_core::Error>(())
/// ```
///
/// [`optimize_subgraphs`]: super::optimize_subgraphs
pub fn optimize(g: &Graph, mut log: Option<&mut PassLog>) -> Graph {
    let mut g = g.clone();
    if let Some(l) = log.as_deref_mut() {
        l.push(("traced", g.to_text()));
    }
    run_to_fixed_point(&mut g, &cleanup_passes(), log.as_deref_mut());
    run_once(&mut g, &lowering_passes(), log);
    debug_assert_eq!(crate::graph::validate(&g), Ok(()), "optimized graph of {}", g.name);
    g
}

/// Replaces every use of each key of `map` by its value (following chains).
pub fn substitute(g: &mut Graph, map: &HashMap<ValueId, ValueId>) {
    if map.is_empty() {
        return;
    }
    let resolve = |mut v: ValueId| {
        while let Some(&w) = map.get(&v) {
            v = w;
        }
        v
    };
    for node in &mut g.nodes {
        for v in node.inputs.iter_mut() {
            *v = resolve(*v);
        }
    }
    for v in g.outputs.iter_mut() {
        *v = resolve(*v);
    }
    for w in g.writes.iter_mut() {
        match w {
            StateWrite::Data { value, .. } => *value = resolve(*value),
            StateWrite::Grad { value: Some(v), .. } => *v = resolve(*v),
            StateWrite::Grad { value: None, .. } => {}
        }
    }
}

/// Keeps the nodes whose flag is true.
pub fn retain_nodes(g: &mut Graph, keep: &[bool]) {
    let mut i = 0;
    g.nodes.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

/// How many times each value is read: by nodes, as an output, or by a state write.
pub fn use_counts(g: &Graph) -> Vec<usize> {
    let mut uses = vec![0; g.values.len()];
    g.nodes.iter().flat_map(|n| n.inputs.iter()).for_each(|&v| uses[v] += 1);
    g.outputs.iter().for_each(|&v| uses[v] += 1);
    for w in &g.writes {
        match w {
            StateWrite::Data { value, .. } | StateWrite::Grad { value: Some(value), .. } => uses[*value] += 1,
            StateWrite::Grad { value: None, .. } => {}
        }
    }
    uses
}

/// The constant values of `g`, by value id.
pub fn constants(g: &Graph) -> HashMap<ValueId, &crate::storage::Storage> {
    g.constants.iter().map(|(v, s)| (*v, s)).collect()
}
