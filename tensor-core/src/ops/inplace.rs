//! In-place ops: `add_`, `sub_`, `mul_`, `div_`, `assign_`, `zero_`, and the unary ones
//! (`exp_`, `relu_`, `clamp_`, `neg_`, ...). Each bumps the tensor's version counter, which
//! backward checks against the versions it saved.

use super::dispatch::apply_in_place;
use super::{BinaryOp, ElementwiseOp, LayoutOp, Operand, ScalarAttr, UnaryOp};
use crate::dtype::Scalar;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

macro_rules! in_place_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {$(
            $(#[$doc])*
            pub fn $name<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<()> {
                self.binary_in_place(BinaryOp::$op, rhs.into(), stringify!($name))
            }
        )*}
    };
}

in_place_methods! {
    /// `self += rhs` in place (rhs broadcasts to `self`'s shape). On a leaf that requires
    /// grad this is an error unless grad mode is off (`no_grad`), as in PyTorch.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    /// let alias = x.clone();
    /// x.add_(1.0)?;
    /// assert_eq!(alias.to_vec::<f32>()?, vec![2.0, 3.0]); // every handle sees it
    /// assert_eq!(x.version(), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    add_ => Add;
    /// `self -= rhs` in place.
    sub_ => Sub;
    /// `self *= rhs` in place.
    mul_ => Mul;
    /// `self /= rhs` in place.
    div_ => Div;
}

macro_rules! unary_in_place_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {$(
            $(#[$doc])*
            pub fn $name(&self) -> Result<()> {
                apply_in_place(ElementwiseOp::Unary(UnaryOp::$op).into(), self, true, &[], stringify!($name))
            }
        )*}
    };
}

unary_in_place_methods! {
    /// `self = e^self` in place. Like every in-place op, on a leaf that requires grad this is
    /// an error unless grad mode is off (`no_grad`); a value saved for backward that this
    /// overwrites makes that backward an error.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![0.0f32, 1.0], &[2])?;
    /// x.exp_()?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![1.0, 1.0f32.exp()]);
    /// assert_eq!(x.version(), 1);
    /// assert!(Tensor::scalar(1.0f32).requires_grad_(true)?.exp_().is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    exp_ => Exp;
    /// The natural logarithm in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::scalar(1.0f32);
    /// x.log_()?;
    /// assert_eq!(x.item::<f32>()?, 0.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    log_ => Log;
    /// The square root in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::scalar(9.0f32);
    /// x.sqrt_()?;
    /// assert_eq!(x.item::<f32>()?, 3.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    sqrt_ => Sqrt;
    /// The hyperbolic tangent in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::scalar(0.0f32);
    /// x.tanh_()?;
    /// assert_eq!(x.item::<f32>()?, 0.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    tanh_ => Tanh;
    /// The logistic sigmoid in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::scalar(0.0f32);
    /// x.sigmoid_()?;
    /// assert_eq!(x.item::<f32>()?, 0.5);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    sigmoid_ => Sigmoid;
    /// `max(self, 0)` in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-1.0f32, 2.0], &[2])?;
    /// x.relu_()?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![0.0, 2.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    relu_ => Relu;
    /// `|self|` in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-1i32, 2], &[2])?;
    /// x.abs_()?;
    /// assert_eq!(x.to_vec::<i32>()?, vec![1, 2]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    abs_ => Abs;
    /// `-self` in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::scalar(2.0f64);
    /// x.neg_()?;
    /// assert_eq!(x.item::<f64>()?, -2.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    neg_ => Neg;
    /// The sign (-1, 0 or 1) in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-3.0f32, 0.0, 5.0], &[3])?;
    /// x.sign_()?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![-1.0, 0.0, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    sign_ => Sign;
}

impl Tensor {
    /// Clamps every value into `[min, max]` in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-2.0f32, 0.5, 3.0], &[3])?;
    /// x.clamp_(-1.0f32, 1.0f32)?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![-1.0, 0.5, 1.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn clamp_(&self, min: impl Into<Scalar>, max: impl Into<Scalar>) -> Result<()> {
        self.clamp_in_place(Some(min.into()), Some(max.into()), "clamp_")
    }

    /// `max(self, min)` in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-2.0f32, 3.0], &[2])?;
    /// x.clamp_min_(0.0f32)?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![0.0, 3.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn clamp_min_(&self, min: impl Into<Scalar>) -> Result<()> {
        self.clamp_in_place(Some(min.into()), None, "clamp_min_")
    }

    /// `min(self, max)` in place.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![-2.0f32, 3.0], &[2])?;
    /// x.clamp_max_(0.0f32)?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![-2.0, 0.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn clamp_max_(&self, max: impl Into<Scalar>) -> Result<()> {
        self.clamp_in_place(None, Some(max.into()), "clamp_max_")
    }

    fn clamp_in_place(&self, min: Option<Scalar>, max: Option<Scalar>, name: &'static str) -> Result<()> {
        let op = ElementwiseOp::Clamp { min: min.map(ScalarAttr), max: max.map(ScalarAttr) };
        apply_in_place(op.into(), self, true, &[], name)
    }

    fn binary_in_place(&self, op: BinaryOp, rhs: Operand, name: &'static str) -> Result<()> {
        match rhs {
            Operand::Tensor(t) => apply_in_place(ElementwiseOp::Binary(op).into(), self, true, &[t], name),
            Operand::Scalar(s) => {
                apply_in_place(ElementwiseOp::BinaryScalar { op, scalar: ScalarAttr(s), scalar_first: false }.into(), self, true, &[], name)
            }
        }
    }

    /// Overwrites the values with `src` (same dtype, broadcast to `self`'s shape).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2], DType::F32);
    /// x.assign_(&Tensor::scalar(5.0f32))?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![5.0, 5.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn assign_(&self, src: &Tensor) -> Result<()> {
        if src.0.shape != self.0.shape {
            self.known_shape("assign_")?;
        }
        apply_in_place(LayoutOp::BroadcastTo(self.0.shape.clone()).into(), self, false, &[src], "assign_").map_err(|e| match e {
            // Name the method the user called, not the op it runs on.
            Error::ShapeMismatch { op: "broadcast_to", lhs, rhs, .. } => {
                Error::shapes("assign_", &rhs, &lhs, format!("the source {lhs} must broadcast to the target's shape {rhs}"))
            }
            e => e,
        })
    }

    /// Sets every value to zero (also where it was inf or NaN, which `mul_(0)` would keep
    /// as NaN). Like `assign_`, it cuts the tensor's autograd history: the zeros depend on
    /// nothing.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![f32::NAN, 2.0], &[2])?;
    /// x.zero_()?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![0.0, 0.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn zero_(&self) -> Result<()> {
        self.known_shape("zero_")?;
        let zero = Tensor::zeros(&[], self.dtype());
        apply_in_place(LayoutOp::BroadcastTo(self.0.shape.clone()).into(), self, false, &[&zero], "zero_")
    }

    /// `assign_` and `zero_` broadcast to the target's shape, which the graph must know:
    /// with a dim unknown in the trace (`reduce_retracing`, `input_signature` with `?`) the
    /// broadcast would have no size to run with (unless the source has the same shape,
    /// unknown dims included: then it gives them).
    fn known_shape(&self, op: &'static str) -> Result<()> {
        if self.0.shape.is_known() {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            op,
            arg: "self",
            reason: format!("its shape {} has dims unknown in this trace; trace it with known dims (a fixed input_signature), or compute the new value out of place", self.0.shape),
        })
    }
}
