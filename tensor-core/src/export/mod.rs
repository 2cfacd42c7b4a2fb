//! Exported graphs: a concrete function — its optimized graph, its input signature, its
//! constants and the tensors it captured — in one file, and [`load`], which gives back a
//! [`LoadedFunction`] that runs it, bit for bit as the original, in a program that does not
//! contain the code that traced it.
//!
//! ```
//! use tensor_core::prelude::*;
//!
//! #[derive(GraphArg)]
//! struct Model {
//!     w: Tensor,
//!     b: Tensor,
//! }
//! impl Model {
//!     #[graph_fn]
//!     fn predict(&self, x: &Tensor) -> Result<Tensor> {
//!         x.matmul(&self.w)?.add(&self.b)?.relu()
//!     }
//! }
//! let model = Model { w: Tensor::randn(&[4, 3], DType::F32, 0), b: Tensor::randn(&[3], DType::F32, 1) };
//! let x = Tensor::randn(&[2, 4], DType::F32, 2);
//! let y = model.predict(&x)?;
//!
//! let path = std::env::temp_dir().join(format!("export-doc-{}.tcg", std::process::id()));
//! let predict = tensor_core::function::lookup("Model::predict").unwrap();
//! predict.concrete_functions()[0].export(&path)?;
//!
//! // Elsewhere: no `Model`, only the file.
//! let f = tensor_core::export::load(&path)?;
//! let names: Vec<&str> = f.args().iter().map(|a| a.name.as_str()).collect();
//! assert_eq!(names, ["self.w", "self.b", "x"]);
//! let out = f.call(&[&model.w, &model.b, &x])?;
//! assert!(out[0].bit_eq(&y)?); // the same bits
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! Training steps keep their semantics: in-place updates and `.grad`s of the arguments are
//! applied to the caller's tensors after each call, and captured state (an optimizer's
//! moments) lives on in the loaded function. `cond`/`while_loop`, `tprint!` and fused
//! programs survive the round trip. A file that does not check — truncated, changed since it
//! was written, of a newer version, with a graph whose nodes do not type-check — is an
//! `Err` saying why; so is a call whose arguments do not match the signature.
//!
//! The format (`docs/EXPORT.md`): a 40-byte header (magic, [`VERSION`], section lengths
//! and CRC-32s), the graph as JSON (ops by name with their attributes, values with dtypes
//! and shapes), and the tensors as a safetensors file.

mod check;
mod format;
mod loaded;
mod ops_wire;
mod wire;

pub use format::VERSION;
pub use loaded::{ArgSpec, LoadedFunction};

use crate::error::{Error, Result};
use crate::function::ConcreteFunction;
use crate::graph::{Graph, InputSource};
use crate::io::path_text;
use crate::tensor::Tensor;
use format::OpenError;
use std::collections::HashMap;
use std::path::Path;
use wire::{ArgDef, CaptureDef, FileDef, GraphDef, GraphReader, GuardDef, TensorSink};

/// Loads a function exported by [`ConcreteFunction::export`]: reads and checks the file,
/// rebuilds and validates its graph and compiles it. See the [module docs](self).
///
/// ```
/// use tensor_core::prelude::*;
/// let path = std::env::temp_dir().join(format!("load-missing-{}.tcg", std::process::id()));
/// let err = tensor_core::export::load(&path).unwrap_err();
/// assert!(err.to_string().contains("cannot read"), "{err}");
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn load(path: impl AsRef<Path>) -> Result<LoadedFunction> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path_text(path), action: "read", reason: e.to_string() })?;
    decode(&bytes, &path_text(path))
}

/// [`load`] from the bytes of an exported file (as [`ConcreteFunction::export_bytes`]
/// gives them).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.add(1.0)?]))?;
/// let mut bytes = f.export_bytes()?;
/// assert!(tensor_core::export::load_bytes(&bytes).is_ok());
/// bytes.truncate(bytes.len() - 1);
/// let err = tensor_core::export::load_bytes(&bytes).unwrap_err();
/// assert!(err.to_string().contains("truncated"), "{err}");
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn load_bytes(bytes: &[u8]) -> Result<LoadedFunction> {
    decode(bytes, "(bytes)")
}

impl ConcreteFunction {
    /// Writes this function to `path` (replaced whole: written beside it, then renamed): the
    /// graph that runs, its signature, its constants and its captured tensors. What is
    /// written is checked to load before the file is written.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[3], DType::F32);
    /// let f = ConcreteFunction::trace("softplus", &[("x", &x)], || Ok(vec![x.exp()?.add(1.0)?.log()?]))?;
    /// let path = std::env::temp_dir().join(format!("softplus-{}.tcg", std::process::id()));
    /// f.export(&path)?;
    /// let loaded = tensor_core::export::load(&path)?;
    /// assert_eq!(loaded.call(&[&x])?[0].to_vec::<f32>()?, f.call(&[&x])?[0].to_vec::<f32>()?);
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn export(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let bytes = self.export_bytes()?;
        write_whole(path, &bytes).map_err(|e| Error::Io { path: path_text(path), action: "write", reason: e.to_string() })
    }

