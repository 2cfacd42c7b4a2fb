//! Dead-code elimination: drops nodes whose results nothing needs (not an output, not
//! written back to state, not read by a needed node) unless they print, and drops unused
//! constants and inputs.

use super::pass::{retain_nodes, Pass};
use crate::graph::{Graph, StateWrite};

/// Dead-code elimination.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{Dce, Pass};
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[x.shape()], false, || {
///     let _unused = x.tanh()?;
///     Ok(vec![x.exp()?])
/// })?;
/// let mut g = f.traced_graph().clone();
/// assert!(Dce.run(&mut g));
/// assert_eq!((g.count_op("tanh"), g.count_op("exp")), (0, 1));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn run(&self, g: &mut Graph) -> bool {
        let mut live = vec![false; g.values.len()];
        g.outputs.iter().for_each(|&v| live[v] = true);
        for w in &g.writes {
            match w {
                StateWrite::Data { value, .. } | StateWrite::Grad { value: Some(value), .. } => live[*value] = true,
                StateWrite::Grad { value: None, .. } => {}
            }
        }
        let mut keep = vec![false; g.nodes.len()];
        for (i, node) in g.nodes.iter().enumerate().rev() {
            if node.has_side_effect() || node.outputs.iter().any(|&v| live[v]) {
                keep[i] = true;
                node.inputs.iter().for_each(|&v| live[v] = true);
            }
        }
        let before = (g.nodes.len(), g.constants.len(), g.inputs.len());
        retain_nodes(g, &keep);
        g.constants.retain(|(v, _)| live[*v]);
        g.inputs.retain(|(v, _)| live[*v]);
        before != (g.nodes.len(), g.constants.len(), g.inputs.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::tests::{assert_same, traced};
    use crate::prelude::*;

    #[test]
    fn removes_unused_nodes_and_keeps_prints() -> Result<()> {
        let x = Tensor::from_vec(vec![1.0f32, -2.0], &[2])?;
        let mut g = traced(&[&x], || {
            let _unused = x.exp()?.mul(3.0)?;
            tprint!("{}", x.abs()?);
            Ok(vec![x.relu()?])
        });
        assert_eq!(g.nodes.len(), 5);
        let before = g.clone();
        assert!(Dce.run(&mut g));
        assert_eq!(g.nodes.len(), 3, "{}", g.to_text());
        assert_eq!(g.count_op("exp"), 0);
        assert_eq!(g.count_op("tprint"), 1);
        assert_same(&before, &g, &[&x]);
        Ok(())
    }
}
