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
            n => Err(Error::NotOneElement { op: "item", shape: self.shape(), numel: n }),
        }
    }

    /// The data as a `Storage` (for kernels and the graph executor's callers).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, -0.0], &[2])?;
    /// let s = x.to_storage()?;
    /// assert_eq!(s.dtype(), DType::F32);
    /// assert!(s.bit_eq(&x.to_storage()?));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_storage(&self) -> Result<Storage> {
        self.host_storage("to_storage")
    }
}

fn typed<'a, T: Element>(s: &'a Storage, op: &'static str) -> Result<&'a crate::storage::Array<T>> {
    s.array::<T>().ok_or_else(|| Error::dtype_mismatch(op, T::DTYPE, s.dtype()))
}