    /// The bytes [`export`](Self::export) writes.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[3], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.neg()?]))?;
    /// assert!(f.export_bytes()?.starts_with(b"TCGRAPH\0"));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn export_bytes(&self) -> Result<Vec<u8>> {
        let mut sink = TensorSink::default();
        // The subgraphs optimized as the executor optimizes them when it plans their node, so the
        // file holds what runs, and loading runs it without optimizing again.
        let graph = if self.is_optimized() { crate::compile::optimize_subgraphs(self.graph()) } else { self.graph().clone() };
        let mut captures = Vec::new();
        for (i, t) in self.captures().iter().enumerate() {
            let name = format!("capture.{i}");
            sink.tensors.push((name.clone(), t.detach()));
            let grad = t.grad().map(|g| {
                let key = format!("{name}.grad");
                sink.tensors.push((key.clone(), g.detach()));
                key
            });
            captures.push(CaptureDef {
                name: graph.slot_names[graph.num_arg_slots + i].clone(),
                tensor: name,
                grad,
                requires_grad: t.requires_grad(),
            });
        }
        let file = FileDef {
            name: self.name().to_string(),
            producer: format!("tensor-core {}", env!("CARGO_PKG_VERSION")),
            args: arg_defs(self.traced_graph()),
            captures,
            grad_guards: self.grad_guards().iter().map(|&(slot, present)| GuardDef { slot, present }).collect(),
            graph: GraphDef::from_graph(&graph, &mut sink),
            dim_guards: self.dim_guards().cloned(),
        };
        let json = serde_json::to_vec_pretty(&file).map_err(|e| Error::invalid("export", "self", e.to_string()))?;
        let views = crate::io::views_of(&sink.tensors)?;
        let tensors =
            safetensors::serialize(views.iter().map(|(n, v)| (n.as_str(), v)), None).map_err(|e| Error::invalid("export", "self", e.to_string()))?;
        let bytes = format::seal(&json, &tensors);
        // What is written must load: a graph this build cannot read back is an error now.
        decode(&bytes, "(export)").map_err(|e| Error::invalid("export", "self", format!("the exported graph does not load back: {e}")))?;
        Ok(bytes)
    }
}

/// The arguments of a traced graph: each argument slot's name and the type of the input
/// that reads it.
fn arg_defs(traced: &Graph) -> Vec<ArgDef> {
    (0..traced.num_arg_slots)
        .map(|slot| {
            let v =
                traced.inputs.iter().find(|(_, src)| *src == InputSource::Data(slot)).map(|(v, _)| *v).expect("a traced graph reads each argument");
            let info = &traced.values[v];
            ArgDef { name: traced.slot_names[slot].clone(), dtype: ops_wire::WireDType(info.dtype), shape: ops_wire::WireShape(info.shape.clone()) }
        })
        .collect()
}

/// Writes `bytes` to a file beside `path`, then renames it over `path`.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| drop(std::fs::remove_file(&tmp)))
}

/// A loaded function from a file's bytes; errors name `path`.
fn decode(bytes: &[u8], path: &str) -> Result<LoadedFunction> {
    let bad = |reason: String| Error::BadFile { path: path.to_string(), format: "tensor-core graph", reason };
    let (graph_bytes, tensor_bytes) = format::open(bytes).map_err(|e| match e {
        OpenError::Newer(found) => Error::FileVersion { path: path.to_string(), format: "tensor-core graph", found, supported: VERSION },
        OpenError::Bad(reason) => bad(reason),
    })?;
    let file: FileDef = serde_json::from_slice(graph_bytes).map_err(|e| bad(format!("its graph section is not the expected JSON: {e}")))?;
    let tensors: HashMap<String, Tensor> =
        crate::io::read_safetensors(tensor_bytes).map_err(|e| bad(format!("its tensor section: {e}")))?.into_iter().collect();
    let args: Vec<ArgSpec> = file.args.into_iter().map(|a| ArgSpec { name: a.name, dtype: a.dtype.0, shape: a.shape.0 }).collect();
    let captures = file.captures.into_iter().map(|c| capture(c, &tensors)).collect::<std::result::Result<Vec<_>, String>>().map_err(bad)?;
    let guards: Vec<(usize, bool)> = file.grad_guards.iter().map(|g| (g.slot, g.present)).collect();
    let graph = GraphReader { tensors: &tensors }.graph(file.graph, 0).map_err(|e| bad(format!("its graph: {e}")))?;
    crate::graph::validate(&graph).map_err(|e| bad(format!("its graph does not check: {e}")))?;
    let slots: loaded::SlotTypes =
        args.iter().map(|a| (a.dtype, a.shape.clone())).chain(captures.iter().map(|(_, t)| (t.dtype(), t.0.shape.clone()))).collect();
    loaded::check_slots(&graph, &slots, args.len(), &guards).map_err(|e| bad(format!("its graph: {e}")))?;
    if let Some(g) = &file.dim_guards {
        g.check(args.len()).map_err(|e| bad(format!("its guards: {e}")))?;
    }
    Ok(LoadedFunction::new(file.name, args, captures, guards, file.dim_guards, &graph))
}

/// A captured tensor of the file: its value (and `.grad`) from the tensor section.
fn capture(c: CaptureDef, tensors: &HashMap<String, Tensor>) -> std::result::Result<(String, Tensor), String> {
    let get = |key: &str| tensors.get(key).cloned().ok_or_else(|| format!("the captured tensor `{key}` is not in the tensor section"));
    let t = get(&c.tensor)?;
    if let Some(key) = &c.grad {
        let g = get(key)?;
        if g.dtype() != t.dtype() || g.0.shape != t.0.shape {
            return Err(format!("the .grad `{key}` is {}{}, its tensor {}{}", g.dtype(), g.0.shape, t.dtype(), t.0.shape));
        }
        t.set_grad_raw(Some(g));
    }
    let t = if c.requires_grad { t.requires_grad_(true).map_err(|e| e.to_string())? } else { t };
    Ok((c.name, t))
}
