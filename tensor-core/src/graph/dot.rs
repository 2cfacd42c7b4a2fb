//! Graphviz DOT export: inputs and constants as ellipses, nodes as boxes labelled with the op
//! and output type, edges along the data flow, control-flow bodies as clusters.

use super::{Graph, InputSource, NodeKind, StateWrite};
use std::collections::HashMap;
use std::fmt::Write;

impl Graph {
    /// The graph in Graphviz DOT (render with `dot -Tsvg`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?]))?;
    /// let dot = f.graph().to_dot();
    /// assert!(dot.starts_with("digraph") && dot.contains("exp"));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_dot(&self) -> String {
        let mut out = String::new();
        writeln!(out, "digraph \"{}\" {{", escape(&self.name)).expect("String write");
        out.push_str("  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
        self.write_dot_body(&mut out, "");
        out.push_str("}\n");
        out
    }

    fn write_dot_body(&self, out: &mut String, prefix: &str) {
        let mut producer: HashMap<usize, String> = HashMap::new();
        for (v, src) in &self.inputs {
            let id = format!("{prefix}in{v}");
            let kind = match src {
                InputSource::Data(_) => "input",
                InputSource::Grad(_) => "grad input",
                InputSource::Param(_) => "parameter",
            };
            let _ = writeln!(out, "  {id} [shape=ellipse, label=\"{}\\n{}\\n{}\"];", escape(&self.values[*v].name), kind, self.type_label(*v));
            producer.insert(*v, id);
        }
        for (v, _) in &self.constants {
            let id = format!("{prefix}c{v}");
            let _ = writeln!(out, "  {id} [shape=ellipse, style=dashed, label=\"const\\n{}\"];", self.type_label(*v));
            producer.insert(*v, id);
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let id = format!("{prefix}n{i}");
            let types: Vec<String> = node.outputs.iter().map(|&v| self.type_label(v)).collect();
            let label = match &node.kind {
                NodeKind::Op(op) if !op.attrs().is_empty() => format!("{}\\n[{}]", op.name(), escape(&op.attrs())),
                NodeKind::Fused(p) => format!("fused\\n[{}]", escape(&p.summary())),
                NodeKind::Epilogue(e) => format!("{}\\n+fused[{}]", e.anchor.name(), escape(&e.program.summary())),
                _ => node.kind_name().to_string(),
            };
            let _ = writeln!(out, "  {id} [label=\"{label}\\n{}\"];", types.join(", "));
            for &v in &node.inputs {
                if let Some(p) = producer.get(&v) {
                    let _ = writeln!(out, "  {p} -> {id};");
                }
            }
            self.write_subgraphs(out, node, &id);
            for &v in &node.outputs {
                producer.insert(v, id.clone());
            }
        }
        let ret = format!("{prefix}ret");
        let _ = writeln!(out, "  {ret} [shape=doubleoctagon, label=\"return\"];");
        for v in &self.outputs {
            if let Some(p) = producer.get(v) {
                let _ = writeln!(out, "  {p} -> {ret};");
            }
        }
        for (k, w) in self.writes.iter().enumerate() {
            let (slot, value, what) = match w {
                StateWrite::Data { slot, value } => (*slot, Some(*value), ""),
                StateWrite::Grad { slot, value } => (*slot, *value, ".grad"),
            };
            let id = format!("{prefix}w{k}");
            let _ = writeln!(out, "  {id} [shape=house, label=\"{}{what} <-\"];", escape(&self.slot_names[slot]));
            if let Some(p) = value.and_then(|v| producer.get(&v)) {
                let _ = writeln!(out, "  {p} -> {id};");
            }
        }
    }

    fn write_subgraphs(&self, out: &mut String, node: &super::Node, id: &str) {
        let subs: Vec<(&str, &Graph)> = match &node.kind {
            NodeKind::Cond { then, other } => vec![("then", then), ("else", other)],
            NodeKind::While { cond, body, .. } => vec![("cond", cond), ("body", body)],
            _ => return,
        };
        for (label, g) in subs {
            let _ = writeln!(out, "  subgraph cluster_{id}_{label} {{\n  label=\"{label}\"; style=rounded;");
            g.write_dot_body(out, &format!("{id}_{label}_"));
            let _ = writeln!(out, "  }}");
        }
    }

    fn type_label(&self, v: usize) -> String {
        format!("{}{}", self.values[v].dtype, self.shape_text(v))
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
