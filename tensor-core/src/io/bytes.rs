//! Tensor data as the little-endian bytes safetensors stores, and back, for every dtype.

use crate::dtype::DType;
use crate::storage::Storage;
use crate::tensor::Tensor;
use safetensors::Dtype;

/// The safetensors dtype of a dtype.
pub(crate) fn safetensors_dtype(d: DType) -> Dtype {
    match d {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::Bool => Dtype::BOOL,
    }
}

/// The dtype of a safetensors dtype, if tensor-core has it.
pub(crate) fn dtype_from_safetensors(d: Dtype) -> Option<DType> {
    match d {
        Dtype::F32 => Some(DType::F32),
        Dtype::F64 => Some(DType::F64),
        Dtype::I32 => Some(DType::I32),
        Dtype::I64 => Some(DType::I64),
        Dtype::BOOL => Some(DType::Bool),
        _ => None,
    }
}

/// The elements in row-major order as little-endian bytes (bool: one byte, 0 or 1).
pub(crate) fn to_le_bytes(s: &Storage) -> Vec<u8> {
    macro_rules! le {
        ($a:expr) => {
            $a.iter().flat_map(|v| v.to_le_bytes()).collect()
        };
    }
    match s {
        Storage::F32(a) => le!(a),
        Storage::F64(a) => le!(a),
        Storage::I32(a) => le!(a),
        Storage::I64(a) => le!(a),
        Storage::Bool(a) => a.iter().map(|&b| b as u8).collect(),
    }
}

/// A tensor of `dtype` and `dims` from little-endian bytes; `Err` says why they do not fit.
pub(crate) fn from_le_bytes(dtype: DType, dims: &[usize], bytes: &[u8]) -> Result<Tensor, String> {
    let numel = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or("its element count overflows")?;
    let need = numel.checked_mul(dtype.size_of()).ok_or("its size overflows")?;
    if bytes.len() != need {
        return Err(format!("{} bytes cannot hold {numel} elements of {dtype}", bytes.len()));
    }
    macro_rules! decode {
        ($t:ty) => {{
            let values: Vec<$t> =
                bytes.chunks_exact(std::mem::size_of::<$t>()).map(|c| <$t>::from_le_bytes(c.try_into().expect("exact chunks"))).collect();
            Tensor::from_vec(values, dims)
        }};
    }
    let tensor = match dtype {
        DType::F32 => decode!(f32),
        DType::F64 => decode!(f64),
        DType::I32 => decode!(i32),
        DType::I64 => decode!(i64),
        DType::Bool => {
            if let Some(b) = bytes.iter().find(|&&b| b > 1) {
                return Err(format!("a bool element is stored as byte {b}, not 0 or 1"));
            }
            Tensor::from_vec(bytes.iter().map(|&b| b == 1).collect(), dims)
        }
    };
    tensor.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_its_bits() {
        let tensors = [
            Tensor::from_vec(vec![1.5f32, -0.0, f32::NAN, f32::INFINITY], &[2, 2]).unwrap(),
            Tensor::from_vec(vec![f64::MIN_POSITIVE, -2.0], &[2]).unwrap(),
            Tensor::from_vec(vec![i32::MIN, 7], &[2, 1]).unwrap(),
            Tensor::from_vec(vec![i64::MAX], &[]).unwrap(),
            Tensor::from_vec(vec![true, false, true], &[3]).unwrap(),
            Tensor::zeros(&[0, 3], DType::F32),
        ];
        for t in tensors {
            let s = t.to_storage().unwrap();
            let back = from_le_bytes(t.dtype(), &t.raw_dims(), &to_le_bytes(&s)).unwrap();
            assert!(back.to_storage().unwrap().bit_eq(&s), "{t}");
            assert_eq!(back.raw_dims(), t.raw_dims());
        }
    }

    #[test]
    fn wrong_lengths_and_bool_bytes_are_errors() {
        assert!(from_le_bytes(DType::F32, &[3], &[0; 8]).unwrap_err().contains("8 bytes cannot hold 3 elements of f32"));
        assert!(from_le_bytes(DType::Bool, &[2], &[1, 2]).unwrap_err().contains("byte 2"));
        assert!(from_le_bytes(DType::F64, &[usize::MAX, 2], &[]).unwrap_err().contains("overflows"));
    }
}
