//! Which parameters of a subgraph each of its outputs is computed from (through any node,
//! so a conservative answer for gradients: an output reached only through a comparison still
//! counts). A loop's backward uses it to know which loop variables can receive a gradient.

use super::Graph;

impl Graph {
    /// `reach[k][j]`: output `k` is computed from parameter `j`.
    pub(crate) fn outputs_reach_params(&self) -> Vec<Vec<bool>> {
        let mut from: Vec<Vec<bool>> = vec![Vec::new(); self.values.len()];
        for (v, param) in self.param_of_values().into_iter().enumerate() {
            if let Some(j) = param {
                from[v] = (0..self.num_params).map(|i| i == j).collect();
            }
        }
        for node in &self.nodes {
            let mut set = vec![false; self.num_params];
            for &v in &node.inputs {
                for (j, &f) in from[v].iter().enumerate() {
                    set[j] |= f;
                }
            }
            for &v in &node.outputs {
                from[v] = set.clone();
            }
        }
        self.outputs.iter().map(|&v| if from[v].is_empty() { vec![false; self.num_params] } else { from[v].clone() }).collect()
    }
}
