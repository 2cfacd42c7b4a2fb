//! The dims a shape-taking op accepts ([`IntoDims`]): plain numbers, as always, or
//! [`Dim`]s, which in a relaxed trace may be symbolic — the op then computes its shape when
//! the graph runs, from the call's argument dims.

use super::{Dim, Dims, SymDim};
use crate::shape::Shape;
use smallvec::SmallVec;
use std::fmt;

/// Dims as an op reads them: borrowed or inline numbers (no allocation for plain shapes),
/// or [`Dim`]s of which at least one is symbolic.
#[derive(Clone, Debug)]
pub enum ShapeArg<'a> {
    /// Plain numbers, borrowed from the caller.
    Borrowed(&'a [usize]),
    /// Plain numbers, converted from known [`Dim`]s.
    Inline(SmallVec<[usize; 6]>),
    /// Dims, at least one of them symbolic.
    Symbolic(SmallVec<[Dim; 4]>),
}

impl ShapeArg<'_> {
    /// The dims as numbers when none is symbolic.
    pub(crate) fn known(&self) -> Option<&[usize]> {
        match self {
            ShapeArg::Borrowed(d) => Some(d),
            ShapeArg::Inline(d) => Some(d),
            ShapeArg::Symbolic(_) => None,
        }
    }

    /// The dims as numbers, symbolic ones specialized (a guard on each value).
    pub(crate) fn specialized(&self) -> SmallVec<[usize; 6]> {
        match self {
            ShapeArg::Symbolic(d) => d.iter().map(|&d| usize::from(d)).collect(),
            known => SmallVec::from_slice(known.known().expect("not symbolic")),
        }
    }
}

/// What takes a shape: `&[usize]` (`&[2, 3]`), `&Vec<usize>`, `&Shape`, `&Dims`, and
/// `[Dim; N]`, `&[Dim]`, `Vec<Dim>` (write a literal as `4.into()` or `Dim::from(4)` beside a
/// `Dim`).
/// Existing `&[2, 3]` callers are unchanged. In a relaxed trace a symbolic [`Dim`] makes the
/// op compute its shape at run time from the call's argument dims (see [`crate::dim`]).
///
/// ```
/// use tensor_core::prelude::*;
/// let x = Tensor::zeros(&[2, 3], DType::F32);
/// let n = x.dim(0);
/// assert_eq!(Tensor::ones([n, 4.into()], DType::F32).dims(), vec![2, 4]);
/// assert_eq!(Tensor::zeros(&x.dims(), DType::F32).dims(), vec![2, 3]);
/// assert_eq!(Tensor::full(&vec![3usize], 1.5, DType::F64).to_vec::<f64>()?, vec![1.5; 3]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait IntoDims {
    /// The dims, borrowed where they can be.
    fn shape_arg(&self) -> ShapeArg<'_>;
}

impl IntoDims for &[usize] {
    fn shape_arg(&self) -> ShapeArg<'_> {
        ShapeArg::Borrowed(self)
    }
}

impl<const N: usize> IntoDims for &[usize; N] {
    fn shape_arg(&self) -> ShapeArg<'_> {
        ShapeArg::Borrowed(&self[..])
    }
}

impl IntoDims for &Vec<usize> {
    fn shape_arg(&self) -> ShapeArg<'_> {
        ShapeArg::Borrowed(self)
    }
}

impl IntoDims for &Shape {
    fn shape_arg(&self) -> ShapeArg<'_> {
        ShapeArg::Borrowed(self.dims())
    }
}

/// `dims` as numbers when all are known, else kept as dims.
fn of_dims<'a>(dims: &[Dim]) -> ShapeArg<'a> {
    match dims.iter().any(Dim::is_symbolic) {
        true => ShapeArg::Symbolic(SmallVec::from_slice(dims)),
        false => ShapeArg::Inline(dims.iter().map(|d| d.known().expect("not symbolic")).collect()),
    }
}

impl IntoDims for &[Dim] {
    fn shape_arg(&self) -> ShapeArg<'_> {
        of_dims(self)
    }
}

/// Arrays of [`Dim`]s of 1 to 8 dims, by value or borrowed (an empty `&[]` is a
/// `[usize; 0]`: a scalar's shape).
macro_rules! dim_arrays {
    ($($n:literal)*) => {$(
        impl IntoDims for [Dim; $n] {
            fn shape_arg(&self) -> ShapeArg<'_> {
                of_dims(&self[..])
            }
        }

        impl IntoDims for &[Dim; $n] {
            fn shape_arg(&self) -> ShapeArg<'_> {
                of_dims(&self[..])
            }
        }
    )*};
}
dim_arrays!(1 2 3 4 5 6 7 8);

impl IntoDims for Vec<Dim> {
    fn shape_arg(&self) -> ShapeArg<'_> {
        of_dims(&self[..])
    }
}

impl IntoDims for &Dims {
    fn shape_arg(&self) -> ShapeArg<'_> {
        of_dims(self.as_dims())
    }
}

/// A dim attribute of an op whose shape may be computed at run time: a number, a reshape's
/// `-1`, or an expression of the call's argument dims.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum SizeAttr {
    /// A number.
    Fixed(usize),
    /// A reshape dim inferred from the element count (`-1`).
    Inferred,
    /// Computed from the call's argument dims.
    Sym(SymDim),
}

impl SizeAttr {
    /// The number, when it is one.
    pub(crate) fn fixed(&self) -> Option<usize> {
        match self {
            SizeAttr::Fixed(d) => Some(*d),
            _ => None,
        }
    }

    /// The attribute for a call whose argument dims `dim(slot, axis)` gives.
    pub(crate) fn at(&self, dim: &dyn Fn(usize, usize) -> Option<usize>) -> Result<SizeAttr, String> {
        match self {
            SizeAttr::Sym(e) => {
                e.eval(dim).map(SizeAttr::Fixed).ok_or_else(|| format!("the dim {e} has no value for this call (an underflow or a division by 0)"))
            }
            other => Ok(other.clone()),
        }
    }
}

impl fmt::Display for SizeAttr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeAttr::Fixed(d) => write!(f, "{d}"),
            SizeAttr::Inferred => f.write_str("-1"),
            SizeAttr::Sym(e) => write!(f, "{e}"),
        }
    }
}

impl fmt::Debug for SizeAttr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
