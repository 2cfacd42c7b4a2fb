//! Dims as user code reads them: [`Dim`] and [`Dims`].
//!
//! Eagerly, and in a trace whose shapes are all known, a dim is a plain number. In a trace
//! with relaxed dims (`reduce_retracing`, or `input_signature` with `?`), a relaxed dim is a
//! *symbol* (`n0`, `n1`, … in argument order), and reading it never gives a sentinel:
//!
//! - arithmetic on dims (`n * 2`, `n + 1`, `n / heads`) gives symbolic expressions;
//! - a comparison (`n < 10`, `n == m`, `n % 8 == 0`) gives the answer for the traced call and
//!   records a *guard* on the trace: a later call reuses the trace only when every guard holds
//!   on its dims, else it traces again (the reason names the guard:
//!   `arg x dim 0 = 12 fails n0 < 10`);
//! - converting to `usize` (`usize::from(n)`, `n.into()`, or the `&[usize]` a [`Dims`]
//!   derefs to) specializes: a guard on that exact value.
//!
//! ```
//! use tensor_core::prelude::*;
//! #[graph_fn(reduce_retracing)]
//! fn small_or_large(x: &Tensor) -> Result<Tensor> {
//!     if x.dim(0) < 10 { x.mul(2.0) } else { x.add(10.0) }
//! }
//! for n in [3, 2, 1, 0] {
//!     small_or_large(&Tensor::ones(&[n], DType::F32))?;
//! }
//! let f = tensor_core::function::lookup("small_or_large").unwrap();
//! assert_eq!(f.trace_count(), 2); // [3] exactly, then [n0] guarded by n0 < 10
//! assert_eq!(f.concrete_functions()[1].guards(), ["n0 < 10"]);
//! # Ok::<(), tensor_core::Error>(())
//! ```

mod expr;
pub(crate) mod guard;
mod shape_arg;
pub(crate) mod table;

pub use expr::SymDim;
pub use guard::Guards;
pub use shape_arg::{IntoDims, ShapeArg, SizeAttr};

use guard::{BinOp, Cmp};
use smallvec::SmallVec;
use std::cmp::Ordering;
use std::fmt;
use std::sync::OnceLock;

/// One dim of a tensor: a number, or — in a trace with relaxed dims — a symbolic expression
/// over the relaxed input dims. Compares with `usize` and other dims, does arithmetic with
/// both, converts with `usize::from` (see the [module docs](self) for what each records).
///
/// ```
/// use tensor_core::prelude::*;
/// let x = Tensor::zeros(&[4, 3], DType::F32);
/// let n: Dim = x.dim(0);
/// assert!(n == 4 && n < 10 && n * 2 == 8);
/// let k: usize = n.into();
/// assert_eq!((k, n.to_string()), (4, "4".to_string()));
/// ```
#[derive(Clone, Copy)]
pub struct Dim(Repr);

#[derive(Clone, Copy)]
enum Repr {
    Known(usize),
    /// Expression `expr` of the table of trace `root`; `hint` is its value at the traced call.
    Sym {
        root: u64,
        expr: u32,
        hint: usize,
    },
}

impl Dim {
    pub(crate) fn sym(root: u64, expr: u32, hint: usize) -> Dim {
        Dim(Repr::Sym { root, expr, hint })
    }

    /// True when this dim is a symbol of the trace being made (it varies between the calls
    /// the trace serves).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(!Tensor::zeros(&[4], DType::F32).dim(0).is_symbolic());
    /// ```
    pub fn is_symbolic(&self) -> bool {
        matches!(self.0, Repr::Sym { .. })
    }

    /// The value when it is a plain number.
    pub(crate) fn known(&self) -> Option<usize> {
        match self.0 {
            Repr::Known(d) => Some(d),
            Repr::Sym { .. } => None,
        }
    }

    /// Its expression in the table of trace `root`, if it is one.
    pub(crate) fn sym_of(&self, root: u64) -> Option<u32> {
        match self.0 {
            Repr::Sym { root: r, expr, .. } if r == root => Some(expr),
            _ => None,
        }
    }

    /// The value at the traced call (the value itself for a plain number).
    fn hint(&self) -> usize {
        match self.0 {
            Repr::Known(d) => d,
            Repr::Sym { hint, .. } => hint,
        }
    }

