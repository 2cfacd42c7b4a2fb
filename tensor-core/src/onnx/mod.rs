//! ONNX export of inference graphs (opset 17), for runtimes such as ONNX Runtime or tract.
//!
//! [`export`] writes a concrete function as an ONNX model: its tensor arguments become the
//! model's inputs (named as traced), the tensors it captured and its constants become
//! initializers (their current values), and its outputs `output_0`, `output_1`, ... The
//! graph exported is the traced one after the cleanup passes (simplification, constant
//! folding, common subexpressions, dead code), so every node is one of the ops below:
//!
//! | ops | ONNX |
//! |---|---|
//! | elementwise (`neg` ... `not`, `add` ... `minimum`, comparisons, `where`, `clamp`, `cast`) | `Neg` ... `Not`, `Add` ... `Max`/`Min`, `Equal`/`Less`/..., `Where`, `Clip`, `Cast` |
//! | `sum`, `mean`, `max`, `min` over axes, `argmax` | `ReduceSum`, `ReduceMean`, `ReduceMax`, `ReduceMin`, `ArgMax` |
//! | `reshape`, `permute`, `broadcast_to`, `concat`, `narrow`, `pad` | `Reshape`, `Transpose`, `Expand`, `Concat`, `Slice`, `Pad` |
//! | `matmul`, `conv2d`, `max_pool2d`, `conv2d_input_grad` (`conv_transpose2d`) | `MatMul`, `Conv`, `MaxPool`, `ConvTranspose` |
//! | `softmax`, `log_softmax`, `cross_entropy` | `Softmax`, `LogSoftmax`, and `LogSoftmax` + `GatherElements` + `ReduceMean` + `Neg` |
//! | `index_select`, `gather`, `one_hot`, `topk` | `Gather`, `GatherElements`, `OneHot`, `TopK` (its indices output) |
//!
//! The ops composed from others export as what they are made of: `batch_norm` and
//! `group_norm` as `Sub`/`Div`/`Sqrt`/`Mul`/`Add` over the (running or batch) statistics,
//! `avg_pool2d` as a `Conv` with a window of ones and a `Div`, `adaptive_avg_pool2d` and
//! `global_avg_pool` as `ReduceMean` (or `Slice` + `ReduceSum` + `Concat` + `Div`), grouped
//! and 1-d convolutions as one `Conv` per group (with `Split`-like `Slice`s and a `Concat`),
//! `cumsum` as shifted `Add`s, `relu6`/`hardtanh` as `Clip`.
//!
//! Training graphs do not map: a gradient op (`conv2d_weight_grad`, `max_pool2d_grad`,
//! `scatter_add`, ...), a write to a tensor's data or `.grad`, control flow and `tprint!` are
//! each an `Err` naming what has no ONNX mapping.
//!
//! ```
//! use tensor_core::prelude::*;
//! use tensor_core::function::ConcreteFunction;
//! let (w, b) = (Tensor::randn(&[4, 3], DType::F32, 0), Tensor::zeros(&[3], DType::F32));
//! let x = Tensor::ones(&[1, 4], DType::F32);
//! let f = ConcreteFunction::trace("dense", &[("x", &x)], || Ok(vec![x.matmul(&w)?.add(&b)?.softmax(1)?]))?;
//! let path = std::env::temp_dir().join(format!("dense-{}.onnx", std::process::id()));
//! tensor_core::onnx::export(&f, &path)?; // x is the input; w and b are initializers
//! assert!(std::fs::metadata(&path)?.len() > 0);
//!
//! let g = ConcreteFunction::trace("step", &[("x", &x)], || {
//!     x.add_(1.0)?; // an in-place update of the input
//!     Ok(vec![])
//! })?;
//! assert!(tensor_core::onnx::export(&g, &path).unwrap_err().to_string().contains("no ONNX mapping"));
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod builder;
mod dims;
mod import;
mod ops;
mod proto;

pub use import::{import, import_bytes, read_tensor, read_tensor_bytes, supported_ops, InputInfo, OnnxModel};

use crate::error::{Error, Result};
use crate::function::ConcreteFunction;
use crate::graph::{Graph, InputSource, NodeKind, StateWrite};
use crate::io::path_text;
use crate::shape::UNKNOWN;
use builder::{elem_type, Builder};
use dims::DimNames;
use prost::Message;
use proto::{
    dimension, type_proto, Dimension, GraphProto, ModelProto, OperatorSetIdProto, TensorShapeProto, TensorTypeProto, TypeProto, ValueInfoProto,
};
use std::path::Path;

/// The ONNX opset the export targets.
pub const OPSET: i64 = 17;

/// The ONNX IR version of opset 17.
const IR_VERSION: i64 = 8;

/// Writes `f` as an ONNX model to `path`. See the [module docs](self) for what maps.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[1, 1, 8, 8], DType::F32);
/// let w = Tensor::randn(&[2, 1, 3, 3], DType::F32, 0);
/// let f = ConcreteFunction::trace("conv", &[("x", &x)], || Ok(vec![x.conv2d(&w, None, [1, 1], [1, 1])?.relu()?.max_pool2d([2, 2], [2, 2])?]))?;
/// let path = std::env::temp_dir().join(format!("conv-{}.onnx", std::process::id()));
/// tensor_core::onnx::export(&f, &path)?;
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn export(f: &ConcreteFunction, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let bytes = to_bytes(f)?;
    std::fs::write(path, bytes).map_err(|e| Error::Io { path: path_text(path), action: "write", reason: e.to_string() })
}

