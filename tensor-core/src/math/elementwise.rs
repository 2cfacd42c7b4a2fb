//! The elementwise op family as a value: which function, with which scalar attributes. The
//! op enum wraps it, and fused programs are lists of it, so kernels need nothing above this
//! layer to run one.

use super::kinds::{BinaryOp, CmpOp, ScalarAttr, UnaryOp};
use crate::dtype::DType;

/// An elementwise op: computed per output element from the same position of its (broadcast)
/// inputs. Inputs are listed per variant.
///
/// ```
/// use tensor_core::ops::{ElementwiseOp, UnaryOp};
/// assert_eq!(ElementwiseOp::Unary(UnaryOp::Exp).name(), "exp");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ElementwiseOp {
    /// (x)
    Unary(UnaryOp),
    /// (a, b)
    Binary(BinaryOp),
    /// (x): `x op scalar`, or `scalar op x` when `scalar_first`.
    BinaryScalar {
        /// The function.
        op: BinaryOp,
        /// The Rust scalar, in the tensor's dtype when the op runs.
        scalar: ScalarAttr,
        /// True for `scalar op x`.
        scalar_first: bool,
    },
    /// (a, b) -> bool
    Compare(CmpOp),
    /// (x) -> bool: `x op scalar`.
    CompareScalar {
        /// The comparison.
        op: CmpOp,
        /// The right-hand side.
        scalar: ScalarAttr,
    },
    /// (cond, a, b)
    Where,
    /// (x)
    Clamp {
        /// The lower bound, if any.
        min: Option<ScalarAttr>,
        /// The upper bound, if any.
        max: Option<ScalarAttr>,
    },
    /// (x)
    Cast(DType),
}

impl ElementwiseOp {
    /// The op's name in graph text.
    ///
    /// ```
    /// use tensor_core::ops::{BinaryOp, ElementwiseOp};
    /// assert_eq!(ElementwiseOp::Binary(BinaryOp::Add).name(), "add");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            ElementwiseOp::Unary(u) => u.name(),
            ElementwiseOp::Binary(b) | ElementwiseOp::BinaryScalar { op: b, .. } => b.name(),
            ElementwiseOp::Compare(c) | ElementwiseOp::CompareScalar { op: c, .. } => c.name(),
            ElementwiseOp::Where => "where",
            ElementwiseOp::Clamp { .. } => "clamp",
            ElementwiseOp::Cast(_) => "cast",
        }
    }

    /// The PyTorch-style name of its backward node.
    pub(crate) fn grad_fn_name(&self) -> &'static str {
        match self {
            ElementwiseOp::Unary(u) => u.grad_fn_name(),
            ElementwiseOp::Binary(b) | ElementwiseOp::BinaryScalar { op: b, .. } => b.grad_fn_name(),
            ElementwiseOp::Compare(_) | ElementwiseOp::CompareScalar { .. } => "NoBackward",
            ElementwiseOp::Where => "WhereBackward",
            ElementwiseOp::Clamp { .. } => "ClampBackward",
            ElementwiseOp::Cast(_) => "CastBackward",
        }
    }

    /// The attributes as graph text (empty when there are none).
    pub(crate) fn attrs(&self) -> String {
        match self {
            ElementwiseOp::BinaryScalar { scalar, scalar_first: true, .. } => format!("lhs={}", scalar.0),
            ElementwiseOp::BinaryScalar { scalar, .. } | ElementwiseOp::CompareScalar { scalar, .. } => format!("rhs={}", scalar.0),
            ElementwiseOp::Clamp { min, max } => format!("min={} max={}", bound(min), bound(max)),
            ElementwiseOp::Cast(d) => format!("dtype={d}"),
            _ => String::new(),
        }
    }

    /// True when its output can carry a gradient.
    pub(crate) fn is_differentiable(&self) -> bool {
        !matches!(self, ElementwiseOp::Compare(_) | ElementwiseOp::CompareScalar { .. } | ElementwiseOp::Unary(UnaryOp::Not | UnaryOp::Sign))
    }
}

fn bound(s: &Option<ScalarAttr>) -> String {
    s.map_or("none".to_string(), |s| s.0.to_string())
}
