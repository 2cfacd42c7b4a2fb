//! Constant folding: an op whose inputs are all constants is computed once, with the same
//! kernel the graph would run, and becomes a constant.

use super::pass::{constants, Pass};
use crate::graph::{Graph, NodeKind};
use crate::storage::Storage;

/// Results larger than this stay computed at run time (they would bloat the graph).
const MAX_FOLDED: usize = 1 << 16;

/// Constant folding.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{ConstantFold, Pass};
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[x.shape()], false, || {
///     let c = Tensor::ones(&[2], DType::F32).exp()?; // made inside: a constant
///     Ok(vec![x.mul(&c)?])
/// })?;
/// let mut g = f.traced_graph().clone();
/// assert!(ConstantFold.run(&mut g));
/// assert_eq!(g.count_op("exp"), 0); // computed once, when compiling
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct ConstantFold;

impl Pass for ConstantFold {
    fn name(&self) -> &'static str {
        "constant_fold"
    }

    fn run(&self, g: &mut Graph) -> bool {
        let mut folded: Vec<(usize, Storage)> = Vec::new();
        {
            let consts = constants(g);
            let mut new_consts: std::collections::HashMap<usize, Storage> = std::collections::HashMap::new();
            for node in &g.nodes {
                let NodeKind::Op(op) = &node.kind else { continue };
                let out = node.outputs[0];
                if !g.values[out].shape.is_known() || g.values[out].shape.numel() > MAX_FOLDED {
                    continue;
                }
                let inputs: Option<Vec<&Storage>> = node.inputs.iter().map(|v| consts.get(v).copied().or_else(|| new_consts.get(v))).collect();
                let Some(inputs) = inputs else { continue };
                if let Ok(s) = op.compute(&inputs) {
                    new_consts.insert(out, s.clone());
                    folded.push((out, s));
                }
            }
        }
        if folded.is_empty() {
            return false;
        }
        let outs: Vec<usize> = folded.iter().map(|(v, _)| *v).collect();
        g.nodes.retain(|n| !n.outputs.iter().any(|v| outs.contains(v)));
        g.constants.extend(folded);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::tests::{assert_same, traced};
    use crate::prelude::*;

    #[test]
    fn folds_ops_on_constants_only() -> Result<()> {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
        let mut g = traced(&[&x], || {
            let c = Tensor::from_vec(vec![0.5f32, 4.0], &[2])?;
            let k = c.sqrt()?.mul(3.0)?;
            Ok(vec![x.mul(&k)?])
        });
        assert_eq!((g.nodes.len(), g.constants.len()), (3, 1));
        let before = g.clone();
        assert!(ConstantFold.run(&mut g));
        assert_eq!(g.nodes.len(), 1, "{}", g.to_text());
        assert_same(&before, &g, &[&x]);
        Ok(())
    }
}