/// The bytes of the ONNX model [`export`] writes.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[3], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.tanh()?]))?;
/// assert!(!tensor_core::onnx::to_bytes(&f)?.is_empty());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn to_bytes(f: &ConcreteFunction) -> Result<Vec<u8>> {
    let g = crate::compile::cleanup(f.traced_graph());
    let model = ModelProto {
        ir_version: IR_VERSION,
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: OPSET }],
        producer_name: "tensor-core".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        doc_string: format!("{} exported by tensor-core", f.name()),
        graph: Some(graph_proto(&g, f)?),
    };
    Ok(model.encode_to_vec())
}

fn graph_proto(g: &Graph, f: &ConcreteFunction) -> Result<GraphProto> {
    if let Some(w) = g.writes.first() {
        let name = |slot: usize| g.slot_names.get(slot).cloned().unwrap_or_else(|| format!("argument {slot}"));
        return Err(Error::OnnxUnsupported {
            op: match w {
                StateWrite::Data { slot, .. } => format!("the in-place update of `{}`", name(*slot)),
                StateWrite::Grad { slot, .. } => format!("the write of `{}.grad`", name(*slot)),
            },
            detail: " (a write to a tensor's data or .grad: export an inference graph, without in-place updates or backward)".into(),
        });
    }
    let mut b = Builder::new(g);
    rename_outputs(&mut b);
    let dim_names = DimNames::new(g, f.dim_symbols());
    let mut inputs = Vec::new();
    for &(v, src) in &g.inputs {
        match src {
            InputSource::Data(slot) if slot < g.num_arg_slots => inputs.push(value_info(&b.name(v), g, v, &dim_names)),
            InputSource::Data(slot) => {
                let storage = f.captures()[slot - g.num_arg_slots].storage("onnx export")?;
                b.initializer(b.name(v), &storage);
            }
            InputSource::Grad(_) | InputSource::Param(_) => {
                return Err(Error::OnnxUnsupported { op: "a .grad input".into(), detail: " (export an inference graph, without backward)".into() });
            }
        }
    }
    for (v, storage) in &g.constants {
        b.initializer(b.name(*v), storage);
    }
    for node in &g.nodes {
        match &node.kind {
            NodeKind::Op(op) => ops::map_op(&mut b, op, &node.inputs, node.outputs[0])?,
            _ => {
                let op = node.kind_name().to_string();
                return Err(Error::OnnxUnsupported {
                    op,
                    detail: " (control flow, prints and gradient accumulation stay in tensor-core graphs)".into(),
                });
            }
        }
    }
    copy_outputs(&mut b);
    let outputs = g.outputs.iter().enumerate().map(|(k, &v)| value_info(&format!("output_{k}"), g, v, &dim_names)).collect();
    Ok(GraphProto { node: b.nodes, name: g.name.clone(), initializer: b.initializers, input: inputs, output: outputs, ..Default::default() })
}

/// Outputs are named `output_k`: the value a node makes is renamed so (before the nodes are
/// added); an input or a constant returned, or a value returned twice, is copied to its
/// name by an `Identity` node after them (`copy_outputs`).
fn rename_outputs(b: &mut Builder) {
    let g = b.g;
    let made_by_node = |v: usize| g.nodes.iter().any(|n| n.outputs.contains(&v));
    for (k, &v) in g.outputs.iter().enumerate() {
        if made_by_node(v) && g.outputs.iter().filter(|&&o| o == v).count() == 1 {
            b.names[v] = format!("output_{k}");
        }
    }
}

fn copy_outputs(b: &mut Builder) {
    for (k, &v) in b.g.outputs.iter().enumerate() {
        let name = format!("output_{k}");
        if b.names[v] != name {
            let source = b.name(v);
            b.node("Identity", vec![source], vec![name], vec![]);
        }
    }
}

/// A graph input's or output's name and type; a dim unknown in the trace is a `dim_param`
/// (`n0`, its symbol; see `dims.rs`), and an unknown rank is a tensor type without a shape.
fn value_info(name: &str, g: &Graph, v: usize, dim_names: &DimNames) -> ValueInfoProto {
    let info = &g.values[v];
    let dim = |(axis, &d): (usize, &usize)| Dimension {
        value: Some(match d {
            UNKNOWN => dimension::Value::DimParam(dim_names.name(v, axis, name)),
            d => dimension::Value::DimValue(d as i64),
        }),
    };
    let shape = (!info.shape.is_unknown_rank()).then(|| TensorShapeProto { dim: info.shape.dims().iter().enumerate().map(dim).collect() });
    let tensor = TensorTypeProto { elem_type: elem_type(info.dtype), shape };
    ValueInfoProto { name: name.to_string(), r#type: Some(TypeProto { value: Some(type_proto::Value::TensorType(tensor)) }) }
}
