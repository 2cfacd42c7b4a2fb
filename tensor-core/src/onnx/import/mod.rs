//! ONNX import: a model file as an [`OnnxModel`] that runs through tensor-core's own ops, so
//! it runs eagerly op by op, traces into a graph inside a `#[graph_fn]` (cached, optimized and
//! fused like any Rust code), and differentiates.
//!
//! - [`import`] reads a file (initializers stored outside it, `external_data`, are read
//!   relative to its folder); [`import_bytes`] reads bytes.
//! - Initializers become named tensors ([`OnnxModel::parameters`]); the float ones require
//!   grad after [`OnnxModel::trainable`]`(true)`, so a loss's `backward()` reaches them.
//! - Opsets 7 to 28 of the standard domain map (`ops.rs`: one table row per op and opset
//!   range); a dynamic dim (`dim_param`) is an unknown dim of [`OnnxModel::input_shapes`],
//!   which [`OnnxModel::trace`] traces relaxed, for every size.
//! - Inputs that tensor-core needs as Rust values (a Reshape's shape, axes, pads) are read
//!   when the model runs: from initializers, `Constant` nodes, model inputs given concrete
//!   values, and `Shape`-derived arithmetic, which a trace evaluates at trace time (so the
//!   graph holds its result as a constant).
//! - A bad file is an `Err`, never a panic: a truncated or mangled file is `BadFile`; a
//!   dangling input name, a bad attribute, an op its opset lacks or an initializer that does
//!   not fit an op is `OnnxImport` naming the node and op; ops without a mapping are one
//!   `OnnxUnsupportedOps` listing them all; element types tensor-core lacks are `OnnxDType`.
//!
//! ```
//! use tensor_core::prelude::*;
//! use tensor_core::function::ConcreteFunction;
//! let (w, x) = (Tensor::randn(&[4, 3], DType::F32, 0), Tensor::ones(&[2, 4], DType::F32));
//! let f = ConcreteFunction::trace("dense", &[("x", &x)], || Ok(vec![x.matmul(&w)?.relu()?]))?;
//! let m = tensor_core::onnx::import_bytes(&tensor_core::onnx::to_bytes(&f)?)?;
//! assert_eq!(m.call(&[&x])?[0].to_vec::<f32>()?, x.matmul(&w)?.relu()?.to_vec::<f32>()?);
//! assert_eq!(m.parameters().len(), 1); // w, an initializer
//! # Ok::<(), tensor_core::Error>(())
//! ```

mod decode;
mod model;
mod ops;

pub use model::{InputInfo, OnnxModel};
pub use ops::supported_ops;

use super::proto::TensorProto;
use crate::error::{Error, Result};
use crate::io::path_text;
use crate::tensor::Tensor;
use prost::Message;
use std::path::Path;

/// Reads the ONNX model at `path`. See the [module docs](crate::onnx).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[3], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.tanh()?]))?;
/// let path = std::env::temp_dir().join(format!("import-doc-{}.onnx", std::process::id()));
/// tensor_core::onnx::export(&f, &path)?;
/// let m = tensor_core::onnx::import(&path)?;
/// assert_eq!(m.call(&[&x])?[0].to_vec::<f32>()?, x.tanh()?.to_vec::<f32>()?);
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn import(path: impl AsRef<Path>) -> Result<OnnxModel> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path_text(path), action: "read", reason: e.to_string() })?;
    OnnxModel::from_bytes(&bytes, &path_text(path), path.parent())
}

/// Reads an ONNX model from its bytes (initializers stored in other files cannot be read:
/// use [`import`]).
///
/// ```
/// let e = tensor_core::onnx::import_bytes(b"\x0a\xff not protobuf").unwrap_err();
/// assert!(e.to_string().contains("not a valid ONNX file"), "{e}");
/// ```
pub fn import_bytes(bytes: &[u8]) -> Result<OnnxModel> {
    OnnxModel::from_bytes(bytes, "<bytes>", None)
}

/// Reads a serialized ONNX `TensorProto` (the `.pb` files of ONNX's backend tests): its
/// name and value.
///
/// ```
/// // dims [2], FLOAT, raw_data 1.0f32 2.0f32, name "x"
/// let mut pb = vec![0x08, 0x02, 0x10, 0x01, 0x42, 0x01, b'x', 0x4a, 0x08];
/// pb.extend([1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()));
/// let (name, t) = tensor_core::onnx::read_tensor_bytes(&pb)?;
/// assert_eq!((name.as_str(), t.to_vec::<f32>()?), ("x", vec![1.0, 2.0]));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn read_tensor_bytes(bytes: &[u8]) -> Result<(String, Tensor)> {
    let t = TensorProto::decode(bytes).map_err(|e| Error::BadFile { path: "<bytes>".into(), format: "ONNX tensor", reason: e.to_string() })?;
    let value = decode::tensor(&t, &decode::Source { what: &t.name, dir: None })?;
    Ok((t.name, value))
}

/// [`read_tensor_bytes`] of the file at `path`.
///
/// ```
/// let e = tensor_core::onnx::read_tensor("/no/such/input_0.pb").unwrap_err();
/// assert!(e.to_string().contains("cannot read"), "{e}");
/// ```
pub fn read_tensor(path: impl AsRef<Path>) -> Result<(String, Tensor)> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path_text(path), action: "read", reason: e.to_string() })?;
    read_tensor_bytes(&bytes).map_err(|e| match e {
        Error::BadFile { format, reason, .. } => Error::BadFile { path: path_text(path), format, reason },
        e => e,
    })
}