    fn binop(self, op: BinOp, other: Dim, name: &str) -> Dim {
        let Some(hint) = op.apply(self.hint(), other.hint()) else {
            panic!("dim arithmetic: {} {name} {} overflows or divides by zero", self, other)
        };
        if !self.is_symbolic() && !other.is_symbolic() {
            return Dim(Repr::Known(hint));
        }
        table::binop(op, self, other, hint).unwrap_or(Dim(Repr::Known(hint)))
    }

    fn compare(self, cmp: Cmp, other: Dim) -> bool {
        let holds = cmp.holds(self.hint(), other.hint());
        if self.is_symbolic() || other.is_symbolic() {
            let _ = table::compare(cmp, self, other, holds);
        }
        holds
    }
}

impl From<usize> for Dim {
    fn from(d: usize) -> Dim {
        Dim(Repr::Known(d))
    }
}

/// Specializes a symbolic dim: the trace is guarded on this exact value.
impl From<Dim> for usize {
    fn from(d: Dim) -> usize {
        let hint = d.hint();
        if d.is_symbolic() {
            d.compare(Cmp::Eq, Dim::from(hint));
        }
        hint
    }
}

impl PartialEq<usize> for Dim {
    fn eq(&self, other: &usize) -> bool {
        self.compare(Cmp::Eq, Dim::from(*other))
    }
    #[allow(clippy::partialeq_ne_impl)] // `!=` records its own guard text
    fn ne(&self, other: &usize) -> bool {
        self.compare(Cmp::Ne, Dim::from(*other))
    }
}

impl PartialEq for Dim {
    fn eq(&self, other: &Dim) -> bool {
        self.compare(Cmp::Eq, *other)
    }
    #[allow(clippy::partialeq_ne_impl)]
    fn ne(&self, other: &Dim) -> bool {
        self.compare(Cmp::Ne, *other)
    }
}

macro_rules! ordering {
    ($rhs:ty, $conv:expr) => {
        impl PartialOrd<$rhs> for Dim {
            fn partial_cmp(&self, other: &$rhs) -> Option<Ordering> {
                let other: Dim = $conv(*other);
                Some(match (self.compare(Cmp::Lt, other), self.compare(Cmp::Eq, other)) {
                    (true, _) => Ordering::Less,
                    (false, true) => Ordering::Equal,
                    (false, false) => Ordering::Greater,
                })
            }
            fn lt(&self, other: &$rhs) -> bool {
                self.compare(Cmp::Lt, $conv(*other))
            }
            fn le(&self, other: &$rhs) -> bool {
                self.compare(Cmp::Le, $conv(*other))
            }
            fn gt(&self, other: &$rhs) -> bool {
                self.compare(Cmp::Gt, $conv(*other))
            }
            fn ge(&self, other: &$rhs) -> bool {
                self.compare(Cmp::Ge, $conv(*other))
            }
        }
    };
}
ordering!(usize, Dim::from);
ordering!(Dim, |d: Dim| d);

macro_rules! arithmetic {
    ($($trait:ident $method:ident $op:ident $sym:literal),*) => {$(
        impl std::ops::$trait<Dim> for Dim {
            type Output = Dim;
            fn $method(self, rhs: Dim) -> Dim {
                self.binop(BinOp::$op, rhs, $sym)
            }
        }
        impl std::ops::$trait<usize> for Dim {
            type Output = Dim;
            fn $method(self, rhs: usize) -> Dim {
                self.binop(BinOp::$op, Dim::from(rhs), $sym)
            }
        }
        impl std::ops::$trait<Dim> for usize {
            type Output = Dim;
            fn $method(self, rhs: Dim) -> Dim {
                Dim::from(self).binop(BinOp::$op, rhs, $sym)
            }
        }
    )*};
}
arithmetic!(Add add Add "+", Sub sub Sub "-", Mul mul Mul "*", Div div Div "/", Rem rem Rem "%");

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Repr::Known(d) => write!(f, "{d}"),
            Repr::Sym { hint, .. } => match table::text(*self) {
                Some(text) => f.write_str(&text),
                None => write!(f, "{hint}"),
            },
        }
    }
}

