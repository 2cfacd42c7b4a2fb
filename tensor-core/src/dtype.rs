//! The `DType` tag of a tensor's element type, and `Scalar`, a Rust number on its way to
//! becoming a tensor's dtype. (The Rust element types themselves are the root's `Element`.)

use std::fmt;

/// The element type of a tensor.
///
/// ```
/// use tensor_core::prelude::*;
/// let t = Tensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap();
/// assert_eq!(t.dtype(), DType::I64);
/// assert!(DType::F32.is_float() && !DType::I32.is_float());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// Boolean (comparisons, masks, conditions).
    Bool,
}

impl DType {
    /// Every dtype, in declaration order.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(DType::ALL.len(), 5);
    /// assert!(DType::ALL.iter().filter(|d| d.is_float()).count() == 2);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub const ALL: [DType; 5] = [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool];

    /// True for f32 and f64: the dtypes that can carry gradients.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(DType::F32.is_float() && !DType::I64.is_float());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// True for i32 and i64.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(DType::I32.is_int() && !DType::Bool.is_int());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// True for every dtype that supports arithmetic (all but bool).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(DType::F64.is_numeric() && !DType::Bool.is_numeric());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_numeric(self) -> bool {
        self != DType::Bool
    }

    /// Bytes per element.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!((DType::F64.size_of(), DType::I32.size_of(), DType::Bool.size_of()), (8, 4, 1));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn size_of(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// The short lowercase name used in printing (`f32`, `i64`, `bool`, ...).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(DType::I64.name(), "i64");
    /// assert_eq!(DType::F32.to_string(), "f32");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust number used as an operand (`&x * 2.0`, `x.clamp(0.0, 6.0)`). It takes the dtype of
/// the tensor it meets, as NumPy's and PyTorch's Python scalars do.
///
/// ```
/// # use tensor_core::prelude::*;
/// let x = Tensor::from_vec(vec![1i32, 2], &[2]).unwrap();
/// let y = &x * 3;              // an i32 tensor
/// assert_eq!(y.to_vec::<i32>().unwrap(), vec![3, 6]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A float (f32 or f64 literal), held as f64.
    Float(f64),
    /// An integer literal, held as i64.
    Int(i64),
    /// A bool.
    Bool(bool),
}

impl Scalar {
    /// The value as f64 (used for printing and attribute hashing).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::Scalar;
    /// assert_eq!(Scalar::from(3i32).as_f64(), 3.0);
    /// assert_eq!(Scalar::from(true).as_f64(), 1.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Float(v) => v,
            Scalar::Int(v) => v as f64,
            Scalar::Bool(v) => v as u8 as f64,
        }
    }

    /// A bit pattern that identifies the value exactly (for hashing op attributes).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::Scalar;
    /// assert_ne!(Scalar::from(0.0f64).key_bits(), Scalar::from(-0.0f64).key_bits());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn key_bits(self) -> u64 {
        match self {
            Scalar::Float(v) => v.to_bits(),
            Scalar::Int(v) => v as u64 ^ 0x5555_5555_5555_5555,
            Scalar::Bool(v) => v as u64 ^ 0xAAAA_AAAA_AAAA_AAAA,
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Float(v) => write!(f, "{v:?}"),
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::Bool(v) => write!(f, "{v}"),
        }
    }
}

macro_rules! scalar_from {
    ($variant:ident as $as:ty: $($t:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(v: $t) -> Self {
                Scalar::$variant(v as $as)
            }
        }
    )*};
}
scalar_from!(Float as f64: f32, f64);
scalar_from!(Int as i64: i8, i16, i32, i64, u8, u16, u32, isize);

impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}
