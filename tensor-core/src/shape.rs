//! Shapes: a small vector of dims, where a dim may be unknown in a traced graph
//! (relaxed signatures), or the rank itself may be (a signature relaxed across calls of
//! different ranks). Concrete tensors always have known dims.

use smallvec::SmallVec;
use std::fmt;

/// The marker for a dim that is unknown while tracing (printed `?`).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::shape::UNKNOWN;
/// let s = Shape::new(&[UNKNOWN, 784]);
/// assert_eq!(s.to_string(), "[?, 784]");
/// assert!(!s.is_known());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub const UNKNOWN: usize = usize::MAX;

/// The one dim of a shape whose rank is unknown while tracing ([`Shape::unknown_rank`],
/// printed `[*]`): a trace under `reduce_retracing` that serves tensors of every rank.
///
/// ```
/// use tensor_core::prelude::*;
/// let s = Shape::unknown_rank();
/// assert_eq!(s.to_string(), "[*]");
/// assert!(s.is_unknown_rank() && !s.is_known());
/// assert!(s.admits(&Shape::scalar()) && s.admits(&Shape::new(&[2, 3])));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub const UNKNOWN_RANK: usize = usize::MAX - 1;

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
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!((Shape::scalar().rank(), Shape::scalar().numel()), (0, 1));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn scalar() -> Shape {
        Shape(SmallVec::new())
    }

    /// The shape of a traced value whose rank is unknown (see [`UNKNOWN_RANK`]). Its
    /// `rank()` and `dims()` describe nothing; ask [`Shape::is_unknown_rank`].
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(Shape::unknown_rank().is_unknown_rank());
    /// assert!(!Shape::new(&[2]).is_unknown_rank());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn unknown_rank() -> Shape {
        Shape(SmallVec::from_slice(&[UNKNOWN_RANK]))
    }

    /// True for the shape of a traced value whose rank is unknown.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(!Shape::scalar().is_unknown_rank());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_unknown_rank(&self) -> bool {
        self.0.as_slice() == [UNKNOWN_RANK]
    }

    /// A shape from its dims.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let s = Shape::new(&[2, 3]);
    /// assert_eq!(s, Tensor::zeros(&[2, 3], DType::F32).shape());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(dims: &[usize]) -> Shape {
        Shape(SmallVec::from_slice(dims))
    }

    /// The dims as a slice.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Shape::new(&[2, 3]).dims(), &[2, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// The number of dims.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Shape::new(&[2, 3, 4]).rank(), 3);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The number of elements (1 for a scalar). Meaningless if a dim is unknown.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Shape::new(&[2, 3, 4]).numel(), 24);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// True when the rank and every dim are known.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(Shape::new(&[2]).is_known());
    /// assert!(!Shape::new(&[tensor_core::shape::UNKNOWN]).is_known());
    /// assert!(!Shape::unknown_rank().is_known());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_known(&self) -> bool {
        self.0.iter().all(|&d| d < UNKNOWN_RANK)
    }

    /// The dim at `axis`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Shape::new(&[2, 3]).dim(1), 3);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn dim(&self, axis: usize) -> usize {
        self.0[axis]
    }

    /// Mutable access to the dims.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let mut s = Shape::new(&[2, 3]);
    /// s.dims_mut()[0] = 5;
    /// assert_eq!(s.dims(), &[5, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn dims_mut(&mut self) -> &mut SmallVec<[usize; 4]> {
        &mut self.0
    }

    /// The same shape with `dim` inserted at `axis`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Shape::new(&[2, 3]).inserted(1, 1).dims(), &[2, 1, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn inserted(&self, axis: usize, dim: usize) -> Shape {
        let mut s = self.clone();
        s.0.insert(axis, dim);
        s
    }

    /// The same shape with the dim at `axis` removed.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Shape::new(&[2, 1, 3]).removed(1).dims(), &[2, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn removed(&self, axis: usize) -> Shape {
        let mut s = self.clone();
        s.0.remove(axis);
        s
    }

    /// The same shape with the dim at `axis` replaced.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Shape::new(&[2, 3]).with_dim(0, 7).dims(), &[7, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn with_dim(&self, axis: usize, dim: usize) -> Shape {
        let mut s = self.clone();
        s.0[axis] = dim;
        s
    }

    /// True when `self` could describe a tensor of shape `other`: any shape if `self`'s rank
    /// is unknown, else the same rank and equal dims where `self` knows them.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::shape::UNKNOWN;
    /// let relaxed = Shape::new(&[UNKNOWN, 3]);
    /// assert!(relaxed.admits(&Shape::new(&[8, 3])));
    /// assert!(!relaxed.admits(&Shape::new(&[8, 4])));
    /// assert!(Shape::unknown_rank().admits(&relaxed));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn admits(&self, other: &Shape) -> bool {
        if self.is_unknown_rank() {
            return true;
        }
        self.rank() == other.rank() && self.0.iter().zip(other.dims()).all(|(&a, &b)| a == UNKNOWN || a == b)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_unknown_rank() {
            return f.write_str("[*]");
        }
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
/// Unknown dims broadcast with anything (the check happens when the graph runs); with an
/// unknown rank the result's rank is unknown too.
///
/// ```
/// # use tensor_core::shape::{broadcast_shapes, Shape};
/// let s = broadcast_shapes(&Shape::new(&[2, 1, 3]), &Shape::new(&[4, 1])).unwrap();
/// assert_eq!(s.dims(), &[2, 4, 3]);
/// assert!(broadcast_shapes(&s, &Shape::unknown_rank()).unwrap().is_unknown_rank());
/// ```
pub fn broadcast_shapes(a: &Shape, b: &Shape) -> Option<Shape> {
    if a.is_unknown_rank() || b.is_unknown_rank() {
        return Some(Shape::unknown_rank());
    }
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
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::shape::normalize_axis;
/// assert_eq!(normalize_axis(-1, 3), Some(2));
/// assert_eq!(normalize_axis(3, 3), None);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn normalize_axis(axis: isize, rank: usize) -> Option<usize> {
    let r = rank as isize;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}
