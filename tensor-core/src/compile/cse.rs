//! Common-subexpression elimination: an op applied to the same inputs with the same
//! attributes twice is computed once; equal small constants are merged.

use super::pass::{substitute, use_counts, Pass};
use crate::graph::{Graph, NodeKind, ValueId};
use crate::ops::Op;
use smallvec::SmallVec;
use std::collections::HashMap;

/// Constants up to this many elements are compared for merging.
const SMALL_CONSTANT: usize = 64;

/// Common-subexpression elimination.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{Cse, Dce, Pass};
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[x.shape()], false, || Ok(vec![x.exp()?.add(&x.exp()?)?]))?;
/// let mut g = f.traced_graph().clone();
/// assert!(Cse.run(&mut g)); // the add now reads the first exp(x) twice
/// Dce.run(&mut g); // and the second is gone
/// assert_eq!(g.count_op("exp"), 1);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct Cse;

impl Pass for Cse {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn run(&self, g: &mut Graph) -> bool {
        let uses = use_counts(g);
        let mut map: HashMap<ValueId, ValueId> = merge_constants(g, &uses);
        let mut seen: HashMap<(Op, SmallVec<[ValueId; 3]>), ValueId> = HashMap::new();
        for node in &g.nodes {
            let NodeKind::Op(op) = &node.kind else { continue };
            if uses[node.outputs[0]] == 0 {
                continue;
            }
            let inputs: SmallVec<[ValueId; 3]> = node.inputs.iter().map(|v| *map.get(v).unwrap_or(v)).collect();
            match seen.get(&(op.clone(), inputs.clone())) {
                Some(&first) => {
                    map.insert(node.outputs[0], first);
                }
                None => {
                    seen.insert((op.clone(), inputs), node.outputs[0]);
                }
            }
        }
        let changed = !map.is_empty();
        substitute(g, &map);
        changed
    }
}

/// Maps each small constant to the first equal one (same dtype, shape and bits).
fn merge_constants(g: &Graph, uses: &[usize]) -> HashMap<ValueId, ValueId> {
    let mut map = HashMap::new();
    let small: Vec<&(ValueId, crate::storage::Storage)> = g.constants.iter().filter(|(v, s)| s.len() <= SMALL_CONSTANT && uses[*v] > 0).collect();
    for (i, (v, s)) in small.iter().enumerate() {
        if let Some((first, _)) = small[..i].iter().find(|(w, t)| !map.contains_key(w) && t.bit_eq(s)) {
            map.insert(*v, *first);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::tests::{assert_same, traced};
    use crate::compile::Dce;
    use crate::prelude::*;

    #[test]
    fn merges_repeated_ops_and_constants() -> Result<()> {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
        let mut g = traced(&[&x], || {
            let a = x.exp()?.add(&Tensor::ones(&[3], DType::F32))?;
            let b = x.exp()?.add(&Tensor::ones(&[3], DType::F32))?;
            Ok(vec![a.mul(&b)?])
        });
        assert_eq!((g.count_op("exp"), g.count_op("add"), g.constants.len()), (2, 2, 2));
        let before = g.clone();
        assert!(Cse.run(&mut g));
        Dce.run(&mut g);
        assert_eq!((g.count_op("exp"), g.count_op("add"), g.constants.len()), (1, 1, 1), "{}", g.to_text());
        assert_same(&before, &g, &[&x]);
        Ok(())
    }
}
