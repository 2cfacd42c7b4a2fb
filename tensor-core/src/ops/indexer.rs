//! `x.i((0, .., 2..4))`: NumPy's and PyTorch's `x[0, :, 2:4]` as one call (Rust's `Index`
//! trait must return a reference, not a new tensor), in the spirit of candle's `IndexOp`.
//!
//! Each entry of the index is an integer, which selects one entry of its axis and removes the
//! axis ([`Tensor::select`]), or a range, which keeps the axis and narrows it
//! ([`Tensor::narrow`]). Built from those ops, an index differentiates, traces and exports as
//! they do.

use crate::error::{Error, Result};
use crate::shape::UNKNOWN;
use crate::tensor::Tensor;
use std::ops::{Bound, Range, RangeBounds, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// One entry of an index for [`Tensor::i`]: made from an integer (`Select`) or a range
/// (`Narrow`). Negative values count from the end of the axis, as in Python.
///
/// ```
/// use tensor_core::ops::Indexer;
/// use std::ops::Bound;
/// assert_eq!(Indexer::from(-1), Indexer::Select(-1));
/// assert_eq!(Indexer::from(2..4), Indexer::Narrow(Bound::Included(2), Bound::Excluded(4)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexer {
    /// One entry of the axis; the axis is removed.
    Select(isize),
    /// The entries between the bounds; the axis stays.
    Narrow(Bound<isize>, Bound<isize>),
}

macro_rules! indexer_from_ints {
    ($($t:ty),*) => {$(
        impl From<$t> for Indexer {
            fn from(i: $t) -> Indexer {
                Indexer::Select(i as isize)
            }
        }
        impl From<Range<$t>> for Indexer {
            fn from(r: Range<$t>) -> Indexer {
                narrow(&r)
            }
        }
        impl From<RangeFrom<$t>> for Indexer {
            fn from(r: RangeFrom<$t>) -> Indexer {
                narrow(&r)
            }
        }
        impl From<RangeTo<$t>> for Indexer {
            fn from(r: RangeTo<$t>) -> Indexer {
                narrow(&r)
            }
        }
        impl From<RangeInclusive<$t>> for Indexer {
            fn from(r: RangeInclusive<$t>) -> Indexer {
                narrow(&r)
            }
        }
        impl From<RangeToInclusive<$t>> for Indexer {
            fn from(r: RangeToInclusive<$t>) -> Indexer {
                narrow(&r)
            }
        }
    )*};
}

indexer_from_ints!(usize, isize, i32, i64);

impl From<RangeFull> for Indexer {
    fn from(_: RangeFull) -> Indexer {
        Indexer::Narrow(Bound::Unbounded, Bound::Unbounded)
    }
}

/// The `Narrow` of a range of any integer type.
fn narrow<T: Copy + TryInto<isize>>(r: &impl RangeBounds<T>) -> Indexer {
    let to = |b: Bound<&T>| match b {
        // An index past isize::MAX is out of range of any axis anyway.
        Bound::Included(&v) => Bound::Included(v.try_into().unwrap_or(isize::MAX)),
        Bound::Excluded(&v) => Bound::Excluded(v.try_into().unwrap_or(isize::MAX)),
        Bound::Unbounded => Bound::Unbounded,
    };
    Indexer::Narrow(to(r.start_bound()), to(r.end_bound()))
}

/// What [`Tensor::i`] takes: one [`Indexer`] (an integer or a range) or a tuple of up to six,
/// one per leading axis.
pub trait Indices {
    /// The entries, one per leading axis.
    fn indexers(self) -> Vec<Indexer>;
}

impl<T: Into<Indexer>> Indices for T {
    fn indexers(self) -> Vec<Indexer> {
        vec![self.into()]
    }
}

macro_rules! indices_for_tuples {
    ($(($($name:ident),+))*) => {$(
        impl<$($name: Into<Indexer>),+> Indices for ($($name,)+) {
            #[allow(non_snake_case)]
            fn indexers(self) -> Vec<Indexer> {
                let ($($name,)+) = self;
                vec![$($name.into()),+]
            }
        }
    )*};
}

indices_for_tuples! {
    (A)
    (A, B)
    (A, B, C)
    (A, B, C, D)
    (A, B, C, D, E)
    (A, B, C, D, E, F)
}

