//! Concrete tensor data: one ndarray `ArcArray` per dtype behind one enum, crate-private (the
//! public face is `Tensor`, its `Element` types and `ndarray::ArrayD` conversions). Cloning is a
//! reference-count increment; writing to a shared array copies it first (copy on write), so a
//! value saved for backward or held by a graph never changes under its holder.

mod element;
mod unwritten;

pub use element::{Element, StorageOf};
pub use unwritten::Unwritten;

use crate::dtype::DType;
use crate::shape::Shape;
use ndarray::{ArcArray, IxDyn};

/// The array type behind every concrete tensor.
pub type Array<T> = ArcArray<T, IxDyn>;

/// The data of a concrete tensor.
#[derive(Clone, Debug)]
pub enum Storage {
    /// f32 data.
    F32(Array<f32>),
    /// f64 data.
    F64(Array<f64>),
    /// i32 data.
    I32(Array<i32>),
    /// i64 data.
    I64(Array<i64>),
    /// bool data.
    Bool(Array<bool>),
}

/// Runs `$body` with `$a` bound to the array inside `$s`, whatever its dtype.
macro_rules! with_array {
    ($s:expr, $a:ident => $body:expr) => {
        match $s {
            $crate::storage::Storage::F32($a) => $body,
            $crate::storage::Storage::F64($a) => $body,
            $crate::storage::Storage::I32($a) => $body,
            $crate::storage::Storage::I64($a) => $body,
            $crate::storage::Storage::Bool($a) => $body,
        }
    };
}

/// Like `with_array!`, re-wrapping the array `$body` returns in the same dtype's variant.
macro_rules! map_array {
    ($s:expr, $a:ident => $body:expr) => {
        match $s {
            $crate::storage::Storage::F32($a) => $crate::storage::Storage::F32($body),
            $crate::storage::Storage::F64($a) => $crate::storage::Storage::F64($body),
            $crate::storage::Storage::I32($a) => $crate::storage::Storage::I32($body),
            $crate::storage::Storage::I64($a) => $crate::storage::Storage::I64($body),
            $crate::storage::Storage::Bool($a) => $crate::storage::Storage::Bool($body),
        }
    };
}

/// Like `map_array!` for the numeric dtypes; bool yields `$bool_case`.
macro_rules! map_numeric {
    ($s:expr, $a:ident => $body:expr, bool => $bool_case:expr) => {
        match $s {
            $crate::storage::Storage::F32($a) => $crate::storage::Storage::F32($body),
            $crate::storage::Storage::F64($a) => $crate::storage::Storage::F64($body),
            $crate::storage::Storage::I32($a) => $crate::storage::Storage::I32($body),
            $crate::storage::Storage::I64($a) => $crate::storage::Storage::I64($body),
            $crate::storage::Storage::Bool(_) => $bool_case,
        }
    };
}

/// Like `map_array!` for f32 and f64; other dtypes yield `$other`.
macro_rules! map_float {
    ($s:expr, $a:ident => $body:expr, other => $other:expr) => {
        match $s {
            $crate::storage::Storage::F32($a) => $crate::storage::Storage::F32($body),
            $crate::storage::Storage::F64($a) => $crate::storage::Storage::F64($body),
            _ => $other,
        }
    };
}
pub(crate) use {map_array, map_float, map_numeric, with_array};

impl Storage {
    /// The dtype of the data.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::F32(_) => DType::F32,
            Storage::F64(_) => DType::F64,
            Storage::I32(_) => DType::I32,
            Storage::I64(_) => DType::I64,
            Storage::Bool(_) => DType::Bool,
        }
    }

    /// The shape of the data.
    pub fn shape(&self) -> Shape {
        with_array!(self, a => Shape::new(a.shape()))
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        with_array!(self, a => a.len())
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The array of element type `T`, if that is the dtype.
    pub fn array<T: Element>(&self) -> Option<&Array<T>> {
        T::array_of(self)
    }

    /// A storage filled with `value` (converted to `dtype`).
    pub fn full(shape: &Shape, dtype: DType, value: crate::dtype::Scalar) -> Storage {
        fn fill<T: Element>(shape: &Shape, v: crate::dtype::Scalar) -> Array<T> {
            Array::from_elem(IxDyn(shape.dims()), T::from_scalar(v))
        }
        match dtype {
            DType::F32 => Storage::F32(fill(shape, value)),
            DType::F64 => Storage::F64(fill(shape, value)),
            DType::I32 => Storage::I32(fill(shape, value)),
            DType::I64 => Storage::I64(fill(shape, value)),
            DType::Bool => Storage::Bool(fill(shape, value)),
        }
    }

    /// True when the data is laid out row-major and contiguous.
    pub fn is_standard_layout(&self) -> bool {
        with_array!(self, a => a.is_standard_layout())
    }

    /// The same data in row-major contiguous layout (no copy if it already is).
    pub fn to_standard_layout(&self) -> Storage {
        map_array!(self, a => standard(a))
    }

    /// True when `self` and `other` are the same values with the same dtype and shape,
    /// compared bit for bit (NaN equals NaN of the same bits, 0.0 differs from -0.0).
    pub fn bit_eq(&self, other: &Storage) -> bool {
        match (self, other) {
            (Storage::F32(a), Storage::F32(b)) => bits_eq(a, b, |x| x.to_bits() as u64),
            (Storage::F64(a), Storage::F64(b)) => bits_eq(a, b, |x| x.to_bits()),
            (Storage::I32(a), Storage::I32(b)) => a == b,
            (Storage::I64(a), Storage::I64(b)) => a == b,
            (Storage::Bool(a), Storage::Bool(b)) => a == b,
            _ => false,
        }
    }
}

