//! The Rust element types a tensor can hold, each tied to its `DType` tag and its `Storage`
//! variant.

use super::{Array, Storage};
use crate::dtype::{DType, Scalar};
use std::fmt;

impl DType {
    /// The dtype of the Rust element type `T`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert_eq!(DType::of::<f64>(), DType::F64);
    /// ```
    pub fn of<T: Element>() -> DType {
        T::DTYPE
    }
}

/// A Rust element type a tensor can hold: `f32`, `f64`, `i32`, `i64` or `bool`.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::Element;
/// fn first<T: Element>(t: &Tensor) -> Result<T> {
///     Ok(t.to_vec::<T>()?[0])
/// }
/// assert_eq!(f64::DTYPE, DType::F64);
/// assert_eq!(first::<i32>(&Tensor::from_vec(vec![4, 5], &[2])?)?, 4);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait Element: Copy + Clone + Send + Sync + PartialEq + PartialOrd + fmt::Debug + fmt::Display + StorageOf + 'static {
    /// The dtype tag of this element type.
    const DTYPE: DType;
    /// Zero (false for bool).
    fn zero() -> Self;
    /// One (true for bool).
    fn one() -> Self;
    /// Converts from f64, rounding or truncating as `as` does.
    fn from_f64(v: f64) -> Self;
    /// Converts to f64 as `as` does.
    fn to_f64(self) -> f64;
    /// Converts a Rust scalar to this element type, as `as` does.
    fn from_scalar(s: Scalar) -> Self;
}

macro_rules! impl_numeric_element {
    ($t:ty, $dtype:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dtype;
            fn zero() -> Self {
                0 as $t
            }
            fn one() -> Self {
                1 as $t
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::Float(v) => v as $t,
                    Scalar::Int(v) => v as $t,
                    Scalar::Bool(v) => v as u8 as $t,
                }
            }
        }
    };
}

impl_numeric_element!(f32, DType::F32);
impl_numeric_element!(f64, DType::F64);
impl_numeric_element!(i32, DType::I32);
impl_numeric_element!(i64, DType::I64);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn zero() -> Self {
        false
    }
    fn one() -> Self {
        true
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Float(v) => v != 0.0,
            Scalar::Int(v) => v != 0,
            Scalar::Bool(v) => v,
        }
    }
}

/// Ties each element type to its `Storage` variant (a supertrait of `Element`).
#[doc(hidden)]
pub trait StorageOf: Sized {
    /// The array of this element type inside `s`, if that is its dtype.
    fn array_of(s: &Storage) -> Option<&Array<Self>>;
    /// Wraps an array of this element type.
    fn wrap(a: Array<Self>) -> Storage;
}

macro_rules! impl_storage_of {
    ($($t:ty => $v:ident),*) => {$(
        impl StorageOf for $t {
            fn array_of(s: &Storage) -> Option<&Array<$t>> {
                match s {
                    Storage::$v(a) => Some(a),
                    _ => None,
                }
            }
            fn wrap(a: Array<$t>) -> Storage {
                Storage::$v(a)
            }
        }
    )*};
}
impl_storage_of!(f32 => F32, f64 => F64, i32 => I32, i64 => I64, bool => Bool);
