//! The imported model: its nodes checked against the op table, its initializers as named
//! tensors, and the interpreter that runs the nodes through tensor-core's ops.

use super::super::proto::{dimension, type_proto, AttributeProto, GraphProto, ModelProto, ValueInfoProto};
use super::decode::{self, Source};
use super::ops::{self, Lookup, OpFn};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::function::{ConcreteFunction, Flattener, GraphArg};
use crate::shape::{Shape, UNKNOWN};
use crate::tensor::Tensor;
use prost::Message;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// A graph input the caller provides: its name, dtype and dims (`None`: a dynamic dim,
/// `dim_param` or unnamed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputInfo {
    /// The input's name in the model.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its dims; `None` where the model leaves the size open.
    pub dims: Vec<Option<usize>>,
    /// False when the model declares no shape (any rank): `dims` is then empty.
    pub ranked: bool,
}

/// One node, checked: its op's builder for the model's opset.
pub(crate) struct Node {
    /// The node's name, or `#k` (its position) when it has none.
    pub name: String,
    pub op: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Vec<AttributeProto>,
    build: OpFn,
}

/// An ONNX model imported into tensor-core ([`import`](super::import)): call it on tensors,
/// eagerly or inside a traced function; its initializers are its parameters.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let w = Tensor::randn(&[3, 2], DType::F32, 1);
/// let x = Tensor::randn(&[4, 3], DType::F32, 2);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.matmul(&w)?.sigmoid()?]))?;
/// let m = tensor_core::onnx::import_bytes(&tensor_core::onnx::to_bytes(&f)?)?;
/// m.trainable(true);
/// let loss = m.call(&[&x])?[0].sum()?;
/// loss.backward()?;
/// assert_eq!(m.parameters()[0].1.grad().unwrap().dims(), vec![3, 2]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone)]
pub struct OnnxModel {
    nodes: Arc<Vec<Node>>,
    inputs: Vec<InputInfo>,
    outputs: Vec<String>,
    initializers: Vec<(String, Tensor)>,
    opset: i64,
    ops: Vec<String>,
}

impl std::fmt::Debug for OnnxModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxModel")
            .field("opset", &self.opset)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .field("nodes", &self.nodes.len())
            .field("initializers", &self.initializers.len())
            .finish()
    }
}

fn bad_file(path: &str, reason: String) -> Error {
    Error::BadFile { path: path.to_string(), format: "ONNX", reason }
}

fn node_error(node: &str, op: &str, problem: impl Into<String>) -> Error {
    Error::OnnxImport { node: node.to_string(), op: op.to_string(), problem: problem.into() }
}