fn bits_eq<T: Copy>(a: &Array<T>, b: &Array<T>, bits: impl Fn(T) -> u64) -> bool {
    a.shape() == b.shape() && a.iter().zip(b.iter()).all(|(&x, &y)| bits(x) == bits(y))
}

/// `a` in standard layout, shared when it already is.
pub(crate) fn standard<T: Clone>(a: &Array<T>) -> Array<T> {
    if a.is_standard_layout() {
        return a.clone();
    }
    match copy_runs(a) {
        Some(v) => Array::from_shape_vec(a.raw_dim(), v).expect("length matches dims"),
        None => a.as_standard_layout().into_owned().into_shared(),
    }
}

/// The elements of `a` in row-major order, copied a run at a time: the trailing axes that
/// are contiguous in `a` (a permuted or sliced array usually has some) form runs copied with
/// one slice copy each. `None` when the runs would be short or a stride is negative.
fn copy_runs<T: Clone>(a: &Array<T>) -> Option<Vec<T>> {
    let (dims, strides) = (a.shape(), a.strides());
    if dims.is_empty() || a.is_empty() || strides.iter().any(|&s| s < 0) {
        return None;
    }
    let (mut run, mut k) = (1usize, dims.len());
    while k > 0 && (dims[k - 1] == 1 || strides[k - 1] as usize == run) {
        run *= dims[k - 1];
        k -= 1;
    }
    if run < 16 {
        return None;
    }
    let (outer, steps) = (&dims[..k], &strides[..k]);
    let mut idx: smallvec::SmallVec<[usize; 6]> = smallvec::SmallVec::from_elem(0, k);
    let mut v = Vec::with_capacity(a.len());
    let mut offset = 0isize;
    for _ in 0..a.len() / run {
        // SAFETY: `offset` is the element offset of an index whose trailing axes start a run;
        // the run's `run` elements are consecutive in memory (the trailing axes are
        // contiguous) and belong to the array.
        v.extend_from_slice(unsafe { std::slice::from_raw_parts(a.as_ptr().offset(offset), run) });
        for d in (0..k).rev() {
            idx[d] += 1;
            offset += steps[d];
            if idx[d] < outer[d] {
                break;
            }
            offset -= steps[d] * outer[d] as isize;
            idx[d] = 0;
        }
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Axis, Slice};

    #[test]
    fn storage_reports_dtype_shape_and_compares_bits() {
        use crate::prelude::*;
        let s = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap().to_storage().unwrap();
        assert!(matches!(&s, Storage::I64(a) if a.len() == 2));
        assert_eq!((s.dtype(), s.shape(), s.len(), s.is_empty()), (DType::I64, Shape::new(&[2]), 2, false));
        assert!(Tensor::ones(&[0, 5], DType::F32).to_storage().unwrap().is_empty());
        let f = Tensor::ones(&[2], DType::F64).to_storage().unwrap();
        assert!(f.array::<f64>().is_some() && f.array::<f32>().is_none());
        let full = Storage::full(&Shape::new(&[3]), DType::I32, 7.into());
        assert_eq!(full.array::<i32>().unwrap().as_slice().unwrap(), &[7, 7, 7]);
        let t = Tensor::from_vec(vec![1, 2, 3, 4, 5, 6], &[2, 3]).unwrap().t().unwrap().to_storage().unwrap();
        assert!(!t.is_standard_layout());
        assert_eq!(t.to_standard_layout().array::<i32>().unwrap().as_slice().unwrap(), &[1, 4, 2, 5, 3, 6]);
        let (a, b) = (Tensor::scalar(0.0f32).to_storage().unwrap(), Tensor::scalar(-0.0f32).to_storage().unwrap());
        assert!(a.bit_eq(&a) && !a.bit_eq(&b));
    }

    #[test]
    fn standard_copies_permuted_and_sliced_arrays_in_logical_order() {
        let a: Array<f32> = Array::from_shape_vec(IxDyn(&[3, 4, 5, 6]), (0..360).map(|v| v as f32).collect()).unwrap();
        for perm in [[1, 0, 2, 3], [2, 0, 1, 3], [3, 2, 1, 0], [0, 1, 3, 2]] {
            let p = a.clone().permuted_axes(IxDyn(&perm));
            let s = standard(&p);
            assert!(s.is_standard_layout());
            assert_eq!(s.iter().collect::<Vec<_>>(), p.iter().collect::<Vec<_>>(), "{perm:?}");
        }
        let mut sliced = a.clone();
        sliced.slice_axis_inplace(Axis(1), Slice::from(1..3));
        let s = standard(&sliced);
        assert_eq!(s.iter().collect::<Vec<_>>(), sliced.iter().collect::<Vec<_>>());
        let b = a.broadcast(IxDyn(&[2, 3, 4, 5, 6])).unwrap().to_shared();
        assert_eq!(standard(&b).iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
    }
}
