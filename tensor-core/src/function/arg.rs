//! `GraphArg`: how an argument of a `#[graph_fn]` splits into tensor leaves and a static key
//! (a pytree). Tensors key by dtype, shape and requires_grad; Rust scalars and strings by
//! value; collections by length and elements. `#[derive(GraphArg)]` does this for structs
//! and enums.

use super::key::Flattener;
use crate::random::Generator;
use crate::tensor::Tensor;
use std::fmt::Debug;
use std::hash::Hash;

/// An argument type of a `#[graph_fn]`.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::{Flattener, GraphArg};
/// struct Scaled { t: Tensor, factor: i32 }
/// impl GraphArg for Scaled {
///     fn flatten(&self, f: &mut Flattener) {
///         self.t.flatten(f);
///         self.factor.flatten(f);
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an argument of a #[graph_fn]",
    label = "this argument's type does not implement `GraphArg`",
    note = "arguments must be tensors, Rust scalars (bool, integers, f32, f64, char), strings, or slices, Vecs, arrays, tuples and Options of these",
    note = "for your own structs and enums, add #[derive(GraphArg)] (mark non-tensor fields #[graph_arg(static)] or #[graph_arg(skip)])"
)]
pub trait GraphArg {
    /// Adds this value's tensor leaves and static parts to the signature, in a fixed order.
    fn flatten(&self, f: &mut Flattener);
}

/// How `#[derive(GraphArg)]` flattens a field: through this trait, so that a field which is
/// not `GraphArg` gets a message about fields. Not part of the public API.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "field type `{Self}` is not `GraphArg`, so #[derive(GraphArg)] cannot put it in the signature",
    label = "neither a tensor nor a `GraphArg` type",
    note = "if `{Self}` holds tensors or layers, add #[derive(GraphArg)] to it (or implement `GraphArg`), so that its tensors are leaves of the signature and entries of the state dict; every `nn` layer, `Sequential` included, already is one",
    note = "only a field that holds no tensors may be #[graph_arg(static)], keyed by value (Hash + Eq + Clone + Debug), or #[graph_arg(skip)], left out"
)]
pub trait GraphArgField {
    fn flatten_field(&self, f: &mut Flattener);
}

impl<T: GraphArg + ?Sized> GraphArgField for T {
    fn flatten_field(&self, f: &mut Flattener) {
        self.flatten(f);
    }
}

/// A `#[graph_arg(skip)]` field, for [`SkippedGraphArg`] and [`SkippedOther`]: the derive calls
/// `(&Skipped(&field)).check_skipped(..)`, and method resolution picks the first when the
/// field's type is `GraphArg` (so its tensors can be looked at) and the second, which does
/// nothing, otherwise. Not part of the public API.
#[doc(hidden)]
pub struct Skipped<'a, T: ?Sized>(pub &'a T);

/// A skipped field that is `GraphArg`: its tensors that require grad are noted, and one that
/// no flattened field holds makes the call or the state dict an `Err` (a parameter would be
/// left out silently). Not part of the public API.
#[doc(hidden)]
pub trait SkippedGraphArg {
    fn check_skipped(&self, name: &'static str, f: &mut Flattener);
}

impl<T: GraphArg + ?Sized> SkippedGraphArg for Skipped<'_, T> {
    fn check_skipped(&self, name: &'static str, f: &mut Flattener) {
        f.skipped_field(name, self.0);
    }
}

/// A skipped field of any other type: it holds no tensor the library can see. Not part of
/// the public API.
#[doc(hidden)]
pub trait SkippedOther {
    fn check_skipped(&self, _name: &'static str, _f: &mut Flattener) {}
}

impl<T: ?Sized> SkippedOther for &Skipped<'_, T> {}

/// How `#[derive(GraphArg)]` keys a `#[graph_arg(static)]` field: by value. The key keeps a
/// clone and compares it with `Eq` (its hash only speeds up the lookup), and signatures and
/// retrace reasons show its `Debug` text. Not part of the public API.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a #[graph_arg(static)] field: static fields are keyed by value and must be Hash + Eq + Clone + Debug + Send + Sync + 'static",
    label = "this type is not Hash + Eq + Clone + Debug + Send + Sync + 'static",
    note = "if it holds tensors (a tensor, a layer, a model) or is a Rust scalar or a string, drop the mark: it is already `GraphArg`, and its tensors are leaves of the signature and entries of the state dict",
    note = "otherwise derive Clone, Debug, Hash, PartialEq and Eq for it; or, if it holds no tensors and does not change what the function computes, mark it #[graph_arg(skip)]"
)]
pub trait StaticField {
    fn flatten_static(&self, f: &mut Flattener);
}