impl Tensor {
    /// Indexes the leading axes, as `x[0, :, 2:4]` does in NumPy: an integer selects an entry
    /// and removes its axis (negative counts from the end), a range (`a..b`, `a..`, `..b`,
    /// `a..=b`, `..`) narrows its axis. Axes after the last entry are kept whole.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::arange(0i64, 24).reshape([2, 3, 4])?;
    /// let y = x.i((1, .., 2..4))?; // x[1, :, 2:4]
    /// assert_eq!((y.dims().to_vec(), y.to_vec::<i64>()?), (vec![3, 2], vec![14, 15, 18, 19, 22, 23]));
    /// assert_eq!(x.i(-1)?.dims(), vec![3, 4]); // x[-1]
    /// assert_eq!(x.i((.., 1..))?.dims(), vec![2, 2, 4]); // x[:, 1:]
    /// assert!(x.i((0, 3)).is_err()); // axis 1 has length 3
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn i(&self, index: impl Indices) -> Result<Tensor> {
        let entries = index.indexers();
        let shape = self.raw_shape();
        if entries.len() > shape.rank() {
            let reason = format!(
                "{} entries for a tensor of rank {} (shape {shape}); give at most {}, one per axis",
                entries.len(),
                shape.rank(),
                shape.rank()
            );
            return Err(Error::invalid("i", "index", reason));
        }
        // `axis` counts the input's axes (for messages), `at` the result's (selects remove).
        let mut out = self.clone();
        let mut at = 0;
        for (axis, entry) in entries.into_iter().enumerate() {
            let len = shape[axis];
            match entry {
                Indexer::Select(i) => out = out.select(at as isize, position(axis, i, len)?)?,
                Indexer::Narrow(Bound::Unbounded, Bound::Unbounded) => at += 1,
                Indexer::Narrow(start, end) => {
                    let (s, e) = span(axis, start, end, len)?;
                    out = out.narrow(at as isize, s, e - s)?;
                    at += 1;
                }
            }
        }
        Ok(out)
    }
}

/// The entry `i` of an axis of length `len` (negative from the end), checked.
fn position(axis: usize, i: isize, len: usize) -> Result<usize> {
    if len == UNKNOWN {
        return if i >= 0 { Ok(i as usize) } else { Err(unknown_len(axis)) };
    }
    let p = if i < 0 { i + len as isize } else { i };
    if p < 0 || p >= len as isize {
        let reason = format!("{i} is out of range for axis {axis} of length {len}; use an index in -{len}..{len}");
        return Err(Error::invalid("i", "index", reason));
    }
    Ok(p as usize)
}

/// The start and end of a range over an axis of length `len`, checked.
fn span(axis: usize, start: Bound<isize>, end: Bound<isize>, len: usize) -> Result<(usize, usize)> {
    let resolve = |v: isize, inclusive: bool| -> Result<isize> {
        let v = v + inclusive as isize;
        match (v < 0, len == UNKNOWN) {
            (true, true) => Err(unknown_len(axis)),
            (true, false) => Ok(v + len as isize),
            (false, _) => Ok(v),
        }
    };
    let s = match start {
        Bound::Included(v) => resolve(v, false)?,
        Bound::Excluded(v) => resolve(v, true)?,
        Bound::Unbounded => 0,
    };
    let e = match end {
        Bound::Included(v) => resolve(v, true)?,
        Bound::Excluded(v) => resolve(v, false)?,
        Bound::Unbounded if len == UNKNOWN => return Err(unknown_len(axis)),
        Bound::Unbounded => len as isize,
    };
    let fits = s >= 0 && s <= e && (len == UNKNOWN || e <= len as isize);
    if !fits {
        let len = if len == UNKNOWN { "?".to_string() } else { len.to_string() };
        let reason = format!("the range {} does not fit axis {axis} of length {len}; use bounds with 0 <= start <= end <= {len}", show(start, end));
        return Err(Error::invalid("i", "index", reason));
    }
    Ok((s as usize, e as usize))
}

/// A range as the user wrote it (`2..`, `..=4`).
fn show(start: Bound<isize>, end: Bound<isize>) -> String {
    let s = match start {
        Bound::Included(v) => v.to_string(),
        Bound::Excluded(v) => (v + 1).to_string(),
        Bound::Unbounded => String::new(),
    };
    let e = match end {
        Bound::Included(v) => format!("={v}"),
        Bound::Excluded(v) => v.to_string(),
        Bound::Unbounded => String::new(),
    };
    format!("{s}..{e}")
}

fn unknown_len(axis: usize) -> Error {
    let reason = format!("axis {axis} has a length unknown while tracing: count from its start (a non-negative index, a range with an end)");
    Error::invalid("i", "index", reason)
}
