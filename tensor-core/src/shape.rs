//! Shapes: a small vector of dims, where a dim may be unknown in a traced graph
//! (relaxed signatures). Concrete tensors always have known dims.

use smallvec::SmallVec;
use std::fmt;

/// The marker for a dim that is unknown while tracing (printed `?`).
pub const UNKNOWN: usize = usize::MAX;

/// The dims of a tensor, outermost first. Up to 4 dims are stored inline.
///
/// ```
/// use tensor_core::prelude::*;
/// let s = Shape::from(&[2, 3][..]);
/// assert_eq!(s.numel(), 6);
/// assert_eq!(s.to_string(), "[2, 3]");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(SmallVec<[usize; 4]>);

impl Shape {
    /// The shape of a 0-d tensor (a scalar).
    pub fn scalar() -> Shape {
        Shape(SmallVec::new())
    }

    /// A shape from its dims.
    pub fn new(dims: &[usize]) -> Shape {
        Shape(SmallVec::from_slice(dims))
    }

    /// The dims as a slice.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// The number of dims.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The number of elements (1 for a scalar). Meaningless if a dim is unknown.
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// True when every dim is known.
    pub fn is_known(&self) -> bool {
        self.0.iter().all(|&d| d != UNKNOWN)
    }

    /// The dim at `axis`.
    pub fn dim(&self, axis: usize) -> usize {
        self.0[axis]
    }

    /// Mutable access to the dims.
    pub fn dims_mut(&mut self) -> &mut SmallVec<[usize; 4]> {
        &mut self.0
    }

    /// The same shape with `dim` inserted at `axis`.
    pub fn inserted(&self, axis: usize, dim: usize) -> Shape {
        let mut s = self.clone();
        s.0.insert(axis, dim);
        s
    }

    /// The same shape with the dim at `axis` removed.
    pub fn removed(&self, axis: usize) -> Shape {
        let mut s = self.clone();
        s.0.remove(axis);
        s
    }

    /// The same shape with the dim at `axis` replaced.
    pub fn with_dim(&self, axis: usize, dim: usize) -> Shape {
        let mut s = self.clone();
        s.0[axis] = dim;
        s
    }

    /// True when `self` could describe a tensor of shape `other`: same rank, equal dims
    /// where `self` knows them.
    pub fn admits(&self, other: &Shape) -> bool {
        self.rank() == other.rank() && self.0.iter().zip(other.dims()).all(|(&a, &b)| a == UNKNOWN || a == b)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, &d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            if d == UNKNOWN {
                f.write_str("?")?;
            } else {
                write!(f, "{d}")?;
            }
        }
        f.write_str("]")
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<&[usize]> for Shape {
    fn from(dims: &[usize]) -> Self {
        Shape::new(dims)
    }
}

impl<const N: usize> From<&[usize; N]> for Shape {
    fn from(dims: &[usize; N]) -> Self {
        Shape::new(dims)
    }
}

impl From<Vec<usize>> for Shape {
    fn from(dims: Vec<usize>) -> Self {
        Shape(SmallVec::from_vec(dims))
    }
}

impl std::ops::Index<usize> for Shape {
    type Output = usize;
    fn index(&self, i: usize) -> &usize {
        &self.0[i]
    }
}

/// The NumPy broadcast of two shapes, or `None` if they do not broadcast.
/// Unknown dims broadcast with anything (the check happens when the graph runs).
///
/// ```
/// # use tensor_core::shape::{broadcast_shapes, Shape};
/// let s = broadcast_shapes(&Shape::new(&[2, 1, 3]), &Shape::new(&[4, 1])).unwrap();
/// assert_eq!(s.dims(), &[2, 4, 3]);
/// ```
pub fn broadcast_shapes(a: &Shape, b: &Shape) -> Option<Shape> {
    let rank = a.rank().max(b.rank());
    let mut out = SmallVec::with_capacity(rank);
    for i in 0..rank {
        let da = dim_from_right(a, rank - i);
        let db = dim_from_right(b, rank - i);
        out.push(broadcast_dim(da, db)?);
    }
    Some(Shape(out))
}

fn dim_from_right(s: &Shape, k: usize) -> usize {
    if k <= s.rank() {
        s.0[s.rank() - k]
    } else {
        1
    }
}

fn broadcast_dim(a: usize, b: usize) -> Option<usize> {
    match (a, b) {
        _ if a == b => Some(a),
        (1, _) => Some(b),
        (_, 1) => Some(a),
        (UNKNOWN, _) => Some(b),
        (_, UNKNOWN) => Some(a),
        _ => None,
    }
}

/// Normalizes a possibly negative axis against `rank`; `None` if out of range.
pub fn normalize_axis(axis: isize, rank: usize) -> Option<usize> {
    let r = rank as isize;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}
