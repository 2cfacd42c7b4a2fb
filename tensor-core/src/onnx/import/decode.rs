//! ONNX tensors as tensor-core tensors: element types, the data in `raw_data`, in the typed
//! fields or in a file beside the model (`external_data`), and their checks.

use super::super::proto::{StringStringEntryProto, TensorProto};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use std::path::Path;

/// ONNX's name of element type `code` (`TensorProto.DataType`).
pub(crate) fn type_name(code: i32) -> String {
    const NAMES: [&str; 24] = [
        "UNDEFINED",
        "FLOAT",
        "UINT8",
        "INT8",
        "UINT16",
        "INT16",
        "INT32",
        "INT64",
        "STRING",
        "BOOL",
        "FLOAT16",
        "DOUBLE",
        "UINT32",
        "UINT64",
        "COMPLEX64",
        "COMPLEX128",
        "BFLOAT16",
        "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ",
        "FLOAT8E5M2",
        "FLOAT8E5M2FNUZ",
        "UINT4",
        "INT4",
        "FLOAT4E2M1",
    ];
    usize::try_from(code).ok().and_then(|c| NAMES.get(c)).map_or_else(|| format!("type {code}"), |n| n.to_string())
}

/// The dtype of ONNX element type `code`; `what` names the tensor, input or cast for the
/// error.
pub(crate) fn dtype(code: i32, what: impl FnOnce() -> String) -> Result<DType> {
    match code {
        1 => Ok(DType::F32),
        6 => Ok(DType::I32),
        7 => Ok(DType::I64),
        9 => Ok(DType::Bool),
        11 => Ok(DType::F64),
        _ => Err(Error::OnnxDType { what: what(), dtype: type_name(code) }),
    }
}

/// Where a tensor is read from: its name and the folder its external data is relative to.
pub(crate) struct Source<'a> {
    pub what: &'a str,
    pub dir: Option<&'a Path>,
}

impl Source<'_> {
    fn bad(&self, problem: String) -> Error {
        Error::OnnxImport { node: self.what.to_string(), op: "tensor".into(), problem }
    }
}

/// Decodes `t` into a tensor of its dims, checking that its data fits them.
pub(crate) fn tensor(t: &TensorProto, src: &Source) -> Result<Tensor> {
    let dtype = dtype(t.data_type, || format!("tensor `{}`", src.what))?;
    let dims = t.dims.iter().map(|&d| usize::try_from(d).map_err(|_| src.bad(format!("dim {d} is negative")))).collect::<Result<Vec<_>>>()?;
    let numel = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).filter(|&n| n <= 1 << 34);
    let numel = numel.ok_or_else(|| src.bad(format!("dims {dims:?} are too large")))?;
    let external;
    let raw = if t.data_location == 1 {
        external = read_external(&t.external_data, src)?;
        &external[..]
    } else {
        &t.raw_data[..]
    };
    if !raw.is_empty() || numel == 0 || t.data_location == 1 {
        return from_raw(raw, dtype, &dims, numel, src);
    }
    from_typed(t, dtype, &dims, numel, src)
}

/// Little-endian bytes, `numel` elements of `dtype`.
fn from_raw(raw: &[u8], dtype: DType, dims: &[usize], numel: usize, src: &Source) -> Result<Tensor> {
    let width = dtype.size_of();
    if raw.len() != numel * width {
        return Err(src.bad(format!("{} bytes of data for dims {dims:?} of {dtype} (needs {})", raw.len(), numel * width)));
    }
    macro_rules! le {
        ($t:ty) => {
            Tensor::from_vec(raw.chunks_exact(width).map(|c| <$t>::from_le_bytes(c.try_into().unwrap())).collect::<Vec<$t>>(), dims)
        };
    }
    match dtype {
        DType::F32 => le!(f32),
        DType::F64 => le!(f64),
        DType::I32 => le!(i32),
        DType::I64 => le!(i64),
        DType::Bool => Tensor::from_vec(raw.iter().map(|&b| b != 0).collect::<Vec<bool>>(), dims),
    }
}

/// The data in the field of its type.
fn from_typed(t: &TensorProto, dtype: DType, dims: &[usize], numel: usize, src: &Source) -> Result<Tensor> {
    let len = match dtype {
        DType::F32 => t.float_data.len(),
        DType::F64 => t.double_data.len(),
        DType::I32 | DType::Bool => t.int32_data.len(),
        DType::I64 => t.int64_data.len(),
    };
    if len != numel {
        return Err(src.bad(format!("{len} values for dims {dims:?} ({numel} elements)")));
    }
    match dtype {
        DType::F32 => Tensor::from_vec(t.float_data.clone(), dims),
        DType::F64 => Tensor::from_vec(t.double_data.clone(), dims),
        DType::I32 => Tensor::from_vec(t.int32_data.clone(), dims),
        DType::I64 => Tensor::from_vec(t.int64_data.clone(), dims),
        DType::Bool => Tensor::from_vec(t.int32_data.iter().map(|&v| v != 0).collect::<Vec<bool>>(), dims),
    }
}

/// The bytes `external_data` points at: `location` relative to the model's folder, from
/// `offset`, `length` bytes (to the end when absent).
fn read_external(entries: &[StringStringEntryProto], src: &Source) -> Result<Vec<u8>> {
    let get = |key: &str| entries.iter().find(|e| e.key == key).map(|e| e.value.as_str());
    let location = get("location").ok_or_else(|| src.bad("external data without a location".into()))?;
    let number =
        |key: &str| get(key).map(|v| v.parse::<u64>().map_err(|_| src.bad(format!("external data {key} `{v}` is not a number")))).transpose();
    let (offset, length) = (number("offset")?.unwrap_or(0), number("length")?);
    let dir =
        src.dir.ok_or_else(|| src.bad(format!("its data is in file `{location}`, but the model was read from bytes (import it from its path)")))?;
    if Path::new(location).is_absolute() || location.split(['/', '\\']).any(|c| c == "..") {
        return Err(src.bad(format!("external data location `{location}` leaves the model's folder")));
    }
    let path = dir.join(location);
    let bytes = std::fs::read(&path).map_err(|e| Error::Io { path: path.display().to_string(), action: "read", reason: e.to_string() })?;
    let start = usize::try_from(offset).ok().filter(|&s| s <= bytes.len());
    let start = start.ok_or_else(|| src.bad(format!("external data offset {offset} is past the end of `{location}` ({} bytes)", bytes.len())))?;
    let end = match length {
        Some(n) => usize::try_from(n).ok().and_then(|n| start.checked_add(n)).filter(|&e| e <= bytes.len()),
        None => Some(bytes.len()),
    };
    let end = end.ok_or_else(|| src.bad(format!("external data of {length:?} bytes from {offset} is past the end of `{location}`")))?;
    Ok(bytes[start..end].to_vec())
}
