//! Named tensors in a safetensors file. Files written here carry a CRC-32 of their contents
//! (names, dtypes, shapes and data) in the header's metadata, so a byte changed since the
//! write is an error on reading; files from elsewhere (PyTorch's, the hubs') have none and
//! are read as they are.

use super::bytes::{dtype_from_safetensors, from_le_bytes, safetensors_dtype, to_le_bytes};
use super::path_text;
use super::state_dict::{IncompatibleKeys, StateDict};
use crate::error::{Error, Result};
use crate::function::GraphArg;
use crate::tensor::Tensor;
use safetensors::{Dtype, SafeTensors, View};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

/// The metadata key of the checksum.
const CHECKSUM_KEY: &str = "tensor_core.crc32";

/// Saves `model`'s state dict (see [`StateDict`]) to a safetensors file at `path`
/// (replaced whole: written beside it, then renamed).
///
/// ```
/// use tensor_core::prelude::*;
/// #[derive(GraphArg)]
/// struct Model { w: Tensor, b: Tensor }
/// let model = Model { w: Tensor::randn(&[3, 2], DType::F32, 0), b: Tensor::zeros(&[2], DType::F32) };
/// let path = std::env::temp_dir().join(format!("save-doc-{}.safetensors", std::process::id()));
/// tensor_core::io::save_safetensors(&model, &path)?;
/// let named = tensor_core::io::load_tensors(&path)?;
/// assert_eq!(named.len(), 2);
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn save_safetensors<T: GraphArg + ?Sized>(model: &T, path: impl AsRef<Path>) -> Result<()> {
    save_tensors(path, &model.state_dict()?)
}

/// Loads a safetensors file into `model`, strictly: every tensor of the model must be in
/// the file, with its dtype and shape, and the file must hold no other. Missing and
/// unexpected names are an `Err` listing every one, another dtype or shape one naming the
/// first; after an `Err` the model is unchanged. See [`StateDict::load_state_dict`], and
/// [`load_safetensors_non_strict`] to load the names that match.
///
/// ```
/// use tensor_core::prelude::*;
/// #[derive(GraphArg)]
/// struct Model { w: Tensor }
/// let path = std::env::temp_dir().join(format!("load-doc-{}.safetensors", std::process::id()));
/// tensor_core::io::save_safetensors(&Model { w: Tensor::full(&[2], 3.0, DType::F32) }, &path)?;
/// let mut model = Model { w: Tensor::zeros(&[2], DType::F32) };
/// tensor_core::io::load_safetensors(&mut model, &path)?;
/// assert_eq!(model.w.to_vec::<f32>()?, vec![3.0, 3.0]);
/// let mut wrong = Model { w: Tensor::zeros(&[5], DType::F32) };
/// assert!(tensor_core::io::load_safetensors(&mut wrong, &path).is_err()); // [5] is not [2]
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn load_safetensors<T: GraphArg + ?Sized>(model: &mut T, path: impl AsRef<Path>) -> Result<()> {
    let named = load_tensors(path)?;
    model.load_state_dict(&named)
}

/// Loads the tensors of a safetensors file whose names are `model`'s and returns the names
/// that did not match (PyTorch's `strict=False`): the model's tensors missing from the file
/// keep their values, the file's other tensors are not loaded. A matched tensor of another
/// dtype or shape is still an `Err`, and nothing changes then. See
/// [`StateDict::load_state_dict_non_strict`].
///
/// ```
/// use tensor_core::prelude::*;
/// #[derive(GraphArg)]
/// struct Model { w: Tensor, b: Tensor }
/// let path = std::env::temp_dir().join(format!("non-strict-doc-{}.safetensors", std::process::id()));
/// tensor_core::io::save_tensors(&path, &[("w".to_string(), Tensor::full(&[2], 3.0, DType::F32))])?;
/// let mut model = Model { w: Tensor::zeros(&[2], DType::F32), b: Tensor::zeros(&[2], DType::F32) };
/// let keys = tensor_core::io::load_safetensors_non_strict(&mut model, &path)?;
/// assert_eq!((keys.missing, keys.unexpected.len()), (vec!["b".to_string()], 0));
/// assert_eq!(model.w.to_vec::<f32>()?, vec![3.0, 3.0]);
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn load_safetensors_non_strict<T: GraphArg + ?Sized>(model: &mut T, path: impl AsRef<Path>) -> Result<IncompatibleKeys> {
    let named = load_tensors(path)?;
    model.load_state_dict_non_strict(&named)
}

