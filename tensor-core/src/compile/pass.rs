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
/// assert_eq!(lowering[0].name(), "fuse_elementwise");
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub type PassList = Vec<Box<dyn Pass>>;

/// The passes in the order they run: the cleanup passes to a fixed point, then fusion
/// (elementwise groups, then epilogues).
///
/// ```
/// use tensor_core::prelude::*;
/// let (cleanup, lowering) = tensor_core::compile::default_passes();
/// let names: Vec<&str> = cleanup.iter().chain(&lowering).map(|p| p.name()).collect();
/// assert_eq!(names, ["simplify", "constant_fold", "cse", "dce", "fuse_elementwise", "fuse_epilogue", "dce"]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn default_passes() -> (PassList, PassList) {
    let cleanup: PassList = vec![Box::new(super::Simplify), Box::new(super::ConstantFold), Box::new(super::Cse), Box::new(super::Dce)];
    let lowering: PassList = vec![Box::new(super::Fuse), Box::new(super::FuseEpilogue), Box::new(super::Dce)];
    (cleanup, lowering)
}

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

/// Runs the default pipeline on a copy of `g`, recording the graph after each change if
/// `log` is given.
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
pub fn optimize(g: &Graph, mut log: Option<&mut PassLog>) -> Graph {
    let mut g = g.clone();
    if let Some(l) = log.as_deref_mut() {
        l.push(("traced", g.to_text()));
    }
    let (cleanup, lowering) = default_passes();
    for _round in 0..8 {
        let mut changed = false;
        for p in &cleanup {
            if p.run(&mut g) {
                changed = true;
                if let Some(l) = log.as_deref_mut() {
                    l.push((p.name(), g.to_text()));
                }
            }
        }
        if !changed {
            break;
        }
    }
    for p in &lowering {
        if p.run(&mut g)
            && let Some(l) = log.as_deref_mut()
        {
            l.push((p.name(), g.to_text()));
        }
    }
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