impl OnnxModel {
    /// Decodes and checks a model; `dir` is where external data lives.
    pub(crate) fn from_bytes(bytes: &[u8], path: &str, dir: Option<&Path>) -> Result<OnnxModel> {
        let model = ModelProto::decode(bytes).map_err(|e| bad_file(path, e.to_string()))?;
        let graph = model.graph.as_ref().ok_or_else(|| bad_file(path, "it has no graph".into()))?;
        // A model of other domains only (ai.onnx.ml, training) gets opset 0: its ops are
        // listed as unsupported.
        let opset = standard_opset(&model).unwrap_or(0);
        if !graph.sparse_initializer.is_empty() {
            return Err(Error::OnnxUnsupportedOps { ops: vec!["sparse initializers".into()] });
        }
        check_element_types(graph)?;
        let nodes = check_nodes(graph, opset)?;
        let initializers =
            graph.initializer.iter().map(|t| Ok((t.name.clone(), decode::tensor(t, &Source { what: &t.name, dir })?))).collect::<Result<Vec<_>>>()?;
        let inits: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
        let inputs = graph.input.iter().filter(|i| !inits.contains(i.name.as_str())).map(input_info).collect::<Result<Vec<_>>>()?;
        check_initializer_types(graph, &initializers)?;
        for o in &graph.output {
            input_info(o).map_err(|e| match e {
                Error::OnnxDType { dtype, .. } => Error::OnnxDType { what: format!("output `{}`", o.name), dtype },
                e => e,
            })?;
        }
        let outputs: Vec<String> = graph.output.iter().map(|o| o.name.clone()).collect();
        let ops = nodes.iter().map(|n| n.op.clone()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        check_names(&nodes, &inputs, &initializers, &outputs)?;
        Ok(OnnxModel { nodes: Arc::new(nodes), inputs, outputs, initializers, opset, ops })
    }

    /// The inputs a call takes, in order (initializers listed as graph inputs are left out).
    pub fn inputs(&self) -> &[InputInfo] {
        &self.inputs
    }

    /// The names of the outputs a call returns, in order.
    pub fn output_names(&self) -> &[String] {
        &self.outputs
    }

    /// The ops the model's nodes use, sorted, each once.
    pub fn ops(&self) -> &[String] {
        &self.ops
    }

    /// The names of the inputs some node reads as values when the model runs (Resize's
    /// `scales`, `sizes` and `roi`, say): inside a trace they must be constants, not traced
    /// arguments (a float one included), or that node's `Err` says so.
    pub fn value_inputs(&self) -> Vec<&str> {
        let read = |name: &str| self.nodes.iter().any(|n| n.inputs.iter().enumerate().any(|(i, input)| input == name && ops::reads_value(&n.op, i)));
        self.inputs.iter().map(|i| i.name.as_str()).filter(|name| read(name)).collect()
    }

    /// The opset of the standard domain the model imports.
    pub fn opset(&self) -> i64 {
        self.opset
    }

    /// The inputs' shapes, a dynamic dim [`UNKNOWN`]: what [`trace`](Self::trace) traces for.
    pub fn input_shapes(&self) -> Vec<Shape> {
        let shape = |i: &InputInfo| match i.ranked {
            true => Shape::from(i.dims.iter().map(|d| d.unwrap_or(UNKNOWN)).collect::<Vec<_>>()),
            false => Shape::unknown_rank(),
        };
        self.inputs.iter().map(shape).collect()
    }

    /// The initializers, by name: the model's weights (and constants), the same tensors
    /// each call reads, so an update to one changes what the model computes.
    pub fn parameters(&self) -> Vec<(String, Tensor)> {
        self.initializers.clone()
    }

    /// Makes the float initializers require grad (`true`) or not: a loss computed from the
    /// outputs then back-propagates into them, eagerly and in traced graphs.
    pub fn trainable(&self, on: bool) {
        for (_, t) in &self.initializers {
            if t.dtype().is_float() {
                // A leaf made here: requires_grad_ cannot fail on it.
                let _ = t.requires_grad_(on);
            }
        }
    }

    /// Runs the model on `inputs` (in the order of [`inputs`](Self::inputs)), node by node
    /// through tensor-core's ops: eagerly, or into the graph being traced.
    pub fn call(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.check_inputs(inputs)?;
        let mut env = Env::default();
        for (name, t) in &self.initializers {
            env.set(name, t.clone(), t.dtype().is_float());
        }
        for (info, t) in self.inputs.iter().zip(inputs) {
            env.set(&info.name, (*t).clone(), t.is_symbolic());
        }
        for node in self.nodes.iter() {
            env.run(node)?;
        }
        self.outputs.iter().map(|name| env.get(name).ok_or_else(|| node_error(name, "output", "no node makes this graph output"))).collect()
    }

    /// Traces the model into a concrete function for its input shapes, dynamic dims unknown
    /// (relaxed: one graph serves every size of them).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// use tensor_core::shape::UNKNOWN;
    /// let x = Tensor::ones(&[2, 3], DType::F32);
    /// let f = ConcreteFunction::trace_with_shapes("f", &[("x", &x)], &[Shape::new(&[UNKNOWN, 3])], true, || Ok(vec![x.exp()?]))?;
    /// let m = tensor_core::onnx::import_bytes(&tensor_core::onnx::to_bytes(&f)?)?;
    /// assert_eq!(m.inputs()[0].dims, vec![None, Some(3)]); // dim_param d0
    /// let g = m.trace("model")?;
    /// assert_eq!(g.call(&[&Tensor::ones(&[5, 3], DType::F32)])?[0].dims(), vec![5, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn trace(&self, name: &str) -> Result<ConcreteFunction> {
        let examples: Vec<Tensor> =
            self.inputs.iter().map(|i| Tensor::zeros(&i.dims.iter().map(|d| d.unwrap_or(1)).collect::<Vec<_>>(), i.dtype)).collect();
        let args: Vec<(&str, &Tensor)> = self.inputs.iter().zip(&examples).map(|(i, t)| (i.name.as_str(), t)).collect();
        let refs: Vec<&Tensor> = examples.iter().collect();
        ConcreteFunction::trace_with_shapes(name, &args, &self.input_shapes(), true, || self.call(&refs))
    }

