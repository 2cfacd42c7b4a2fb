//! `GraphOutput`: what a traced closure may return — a `#[graph_fn]` body, a `cond` branch, a
//! `while_loop` body. A trace keeps the returned value's structure; later calls (or the node's
//! outputs) rebuild it around the graph's output tensors. `GraphReturn` adds `Result<T, E>` on
//! top, for a `#[graph_fn]`: an `Err` from the body passes through untouched, and the
//! runtime's own errors (a signature mismatch, too many traces) arrive as `E::from(error)`.
//! Both live with the tracer, below control flow and the function layer, which both use them.

use crate::error::Error;
use crate::tensor::Tensor;

/// A value made of tensors that a graph call can rebuild.
///
/// ```
/// use tensor_core::prelude::*;
/// // Tuples, Vecs and Options of tensors come back with their structure.
/// #[graph_fn]
/// fn split(x: &Tensor) -> (Tensor, Vec<Tensor>, Option<Tensor>) {
///     (x.clone(), vec![x.neg().unwrap(); 2], None)
/// }
/// let (a, v, none) = split(&Tensor::ones(&[2], DType::F32));
/// assert_eq!((a.dims().to_vec(), v.len(), none.is_none()), (vec![2], 2, true));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a #[graph_fn]",
    label = "this return type does not implement `GraphOutput`",
    note = "return a Tensor, (), a tuple, Vec or Option of these, or a Result of one of them"
)]
pub trait GraphOutput: Sized {
    /// What is kept of a traced value to rebuild others like it.
    type Structure: Send + Sync + 'static;
    /// Moves the tensors into `leaves`, returning the structure.
    fn into_parts(self, leaves: &mut Vec<Tensor>) -> Self::Structure;
    /// Rebuilds a value from the structure and the next tensors of `leaves`.
    fn from_parts(structure: &Self::Structure, leaves: &mut impl Iterator<Item = Tensor>) -> Self;
}

impl GraphOutput for Tensor {
    type Structure = ();
    fn into_parts(self, leaves: &mut Vec<Tensor>) {
        leaves.push(self);
    }
    fn from_parts(_: &(), leaves: &mut impl Iterator<Item = Tensor>) -> Self {
        leaves.next().expect("one graph output per tensor")
    }
}

impl GraphOutput for () {
    type Structure = ();
    fn into_parts(self, _: &mut Vec<Tensor>) {}
    fn from_parts(_: &(), _: &mut impl Iterator<Item = Tensor>) {}
}

impl<T: GraphOutput> GraphOutput for Vec<T> {
    type Structure = Vec<T::Structure>;
    fn into_parts(self, leaves: &mut Vec<Tensor>) -> Self::Structure {
        self.into_iter().map(|x| x.into_parts(leaves)).collect()
    }
    fn from_parts(s: &Self::Structure, leaves: &mut impl Iterator<Item = Tensor>) -> Self {
        s.iter().map(|x| T::from_parts(x, leaves)).collect()
    }
}

impl<T: GraphOutput> GraphOutput for Option<T> {
    type Structure = Option<T::Structure>;
    fn into_parts(self, leaves: &mut Vec<Tensor>) -> Self::Structure {
        self.map(|x| x.into_parts(leaves))
    }
    fn from_parts(s: &Self::Structure, leaves: &mut impl Iterator<Item = Tensor>) -> Self {
        s.as_ref().map(|x| T::from_parts(x, leaves))
    }
}

macro_rules! tuple_outputs {
    ($(($($name:ident),+)),*) => {$(
        impl<$($name: GraphOutput),+> GraphOutput for ($($name,)+) {
            type Structure = ($($name::Structure,)+);
            #[allow(non_snake_case)]
            fn into_parts(self, leaves: &mut Vec<Tensor>) -> Self::Structure {
                let ($($name,)+) = self;
                ($($name.into_parts(leaves),)+)
            }
            #[allow(non_snake_case)]
            fn from_parts(s: &Self::Structure, leaves: &mut impl Iterator<Item = Tensor>) -> Self {
                let ($($name,)+) = s;
                ($($name::from_parts($name, leaves),)+)
            }
        }
    )*};
}
tuple_outputs!((A), (A, B), (A, B, C), (A, B, C, D), (A, B, C, D, E), (A, B, C, D, E, F), (A, B, C, D, E, F, G), (A, B, C, D, E, F, G, H));

/// The return type of a `#[graph_fn]`: a `GraphOutput`, or a `Result` of one.
///
/// ```
/// use tensor_core::prelude::*;
/// #[derive(Debug)]
/// enum AppError {
///     Tensor(Error),
/// }
/// impl From<Error> for AppError {
///     fn from(e: Error) -> Self {
///         AppError::Tensor(e)
///     }
/// }
/// // Any error type that converts from `tensor_core::Error` works; a trace-time error
/// // comes back as that `Err`.
/// #[graph_fn]
/// fn ratio(a: &Tensor, b: &Tensor) -> Result<Tensor, AppError> {
///     Ok(a.div(b)?)
/// }
/// let (a, b) = (Tensor::ones(&[2], DType::F32), Tensor::ones(&[3], DType::F32));
/// assert!(matches!(ratio(&a, &b), Err(AppError::Tensor(Error::Broadcast { .. }))));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a #[graph_fn]",
    label = "this return type does not implement `GraphOutput`",
    note = "return a Tensor, (), a tuple, Vec or Option of these, or a Result<_, E> of one of them where E: From<tensor_core::Error>"
)]
pub trait GraphReturn: Sized {
    /// What is kept of a traced value to rebuild others like it.
    type Structure: Send + Sync + 'static;
    /// The tensors and structure of a value, or the value itself if it is passed through
    /// (an `Err`).
    fn split(self) -> Result<(Vec<Tensor>, Self::Structure), Self>;
    /// Rebuilds a value around graph outputs.
    fn join(structure: &Self::Structure, leaves: impl IntoIterator<Item = Tensor>) -> Self;
    /// The value that reports a runtime error; for types that cannot carry one, a panic with
    /// the error's message (as the operators do).
    fn from_error(e: Error) -> Self;
}

impl<T: GraphOutput> GraphReturn for T {
    type Structure = T::Structure;
    fn split(self) -> Result<(Vec<Tensor>, Self::Structure), Self> {
        let mut leaves = Vec::new();
        let s = self.into_parts(&mut leaves);
        Ok((leaves, s))
    }
    fn join(s: &Self::Structure, leaves: impl IntoIterator<Item = Tensor>) -> Self {
        T::from_parts(s, &mut leaves.into_iter())
    }
    fn from_error(e: Error) -> Self {
        panic!("{e}")
    }
}

impl<T: GraphOutput, E: From<Error>> GraphReturn for Result<T, E> {
    type Structure = T::Structure;
    fn split(self) -> Result<(Vec<Tensor>, Self::Structure), Self> {
        match self {
            Ok(v) => {
                let mut leaves = Vec::new();
                let s = v.into_parts(&mut leaves);
                Ok((leaves, s))
            }
            Err(e) => Err(Err(e)),
        }
    }
    fn join(s: &Self::Structure, leaves: impl IntoIterator<Item = Tensor>) -> Self {
        Ok(T::from_parts(s, &mut leaves.into_iter()))
    }
    fn from_error(e: Error) -> Self {
        Err(E::from(e))
    }
}
