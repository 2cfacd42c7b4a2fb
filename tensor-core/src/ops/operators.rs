//! `+ - * /` and unary `-` on `Tensor` and `&Tensor`, with tensors or Rust scalars on either
//! side. Like ndarray's operators they panic on mismatched shapes or dtypes, with the message
//! the `Result` methods (`add`, `sub`, ...) return as an `Err`.

use super::BinaryOp;
use crate::dtype::Scalar;
use crate::tensor::Tensor;
use std::ops::{Add, Div, Mul, Neg, Sub};

fn or_panic(r: crate::error::Result<Tensor>) -> Tensor {
    r.unwrap_or_else(|e| panic!("{e}"))
}

macro_rules! tensor_tensor {
    ($trait:ident, $method:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                or_panic(Tensor::$method(self, rhs))
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                or_panic(Tensor::$method(self, &rhs))
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                or_panic(Tensor::$method(&self, rhs))
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                or_panic(Tensor::$method(&self, &rhs))
            }
        }
    };
}

tensor_tensor!(Add, add);
tensor_tensor!(Sub, sub);
tensor_tensor!(Mul, mul);
tensor_tensor!(Div, div);

/// The Rust scalar types the operators accept (sealed).
///
/// ```
/// use tensor_core::prelude::*;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
/// let y = &x * 2.0 + 1; // f64 and i32 literals both take the tensor's dtype
/// assert_eq!(y.to_vec::<f32>()?, vec![3.0, 5.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait OperatorScalar: Into<Scalar> + Copy + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! operator_scalars {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl OperatorScalar for $t {}
    )*};
}
operator_scalars!(f32, f64, i32, i64);

// One generic impl per operator for a scalar on the right, so `&x * 2.0` has a known output
// type before the literal's type is settled.
macro_rules! tensor_scalar {
    ($trait:ident, $method:ident) => {
        impl<S: OperatorScalar> $trait<S> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: S) -> Tensor {
                or_panic(Tensor::$method(self, rhs.into()))
            }
        }
        impl<S: OperatorScalar> $trait<S> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: S) -> Tensor {
                or_panic(Tensor::$method(&self, rhs.into()))
            }
        }
    };
}

tensor_scalar!(Add, add);
tensor_scalar!(Sub, sub);
tensor_scalar!(Mul, mul);
tensor_scalar!(Div, div);

// A scalar on the left: f64 and i64 only, so a literal (`2.0 - &x`, `1 - &mask`) has one
// type and a method can be chained on the result; the scalar still takes the tensor's dtype.
macro_rules! scalar_tensor {
    ($trait:ident, $method:ident, $op:ident, $commutes:expr; $($t:ty),*) => {$(
        impl $trait<&Tensor> for $t {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                // a + b and a * b are the same bits either way round; keep one node form.
                if $commutes {
                    or_panic(Tensor::$method(rhs, self))
                } else {
                    or_panic(rhs.scalar_lhs(BinaryOp::$op, Scalar::from(self)))
                }
            }
        }
        impl $trait<Tensor> for $t {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                $trait::$method(self, &rhs)
            }
        }
    )*};
}

scalar_tensor!(Add, add, Add, true; f64, i64);
scalar_tensor!(Sub, sub, Sub, false; f64, i64);
scalar_tensor!(Mul, mul, Mul, true; f64, i64);
scalar_tensor!(Div, div, Div, false; f64, i64);

impl Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        or_panic(Tensor::neg(self))
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        or_panic(Tensor::neg(&self))
    }
}
