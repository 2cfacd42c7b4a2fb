//! The elementwise op family as a value: which function, with which scalar attributes. The
//! op enum wraps it, and fused programs are lists of it, so kernels need nothing above this
//! layer to run one.

use super::kinds::{op_names, BinaryOp, CmpOp, ScalarAttr, UnaryOp};
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
    op_names! { pub ElementwiseOp {
        Unary(u) => u.name(), u.grad_fn_name();
        Binary(b) => b.name(), b.grad_fn_name();
        BinaryScalar { op, scalar, scalar_first } => op.name(), op.grad_fn_name(), match scalar_first {
            true => format!("lhs={}", scalar.0),
            false => format!("rhs={}", scalar.0),
        };
        Compare(c) => c.name(), "NoBackward";
        CompareScalar { op, scalar } => op.name(), "NoBackward", format!("rhs={}", scalar.0);
        Where => "where", "WhereBackward";
        Clamp { min, max } => "clamp", "ClampBackward", format!("min={} max={}", bound(min), bound(max));
        Cast(d) => "cast", "CastBackward", format!("dtype={d}");
    }}

    /// True when its output can carry a gradient.
    pub(crate) fn is_differentiable(&self) -> bool {
        !matches!(self, ElementwiseOp::Compare(_) | ElementwiseOp::CompareScalar { .. } | ElementwiseOp::Unary(UnaryOp::Not | UnaryOp::Sign))
    }
}

fn bound(s: &Option<ScalarAttr>) -> String {
    s.map_or("none".to_string(), |s| s.0.to_string())
}