    fn check_inputs(&self, inputs: &[&Tensor]) -> Result<()> {
        if inputs.len() != self.inputs.len() {
            let names: Vec<&str> = self.inputs.iter().map(|i| i.name.as_str()).collect();
            let problem = format!("the model takes {} inputs ({}), the call gave {}", names.len(), names.join(", "), inputs.len());
            return Err(node_error("call", "inputs", problem));
        }
        for (info, t) in self.inputs.iter().zip(inputs) {
            let dims = t.raw_shape().dims().to_vec();
            let fits =
                !info.ranked || dims.len() == info.dims.len() && dims.iter().zip(&info.dims).all(|(&d, &e)| d == UNKNOWN || e.is_none_or(|e| e == d));
            if t.dtype() != info.dtype || !fits {
                let problem = format!("input `{}` is {} {:?}, the model declares {} {:?}", info.name, t.dtype(), dims, info.dtype, info.dims);
                return Err(node_error("call", "inputs", problem));
            }
        }
        Ok(())
    }
}

/// The model's parameters are its tensor leaves (as a struct of tensors would be), so a
/// `#[graph_fn]` taking the model reads them as arguments.
impl GraphArg for OnnxModel {
    fn flatten(&self, f: &mut Flattener) {
        let tensors: Vec<Tensor> = self.initializers.iter().map(|(_, t)| t.clone()).collect();
        tensors.flatten(f);
    }
}

/// The version of the standard domain the model imports.
fn standard_opset(model: &ModelProto) -> Option<i64> {
    model.opset_import.iter().find(|o| o.domain.is_empty() || o.domain == "ai.onnx").map(|o| o.version)
}

/// Every element type the model declares (its inputs, outputs, intermediate values,
/// initializers and `Constant` nodes' values) is one tensor-core has. It runs before the ops
/// are looked up: a model that needs a dtype tensor-core lacks says so (`OnnxDType`, which
/// the conformance runner counts as a skip) even when it also uses an unmapped op.
fn check_element_types(graph: &GraphProto) -> Result<()> {
    let declared = graph.input.iter().map(|v| ("input", v)).chain(graph.output.iter().map(|v| ("output", v)));
    for (kind, v) in declared.chain(graph.value_info.iter().map(|v| ("value", v))) {
        let what = || format!("{kind} `{}`", v.name);
        match v.r#type.as_ref().map(|t| t.value.as_ref()) {
            Some(None) => return Err(Error::OnnxDType { what: what(), dtype: "a sequence, map or optional (no tensor)".into() }),
            // 0 is UNDEFINED: the model leaves the type to inference, nothing to check.
            Some(Some(type_proto::Value::TensorType(t))) if t.elem_type != 0 => {
                decode::dtype(t.elem_type, what)?;
            }
            _ => {}
        }
    }
    for t in &graph.initializer {
        decode::dtype(t.data_type, || format!("initializer `{}`", t.name))?;
    }
    let constants = graph.node.iter().filter(|n| n.op_type == "Constant" && n.domain.is_empty());
    for (n, t) in constants.flat_map(|n| n.attribute.iter().filter_map(move |a| a.t.as_ref().map(|t| (n, t)))) {
        decode::dtype(t.data_type, || format!("the value of Constant `{}`", n.output.first().map_or("", String::as_str)))?;
    }
    Ok(())
}

/// Each node with its builder; every op without a mapping at once, then the first node
/// whose op its opset lacks.
fn check_nodes(graph: &GraphProto, opset: i64) -> Result<Vec<Node>> {
    let mut unsupported: BTreeMap<String, usize> = BTreeMap::new();
    let mut nodes = Vec::new();
    let mut outside = None;
    for (k, n) in graph.node.iter().enumerate() {
        let name = if n.name.is_empty() { format!("#{k}") } else { n.name.clone() };
        let standard = n.domain.is_empty() || n.domain == "ai.onnx";
        let op = if standard { n.op_type.clone() } else { format!("{}.{}", n.domain, n.op_type) };
        match ops::lookup(&n.op_type, opset) {
            Lookup::Found(build) if standard => {
                nodes.push(Node { name, op, inputs: n.input.clone(), outputs: n.output.clone(), attrs: n.attribute.clone(), build })
            }
            Lookup::NotInOpset(since) if standard => {
                outside
                    .get_or_insert_with(|| node_error(&name, &op, format!("{op} is not in opset {opset} (it is an operator since opset {since})")));
            }
            _ => *unsupported.entry(op).or_default() += 1,
        }
    }
    if !unsupported.is_empty() {
        let ops = unsupported.into_iter().map(|(op, n)| if n == 1 { op } else { format!("{op} ({n} nodes)") }).collect();
        return Err(Error::OnnxUnsupportedOps { ops });
    }
    outside.map_or(Ok(nodes), Err)
}