impl fmt::Debug for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The dims of a tensor ([`Tensor::dims`](crate::Tensor::dims)): indexing gives a [`Dim`]
/// (so `x.dims()[0] < 10` records a guard in a relaxed trace); everything else reads it as
/// the `&[usize]` it derefs to (`len`, `iter`, `to_vec`, comparison with `vec![..]` or
/// `&[..]`), which specializes its symbolic dims (a guard on each exact value).
///
/// ```
/// use tensor_core::prelude::*;
/// let x = Tensor::zeros(&[2, 3], DType::F32);
/// assert_eq!(x.dims(), vec![2, 3]);
/// assert_eq!(x.dims(), &[2, 3]);
/// assert_eq!((x.dims().len(), x.dims().to_vec()), (2, vec![2usize, 3]));
/// assert!(x.dims()[1] == 3);
/// ```
pub struct Dims {
    dims: SmallVec<[Dim; 4]>,
    plain: OnceLock<SmallVec<[usize; 4]>>,
}

impl Dims {
    /// Known dims.
    pub(crate) fn known(dims: &[usize]) -> Dims {
        let plain = OnceLock::new();
        let _ = plain.set(SmallVec::from_slice(dims));
        Dims { dims: dims.iter().map(|&d| Dim::from(d)).collect(), plain }
    }

    pub(crate) fn from_dims(dims: SmallVec<[Dim; 4]>) -> Dims {
        Dims { dims, plain: OnceLock::new() }
    }

    /// The dims as numbers (which specializes symbolic ones).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Tensor::zeros(&[2, 3], DType::F32).dims().as_slice(), &[2, 3]);
    /// ```
    pub fn as_slice(&self) -> &[usize] {
        self
    }

    /// The dims as [`Dim`]s.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let d = Tensor::zeros(&[2, 3], DType::F32).dims();
    /// assert!(d.as_dims()[0] == 2);
    /// ```
    pub fn as_dims(&self) -> &[Dim] {
        &self.dims
    }
}

impl std::ops::Deref for Dims {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        self.plain.get_or_init(|| self.dims.iter().map(|&d| usize::from(d)).collect())
    }
}

impl std::ops::Index<usize> for Dims {
    type Output = Dim;
    fn index(&self, i: usize) -> &Dim {
        &self.dims[i]
    }
}

impl fmt::Debug for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.dims.iter()).finish()
    }
}

impl fmt::Display for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl Clone for Dims {
    fn clone(&self) -> Dims {
        Dims { dims: self.dims.clone(), plain: self.plain.clone() }
    }
}

impl PartialEq for Dims {
    fn eq(&self, other: &Dims) -> bool {
        self.dims.len() == other.dims.len() && self.dims.iter().zip(&other.dims).all(|(a, b)| a == b)
    }
}

impl Eq for Dims {}

/// Hashes the dims as numbers (which specializes symbolic ones).
impl std::hash::Hash for Dims {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (**self).hash(h)
    }
}

macro_rules! dims_eq {
    ($($t:ty $(, $n:ident)?);*) => {$(
        impl<$(const $n: usize)?> PartialEq<$t> for Dims {
            fn eq(&self, other: &$t) -> bool {
                let other: &[usize] = &other[..];
                self.dims.len() == other.len() && self.dims.iter().zip(other).all(|(a, b)| a == b)
            }
        }
    )*};
}
dims_eq!(Vec<usize>; [usize]; &[usize]; [usize; N], N; &[usize; N], N);

macro_rules! eq_dims {
    ($($t:ty $(, $n:ident)?);*) => {$(
        impl<$(const $n: usize)?> PartialEq<Dims> for $t {
            fn eq(&self, other: &Dims) -> bool {
                other == self
            }
        }
    )*};
}
eq_dims!(Vec<usize>; [usize; N], N);

impl From<Dims> for Vec<usize> {
    fn from(d: Dims) -> Vec<usize> {
        d.to_vec()
    }
}

impl<'a> IntoIterator for &'a Dims {
    type Item = &'a usize;
    type IntoIter = std::slice::Iter<'a, usize>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl IntoIterator for Dims {
    type Item = usize;
    type IntoIter = std::vec::IntoIter<usize>;
    #[allow(clippy::unnecessary_to_owned)] // the dims outlive `self`: an owned copy
    fn into_iter(self) -> Self::IntoIter {
        self.to_vec().into_iter()
    }
}
