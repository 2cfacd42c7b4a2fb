//! How many gradient edges reach each input of a graph when autograd records a replay of it:
//! one per operand of an op, `While` node or returned value, and — since a `cond`'s grad node
//! has an edge per use of each branch input inside its branch — as many as the branch gives
//! the matching parameter, counted the same way (recursively). A backward that hands each
//! edge's gradient on separately can then add them where an eager walk over the same ops does.
//! Also which input each value of a graph is (a parameter, a slot).

use super::{Graph, InputSource, NodeKind, ValueId};

impl Graph {
    /// The parameter each value is, if any (a subgraph's inputs).
    pub(crate) fn param_of_values(&self) -> Vec<Option<usize>> {
        self.input_of_values(|src| match src {
            InputSource::Param(k) => Some(*k),
            _ => None,
        })
    }

    /// The slot each value reads, if any (a function graph's data inputs).
    pub(crate) fn slot_of_values(&self) -> Vec<Option<usize>> {
        self.input_of_values(|src| match src {
            InputSource::Data(slot) => Some(*slot),
            _ => None,
        })
    }

    fn input_of_values(&self, index: impl Fn(&InputSource) -> Option<usize>) -> Vec<Option<usize>> {
        let mut of = vec![None; self.values.len()];
        for (v, src) in &self.inputs {
            of[*v] = index(src);
        }
        of
    }

    /// Per parameter of this subgraph (a branch or a loop body), its gradient edges.
    pub(crate) fn param_edges(&self) -> Vec<usize> {
        let param = self.param_of_values();
        self.edges_to(self.num_params, |v| param[v])
    }

    /// Per input `0..n` (`index(v)`: the input value `v` is, if any), its gradient edges.
    pub(crate) fn edges_to(&self, n: usize, index: impl Fn(ValueId) -> Option<usize>) -> Vec<usize> {
        let mut edges = vec![0; n];
        for node in self.nodes.iter().filter(|n| !matches!(n.kind, NodeKind::Print(_))) {
            let branches = match &node.kind {
                NodeKind::Cond { then, other } => Some((then.num_params, then.param_edges(), other.param_edges())),
                _ => None,
            };
            for (position, &v) in node.inputs.iter().enumerate() {
                let Some(i) = index(v) else { continue };
                edges[i] += match &branches {
                    Some((nt, then, other)) if position > 0 => {
                        if position - 1 < *nt {
                            then[position - 1]
                        } else {
                            other[position - 1 - nt]
                        }
                    }
                    _ => 1,
                };
            }
        }
        for &v in &self.outputs {
            if let Some(i) = index(v) {
                edges[i] += 1;
            }
        }
        edges
    }
}