/// A graph input as the caller gives it.
fn input_info(v: &ValueInfoProto) -> Result<InputInfo> {
    let what = || format!("input `{}`", v.name);
    let tensor = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => t,
        None => return Err(Error::OnnxDType { what: what(), dtype: "a sequence, map or optional (no tensor)".into() }),
    };
    let dtype = decode::dtype(tensor.elem_type, what)?;
    let dim = |d: &super::super::proto::Dimension| match d.value {
        Some(dimension::Value::DimValue(v)) => usize::try_from(v).ok(),
        _ => None,
    };
    let dims = tensor.shape.as_ref().map_or_else(Vec::new, |s| s.dim.iter().map(dim).collect());
    Ok(InputInfo { name: v.name.clone(), dtype, dims, ranked: tensor.shape.is_some() })
}

/// An initializer also listed as a graph input (a default the caller could override) must
/// have the type declared there.
fn check_initializer_types(graph: &GraphProto, initializers: &[(String, Tensor)]) -> Result<()> {
    for v in &graph.input {
        let Some((_, t)) = initializers.iter().find(|(n, _)| *n == v.name) else { continue };
        let Ok(info) = input_info(v) else { continue };
        let dims = t.raw_shape().dims().to_vec();
        let fits = !info.ranked || (info.dims.len() == dims.len() && info.dims.iter().zip(&dims).all(|(e, &d)| e.is_none_or(|e| e == d)));
        if info.dtype != t.dtype() || !fits {
            let problem = format!("the initializer is {} {dims:?}, its graph input declares {} {:?}", t.dtype(), info.dtype, info.dims);
            return Err(node_error(&v.name, "initializer", problem));
        }
    }
    Ok(())
}

/// Every name a node reads is made before it (a graph input, an initializer, an earlier
/// node's output), as is every graph output.
fn check_names(nodes: &[Node], inputs: &[InputInfo], initializers: &[(String, Tensor)], outputs: &[String]) -> Result<()> {
    let mut known: HashSet<&str> = inputs.iter().map(|i| i.name.as_str()).chain(initializers.iter().map(|(n, _)| n.as_str())).collect();
    for node in nodes {
        if let Some(missing) = node.inputs.iter().find(|i| !i.is_empty() && !known.contains(i.as_str())) {
            let problem = format!("input `{missing}` is made by no earlier node, initializer or graph input");
            return Err(node_error(&node.name, &node.op, problem));
        }
        known.extend(node.outputs.iter().map(String::as_str));
    }
    match outputs.iter().find(|o| !known.contains(o.as_str())) {
        Some(o) => Err(node_error(o, "output", "no node, initializer or graph input makes this graph output")),
        None => Ok(()),
    }
}

/// The values of one call, by name, and which are dynamic: computed from a traced model
/// input or from a float initializer (a parameter, which a trace reads at run time). A node
/// whose inputs are all static runs eagerly even inside a trace: shape arithmetic, whose
/// results ops need as Rust values.
#[derive(Default)]
struct Env {
    values: HashMap<String, Tensor>,
    dynamic: HashSet<String>,
}

impl Env {
    fn set(&mut self, name: &str, t: Tensor, dynamic: bool) {
        if dynamic {
            self.dynamic.insert(name.to_string());
        } else {
            self.dynamic.remove(name);
        }
        self.values.insert(name.to_string(), t);
    }

    fn get(&self, name: &str) -> Option<Tensor> {
        self.values.get(name).cloned()
    }

    fn run(&mut self, node: &Node) -> Result<()> {
        let inputs: Vec<Option<Tensor>> = node.inputs.iter().map(|n| if n.is_empty() { None } else { self.get(n) }).collect();
        // Shape and Size read only dims, which a trace knows: their results are static.
        let reads_dims = matches!(node.op.as_str(), "Shape" | "Size");
        let dynamic = !reads_dims && node.inputs.iter().any(|n| self.dynamic.contains(n));
        let build = || {
            let ctx = ops::Ctx { node, inputs: &inputs };
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (node.build)(&ctx)))
                .unwrap_or_else(|_| Err(node_error(&node.name, &node.op, "tensor-core panicked on it (a bug: please report it)")))
        };
        let outs = if dynamic { build() } else { crate::tensor::context::eagerly(build) };
        let outs = outs.map_err(|e| in_node(e, node))?;
        for (name, t) in node.outputs.iter().zip(outs) {
            if !name.is_empty() {
                self.set(name, t, dynamic);
            }
        }
        Ok(())
    }
}

/// An error from an op run for `node`, as one that names the node and its op.
fn in_node(e: Error, node: &Node) -> Error {
    match e {
        e @ (Error::OnnxImport { .. } | Error::OnnxDType { .. } | Error::OnnxUnsupportedOps { .. }) => e,
        e => node_error(&node.name, &node.op, e.to_string()),
    }
}
