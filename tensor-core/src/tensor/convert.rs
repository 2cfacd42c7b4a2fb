//! Reading a tensor's values back as Rust data.

use super::Tensor;
use crate::error::{Error, Result};
use crate::storage::Element;
use crate::storage::Storage;

impl Tensor {
    /// The values as an ndarray array of element type `T` (which must be the dtype).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let t = Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2])?;
    /// assert_eq!(t.to_array::<i32>()?[[1, 0]], 3);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_array<T: Element>(&self) -> Result<ndarray::ArrayD<T>> {
        let s = self.host_storage("to_array")?;
        Ok(typed(&s, "to_array")?.to_owned())
    }

    /// The values in row-major order, as element type `T` (which must be the dtype).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    /// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 2.0]);
    /// assert!(t.to_vec::<f64>().is_err()); // cast first
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let s = self.host_storage("to_vec")?;
        Ok(typed(&s, "to_vec")?.iter().copied().collect())
    }

    /// The single value of a one-element tensor.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert_eq!(Tensor::from_vec(vec![7i64], &[1, 1])?.item::<i64>()?, 7);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn item<T: Element>(&self) -> Result<T> {
        let s = self.host_storage("item")?;
        let a = typed::<T>(&s, "item")?;
        match a.len() {
            1 => Ok(*a.iter().next().expect("one element")),
            n => Err(Error::NotOneElement { op: "item", shape: self.raw_shape(), numel: n }),
        }
    }

    /// True when `self` and `other` hold the same values with the same dtype and shape,
    /// compared bit for bit (NaN equals a NaN of the same bits, 0.0 differs from -0.0): how
    /// the tests prove a graph computes what eager code does. An `Err` for a traced tensor,
    /// whose values exist only at run time.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let (a, b) = (Tensor::scalar(0.0f32), Tensor::scalar(-0.0f32));
    /// assert!(a.bit_eq(&a.clone())? && !a.bit_eq(&b)?); // 0.0 == -0.0, but not bit for bit
    /// assert!(!a.bit_eq(&Tensor::scalar(0.0f64))?);      // another dtype
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn bit_eq(&self, other: &Tensor) -> Result<bool> {
        Ok(self.host_storage("bit_eq")?.bit_eq(&other.host_storage("bit_eq")?))
    }

    /// The data as a `Storage` (for kernels and the graph executor's callers).
    pub(crate) fn to_storage(&self) -> Result<Storage> {
        self.host_storage("to_storage")
    }
}

fn typed<'a, T: Element>(s: &'a Storage, op: &'static str) -> Result<&'a crate::storage::Array<T>> {
    s.array::<T>().ok_or_else(|| Error::dtype_mismatch(op, T::DTYPE, s.dtype()))
}