// Not recommended: a type missing several of the bounds gets one error, this trait's, rather
// than one per missing bound.
#[diagnostic::do_not_recommend]
impl<T: Hash + Eq + Clone + Debug + Send + Sync + 'static> StaticField for T {
    fn flatten_static(&self, f: &mut Flattener) {
        f.static_value(self);
    }
}

impl GraphArg for Tensor {
    fn flatten(&self, f: &mut Flattener) {
        f.tensor(self);
    }
}

/// A generator is one tensor leaf: its state, read and written back by the graph.
impl GraphArg for Generator {
    fn flatten(&self, f: &mut Flattener) {
        f.tensor(self.state());
    }
}

impl<T: GraphArg + ?Sized> GraphArg for &T {
    fn flatten(&self, f: &mut Flattener) {
        (**self).flatten(f);
    }
}

impl<T: GraphArg + ?Sized> GraphArg for Box<T> {
    fn flatten(&self, f: &mut Flattener) {
        (**self).flatten(f);
    }
}

impl<T: GraphArg> GraphArg for [T] {
    fn flatten(&self, f: &mut Flattener) {
        f.len(self.len());
        for (i, x) in self.iter().enumerate() {
            f.element(i);
            x.flatten(f);
            f.end_field();
        }
    }
}

impl<T: GraphArg> GraphArg for Vec<T> {
    fn flatten(&self, f: &mut Flattener) {
        self.as_slice().flatten(f);
    }
}

impl<T: GraphArg, const N: usize> GraphArg for [T; N] {
    fn flatten(&self, f: &mut Flattener) {
        self.as_slice().flatten(f);
    }
}

impl<T: GraphArg> GraphArg for Option<T> {
    fn flatten(&self, f: &mut Flattener) {
        match self {
            Some(x) => {
                f.variant_named(1, "Some");
                x.flatten(f);
            }
            None => f.variant_named(0, "None"),
        }
    }
}

macro_rules! tuple_args {
    ($(($($name:ident),+)),*) => {$(
        impl<$($name: GraphArg),+> GraphArg for ($($name,)+) {
            #[allow(non_snake_case)]
            fn flatten(&self, f: &mut Flattener) {
                let ($($name,)+) = self;
                let mut _index = 0;
                $(
                    f.element(_index);
                    $name.flatten(f);
                    f.end_field();
                    _index += 1;
                )+
            }
        }
    )*};
}
tuple_args!((A), (A, B), (A, B, C), (A, B, C, D), (A, B, C, D, E), (A, B, C, D, E, F), (A, B, C, D, E, F, G), (A, B, C, D, E, F, G, H));

impl GraphArg for () {
    fn flatten(&self, _: &mut Flattener) {}
}

macro_rules! scalar_args {
    ($method:ident as $as:ty: $($t:ty),*) => {$(
        impl GraphArg for $t {
            fn flatten(&self, f: &mut Flattener) {
                f.$method(*self as $as);
            }
        }
    )*};
}
scalar_args!(int as i64: i8, i16, i32, i64, isize);
scalar_args!(uint as u64: u8, u16, u32, u64, usize);

impl GraphArg for i128 {
    fn flatten(&self, f: &mut Flattener) {
        f.int(*self as i64);
        f.int((*self >> 64) as i64);
    }
}

impl GraphArg for u128 {
    fn flatten(&self, f: &mut Flattener) {
        f.uint(*self as u64);
        f.uint((*self >> 64) as u64);
    }
}

impl GraphArg for f32 {
    fn flatten(&self, f: &mut Flattener) {
        f.f32(*self);
    }
}

impl GraphArg for f64 {
    fn flatten(&self, f: &mut Flattener) {
        f.f64(*self);
    }
}

impl GraphArg for bool {
    fn flatten(&self, f: &mut Flattener) {
        f.bool(*self);
    }
}

impl GraphArg for char {
    fn flatten(&self, f: &mut Flattener) {
        f.char(*self);
    }
}

impl GraphArg for str {
    fn flatten(&self, f: &mut Flattener) {
        f.str(self);
    }
}

impl GraphArg for String {
    fn flatten(&self, f: &mut Flattener) {
        f.str(self);
    }
}