/// Writes named tensors to a safetensors file at `path` (replaced whole). Names must be
/// distinct; the tensors concrete (not values of a graph being traced).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::io::{load_tensors, save_tensors};
/// let path = std::env::temp_dir().join(format!("tensors-doc-{}.safetensors", std::process::id()));
/// save_tensors(&path, &[("epoch".to_string(), Tensor::scalar(3i64)), ("mask".to_string(), Tensor::from_vec(vec![true, false], &[2])?)])?;
/// let named = load_tensors(&path)?;
/// let epoch = named.iter().find(|(n, _)| n == "epoch").unwrap();
/// assert_eq!(epoch.1.item::<i64>()?, 3);
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn save_tensors(path: impl AsRef<Path>, named: &[(String, Tensor)]) -> Result<()> {
    let path = path.as_ref();
    let views = views_of(named)?;
    let metadata = HashMap::from([(CHECKSUM_KEY.to_string(), format!("{:08x}", checksum(views.iter().map(|(n, v)| (n.as_str(), v)))))]);
    safetensors::serialize_to_file(views.iter().map(|(n, v)| (n.as_str(), v)), Some(metadata), path).map_err(|e| Error::Io {
        path: path_text(path),
        action: "write",
        reason: e.to_string(),
    })
}

/// Reads every tensor of a safetensors file, in the order the file stores them. The file is
/// checked whole: its header, every tensor's dtype, shape and place, and the checksum of
/// files written by [`save_tensors`]; a file that does not check is an `Err` saying why.
///
/// ```
/// use tensor_core::prelude::*;
/// let path = std::env::temp_dir().join(format!("bad-doc-{}.safetensors", std::process::id()));
/// std::fs::write(&path, b"not a safetensors file")?;
/// let err = tensor_core::io::load_tensors(&path).unwrap_err();
/// assert!(err.to_string().contains("not a valid safetensors file"), "{err}");
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn load_tensors(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let buffer = std::fs::read(path).map_err(|e| Error::Io { path: path_text(path), action: "read", reason: e.to_string() })?;
    read_tensors(&buffer).map_err(|reason| Error::BadFile { path: path_text(path), format: "safetensors", reason })
}

/// The named tensors of a safetensors buffer; `Err` says what does not check.
pub(crate) fn read_tensors(buffer: &[u8]) -> std::result::Result<Vec<(String, Tensor)>, String> {
    let (_, metadata) = SafeTensors::read_metadata(buffer).map_err(|e| e.to_string())?;
    let file = SafeTensors::deserialize(buffer).map_err(|e| e.to_string())?;
    let mut named = Vec::with_capacity(file.len());
    for name in metadata.offset_keys() {
        let view = file.tensor(&name).map_err(|e| e.to_string())?;
        let dtype = dtype_from_safetensors(view.dtype()).ok_or_else(|| {
            format!("tensor `{name}` has dtype {:?}, which tensor-core does not hold (it has f32, f64, i32, i64 and bool)", view.dtype())
        })?;
        let tensor = from_le_bytes(dtype, view.shape(), view.data()).map_err(|e| format!("tensor `{name}`: {e}"))?;
        named.push((name, tensor));
    }
    if let Some(stored) = metadata.metadata().as_ref().and_then(|m| m.get(CHECKSUM_KEY)) {
        let views = views_of(&named).map_err(|e| e.to_string())?;
        let found = format!("{:08x}", checksum(views.iter().map(|(n, v)| (n.as_str(), v))));
        if *stored != found {
            return Err(format!("its checksum is {found}, not the {stored} it was written with: the file changed or was damaged since"));
        }
    }
    Ok(named)
}

/// One tensor's bytes, as safetensors writes them.
pub(crate) struct TensorBytes {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &TensorBytes {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// The tensors' bytes, checked: distinct names, concrete values.
pub(crate) fn views_of(named: &[(String, Tensor)]) -> Result<Vec<(String, TensorBytes)>> {
    let mut seen = std::collections::HashSet::new();
    named
        .iter()
        .map(|(name, t)| {
            if !seen.insert(name.as_str()) {
                return Err(Error::invalid("save_tensors", "named", format!("the name `{name}` is given twice; names must be distinct")));
            }
            let s = t.storage("save_tensors")?;
            Ok((name.clone(), TensorBytes { dtype: safetensors_dtype(s.dtype()), shape: s.shape().dims().to_vec(), data: to_le_bytes(&s) }))
        })
        .collect()
}

/// CRC-32 of the tensors in name order: each name, dtype, shape and data.
pub(crate) fn checksum<'a>(views: impl Iterator<Item = (&'a str, &'a TensorBytes)>) -> u32 {
    let mut sorted: Vec<(&str, &TensorBytes)> = views.collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut h = crc32fast::Hasher::new();
    for (name, v) in sorted {
        h.update(name.as_bytes());
        h.update(&[0]);
        h.update(format!("{:?}", v.dtype).as_bytes());
        h.update(&(v.shape.len() as u64).to_le_bytes());
        v.shape.iter().for_each(|&d| h.update(&(d as u64).to_le_bytes()));
        h.update(&(v.data.len() as u64).to_le_bytes());
        h.update(&v.data);
    }
    h.finalize()
}
