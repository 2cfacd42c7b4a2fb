//! The text form of a graph: one line per node, like a jaxpr.
//!
//! ```text
//! graph f(x: f32[2], capture_0: f32[2]) {
//!   v2: f32[2] = mul(x, capture_0)
//!   v3: f32[2] = add[rhs=1.0](v2)
//!   tprint("y = {}", v3)
//!   return (v3)
//! }
//! ```

use super::{Graph, NodeKind, PrintPiece, StateWrite};
use std::fmt::{self, Write};

impl Graph {
    /// The graph as text, one line per node.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?]))?;
    /// assert_eq!(f.graph().to_text(), "graph f(x: f32[2]) {\n  v1: f32[2] = exp(x)\n  return (v1)\n}");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write_text(&mut out, 0).expect("writing to a String cannot fail");
        out
    }

    fn write_text(&self, out: &mut String, indent: usize) -> fmt::Result {
        let pad = "  ".repeat(indent);
        writeln!(out, "graph {}({}) {{", self.name, self.input_list())?;
        for (v, storage) in &self.constants {
            let t = crate::tensor::Tensor::from_storage(storage.clone());
            let compact: String = t.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
            writeln!(out, "{pad}  {} = const {compact}", self.typed(*v))?;
        }
        for node in &self.nodes {
            self.write_node(out, node, indent + 1)?;
        }
        let outputs: Vec<&str> = self.outputs.iter().map(|&v| self.values[v].name.as_str()).collect();
        writeln!(out, "{pad}  return ({})", outputs.join(", "))?;
        for w in &self.writes {
            match w {
                StateWrite::Data { slot, value } => writeln!(out, "{pad}  {} <- {}", self.slot_names[*slot], self.values[*value].name)?,
                StateWrite::Grad { slot, value: Some(v) } => writeln!(out, "{pad}  {}.grad <- {}", self.slot_names[*slot], self.values[*v].name)?,
                StateWrite::Grad { slot, value: None } => writeln!(out, "{pad}  {}.grad <- none", self.slot_names[*slot])?,
            }
        }
        write!(out, "{pad}}}")
    }

    fn input_list(&self) -> String {
        self.inputs.iter().map(|(v, _)| self.typed(*v)).collect::<Vec<_>>().join(", ")
    }

    fn typed(&self, v: usize) -> String {
        let info = &self.values[v];
        format!("{}: {}{}", info.name, info.dtype, self.shape_text(v))
    }

    fn write_node(&self, out: &mut String, node: &super::Node, indent: usize) -> fmt::Result {
        let pad = "  ".repeat(indent);
        let args: Vec<&str> = node.inputs.iter().map(|&v| self.values[v].name.as_str()).collect();
        let args = args.join(", ");
        let results: Vec<String> = node.outputs.iter().map(|&v| self.typed(v)).collect();
        let results = results.join(", ");
        match &node.kind {
            NodeKind::Op(op) => {
                let attrs = op.attrs();
                let attrs = if attrs.is_empty() { String::new() } else { format!("[{attrs}]") };
                writeln!(out, "{pad}{results} = {}{attrs}({args})", op.name())
            }
            NodeKind::Print(pieces) => writeln!(out, "{pad}tprint({:?}{}{args})", print_template(pieces), if args.is_empty() { "" } else { ", " }),
            NodeKind::Fused(p) => writeln!(out, "{pad}{results} = fused[{}]({args})", p.summary()),
            NodeKind::Epilogue(e) => {
                let attrs = e.anchor.attrs();
                let attrs = if attrs.is_empty() { String::new() } else { format!("[{attrs}]") };
                writeln!(out, "{pad}{results} = {}{attrs}+fused[{}]({args})", e.anchor.name(), e.program.summary())
            }
            NodeKind::AccumulateGrad { slot } => writeln!(out, "{pad}{results} = accumulate_grad[{}.grad]({args})", self.slot_names[*slot]),
            NodeKind::Cond { then, other } => {
                writeln!(out, "{pad}{results} = cond({args}) {{")?;
                write!(out, "{pad}  then: ")?;
                then.write_text(out, indent + 1)?;
                write!(out, "\n{pad}  else: ")?;
                other.write_text(out, indent + 1)?;
                writeln!(out, "\n{pad}}}")
            }
            NodeKind::While { cond, body, max_iterations, history } => {
                let mut attrs: Vec<String> = max_iterations.iter().map(|m| format!("max_iterations={m}")).collect();
                if *history {
                    attrs.push("history".into());
                }
                let max = if attrs.is_empty() { String::new() } else { format!("[{}]", attrs.join(" ")) };
                writeln!(out, "{pad}{results} = while{max}({args}) {{")?;
                write!(out, "{pad}  cond: ")?;
                cond.write_text(out, indent + 1)?;
                write!(out, "\n{pad}  body: ")?;
                body.write_text(out, indent + 1)?;
                writeln!(out, "\n{pad}}}")
            }
        }
    }
}

/// The print's format string, with `{}` where run-time values go.
fn print_template(pieces: &[PrintPiece]) -> String {
    pieces
        .iter()
        .map(|p| match p {
            PrintPiece::Text(t) => t.replace('{', "{{").replace('}', "}}"),
            PrintPiece::Value(..) => "{}".to_string(),
        })
        .collect()
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}
