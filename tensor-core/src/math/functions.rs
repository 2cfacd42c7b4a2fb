//! The scalar functions as types. Which type serves which op is the op's declaration in
//! `kinds.rs`, which generates the one table (`visit_float`, `visit_num`, `visit_bool`,
//! `visit`) from each op kind to its function.
//!
//! Eager loops and fused programs both build their loops from that table: a loop is generic
//! over a function type (`Fn1`/`Fn2`), so it is monomorphized and vectorized per op. That is
//! what makes an op compute the same bits in every mode: there is only one place that could
//! make them differ.
//!
//! Each function also names its CUDA C twin (`CUDA`, defined in `cuda/prelude.cuh`), so the
//! GPU's generated kernels are built from this same table, and a new function cannot be
//! added without one.

use super::num::{Float, Num};

/// A scalar function of one value.
pub(crate) trait Fn1<T, U> {
    /// The CUDA C device function computing the same bits (see `cuda/prelude.cuh`).
    const CUDA: &'static str;
    fn f(x: T) -> U;
}

/// A scalar function of two values.
pub(crate) trait Fn2<T, U> {
    /// The CUDA C device function computing the same bits (see `cuda/prelude.cuh`).
    const CUDA: &'static str;
    fn f(x: T, y: T) -> U;
}

macro_rules! float_fn1 {
    ($($name:ident => $method:ident),*) => {$(
        pub(crate) struct $name;
        impl<T: Float> Fn1<T, T> for $name {
            const CUDA: &'static str = concat!("tc_", stringify!($method));
            #[inline(always)]
            fn f(x: T) -> T { x.$method() }
        }
    )*};
}
float_fn1!(Exp => exp, Ln => ln, Sqrt => sqrt, Tanh => tanh, Sigmoid => sigmoid, Erf => erf, GeluTanh => gelu_tanh, GeluErf => gelu_erf, Sin => sin, Cos => cos, Floor => floor, Ceil => ceil, Round => round, Trunc => trunc, Asin => asin, Acos => acos, Atan => atan, Asinh => asinh, Acosh => acosh, Atanh => atanh);

macro_rules! num_fn1 {
    ($($name:ident => $method:ident),*) => {$(
        pub(crate) struct $name;
        impl<T: Num> Fn1<T, T> for $name {
            const CUDA: &'static str = concat!("tc_", stringify!($method));
            #[inline(always)]
            fn f(x: T) -> T { x.$method() }
        }
    )*};
}
num_fn1!(Neg => neg, Relu => relu, Abs => abs, Sign => sign);

/// Logical not.
pub(crate) struct Not;
impl Fn1<bool, bool> for Not {
    const CUDA: &'static str = "tc_not";
    #[inline(always)]
    fn f(x: bool) -> bool {
        !x
    }
}

/// A conversion between element types (`CastTo`).
pub(crate) struct Cast;
impl<T: CastTo<U>, U> Fn1<T, U> for Cast {
    // A template: the generator names the target type (`tc_cast<float>`).
    const CUDA: &'static str = "tc_cast";
    #[inline(always)]
    fn f(x: T) -> U {
        x.cast_to()
    }
}

macro_rules! num_fn2 {
    ($($name:ident => $method:ident),*) => {$(
        pub(crate) struct $name;
        impl<T: Num> Fn2<T, T> for $name {
            const CUDA: &'static str = concat!("tc_", stringify!($method));
            #[inline(always)]
            fn f(x: T, y: T) -> T { x.$method(y) }
        }
    )*};
}
num_fn2!(Add => add, Sub => sub, Mul => mul, Div => div, Pow => pow, Maximum => maximum, Minimum => minimum, Fmod => fmod);
// `+` and `*` for an operand known not to be NaN (see `Num::add_plain`).
num_fn2!(AddPlain => add_plain, MulPlain => mul_plain);

macro_rules! cmp_fn2 {
    ($($name:ident => $op:tt),*) => {$(
        pub(crate) struct $name;
        impl<T: PartialOrd> Fn2<T, bool> for $name {
            const CUDA: &'static str = concat!("tc_cmp_", stringify!($name));
            #[inline(always)]
            fn f(x: T, y: T) -> bool { x $op y }
        }
    )*};
}
cmp_fn2!(Eq => ==, Ne => !=, Lt => <, Le => <=, Gt => >, Ge => >=);

/// What to build from a function of one value: a loop, a kernel. `visit` is called with the
/// function type the table picks.
pub(crate) trait Visit1<T, U> {
    type Out;
    fn visit<F: Fn1<T, U> + 'static>(self) -> Self::Out;
}

/// What to build from a function of two values.
pub(crate) trait Visit2<T, U> {
    type Out;
    fn visit<F: Fn2<T, U> + 'static>(self) -> Self::Out;
}

/// `v` limited to `[lo, hi]`; NaN stays NaN (as in PyTorch).
#[inline(always)]
pub(crate) fn clamp_value<T: Num>(v: T, lo: Option<T>, hi: Option<T>) -> T {
    let v = match lo {
        Some(l) if v < l => l,
        _ => v,
    };
    match hi {
        Some(h) if v > h => h,
        _ => v,
    }
}

/// Rust's `as` between every pair of element types (bool: nonzero is true, true is 1).
pub(crate) trait CastTo<U> {
    fn cast_to(self) -> U;
}

/// An element type that converts to every element type.
pub(crate) trait CastToAll: Copy + Send + Sync + 'static + CastTo<f32> + CastTo<f64> + CastTo<i32> + CastTo<i64> + CastTo<bool> {}
impl<T: Copy + Send + Sync + 'static + CastTo<f32> + CastTo<f64> + CastTo<i32> + CastTo<i64> + CastTo<bool>> CastToAll for T {}

macro_rules! cast_numeric {
    ($($from:ty),*) => {$(
        impl CastTo<f32> for $from { #[inline(always)] fn cast_to(self) -> f32 { self as f32 } }
        impl CastTo<f64> for $from { #[inline(always)] fn cast_to(self) -> f64 { self as f64 } }
        impl CastTo<i32> for $from { #[inline(always)] fn cast_to(self) -> i32 { self as i32 } }
        impl CastTo<i64> for $from { #[inline(always)] fn cast_to(self) -> i64 { self as i64 } }
        impl CastTo<bool> for $from { #[inline(always)] fn cast_to(self) -> bool { self != (0 as $from) } }
    )*};
}
cast_numeric!(f32, f64, i32, i64);

macro_rules! cast_bool {
    ($($to:ty),*) => {$(
        impl CastTo<$to> for bool { #[inline(always)] fn cast_to(self) -> $to { self as u8 as $to } }
    )*};
}
cast_bool!(f32, f64, i32, i64);
impl CastTo<bool> for bool {
    fn cast_to(self) -> bool {
        self
    }
}
