//! Helpers shared by the integration tests.
//!
//! `per_dtype!` runs one generic test body for several dtypes (as candle's `test_device!`
//! runs one body per device):
//!
//! ```
//! use tensor_core::prelude::*;
//! use tests::{per_dtype, vals};
//! fn doubles<T: tensor_core::Element>() -> Result<()> {
//!     let x = Tensor::from_vec(vals::<T>(&[1.0, 2.0]), &[2])?;
//!     tests::assert_values(&(&x + &x), &[2.0, 4.0]);
//!     Ok(())
//! }
//! per_dtype!(doubles: f32, f64, i32, i64);
//! ```

pub mod fuzz;

use std::cell::RefCell;
use std::sync::Once;
use tensor_core::{Element, Tensor};

thread_local! {
    /// What the test subscriber logged on this thread.
    static LOG: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Writes into this thread's `LOG`.
struct ThreadLog;

impl std::io::Write for ThreadLog {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        LOG.with(|log| log.borrow_mut().extend_from_slice(b));
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` and returns its result and the lines logged (at WARN level or above) on this
/// thread while it ran.
///
/// One global subscriber serves every test of the binary, each reading only its own thread's
/// lines. (A scoped subscriber per test, `tracing::subscriber::with_default`, is flaky when
/// tests run in parallel: a thread without one can cache a log site as disabled for all.)
pub fn capture_warnings<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let subscriber =
            tracing_subscriber::fmt().with_writer(|| ThreadLog).with_ansi(false).without_time().with_max_level(tracing::Level::WARN).finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber in the test binaries");
    });
    LOG.with(|log| log.borrow_mut().clear());
    let result = f();
    let text = LOG.with(|log| String::from_utf8(std::mem::take(&mut *log.borrow_mut())).expect("utf-8 log"));
    (result, text.lines().map(str::to_string).collect())
}

/// Defines a module `<name>` with one `#[test]` per listed dtype, each calling `name::<T>()`
/// (a function returning `tensor_core::Result<()>`).
#[macro_export]
macro_rules! per_dtype {
    ($name:ident: $($t:ident),+ $(,)?) => {
        #[allow(non_snake_case)]
        mod $name {
            $(
                #[test]
                fn $t() {
                    super::$name::<$t>().unwrap_or_else(|e| panic!("{}: {e}", stringify!($t)))
                }
            )+
        }
    };
}

/// The number of proptest cases a bounded property test runs: `default` in `cargo test`, or
/// `PROPTEST_CASES` when set, for the longer runs docs/TESTING.md lists (an explicit
/// `ProptestConfig { cases, .. }` would otherwise ignore the variable).
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Values of element type `T` from f64 literals.
pub fn vals<T: Element>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::from_f64(x)).collect()
}

/// A tensor of element type `T` from f64 literals and a shape.
pub fn tensor<T: Element>(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(vals::<T>(v), shape).expect("test data matches its shape")
}

/// The values of `t` as f64 (any numeric dtype; bool as 0/1).
pub fn as_f64(t: &Tensor) -> Vec<f64> {
    t.cast(tensor_core::DType::F64).unwrap().to_vec::<f64>().expect("a concrete tensor")
}

/// Asserts `t` holds exactly `expected` (compared as f64).
#[track_caller]
pub fn assert_values(t: &Tensor, expected: &[f64]) {
    assert_eq!(as_f64(t), expected, "values of {t}");
}

/// Asserts `t` holds `expected` within `tol` (absolute, or relative for large values).
#[track_caller]
pub fn assert_close(t: &Tensor, expected: &[f64], tol: f64) {
    let got = as_f64(t);
    assert_eq!(got.len(), expected.len(), "length of {t}");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        let ok = (g - e).abs() <= tol * e.abs().max(1.0) || (g.is_nan() && e.is_nan());
        assert!(ok, "element {i}: got {g}, expected {e} (tol {tol}) in {t}");
    }
}

/// Asserts two tensors have the same dtype, shape and bits.
#[track_caller]
pub fn assert_bits_eq(a: &Tensor, b: &Tensor) {
    assert_eq!(a.dtype(), b.dtype(), "dtypes differ");
    assert_eq!(a.shape(), b.shape(), "shapes differ");
    assert!(a.bit_eq(b).expect("concrete"), "bits differ:\n{a}\n{b}");
}

/// True when `T` is a float element type (f32 or f64).
pub fn is_float<T: Element>() -> bool {
    T::DTYPE.is_float()
}

/// A tolerance a few ulp wide for transcendental results in `T` (f32's fast kernels are
/// within ~3 ulp; f64 uses the standard library).
pub fn tol<T: Element>() -> f64 {
    if T::DTYPE == tensor_core::DType::F32 {
        1e-6
    } else {
        1e-14
    }
}

/// Asserts `t` has the dtype of `T`, the dims `dims` and exactly the values `expected`
/// (compared as f64).
#[track_caller]
pub fn assert_tensor<T: Element>(t: &Tensor, dims: &[usize], expected: &[f64]) {
    assert_eq!(t.dtype(), T::DTYPE, "dtype of {t}");
    assert_eq!(t.dims(), dims, "dims of {t}");
    assert_values(t, expected);
}

/// Like [`assert_tensor`], with the values compared by [`assert_close`].
#[track_caller]
pub fn assert_tensor_close<T: Element>(t: &Tensor, dims: &[usize], expected: &[f64], tol: f64) {
    assert_eq!(t.dtype(), T::DTYPE, "dtype of {t}");
    assert_eq!(t.dims(), dims, "dims of {t}");
    assert_close(t, expected, tol);
}

/// Asserts `t` is a bool tensor with the dims `dims` and the values `expected`.
#[track_caller]
pub fn assert_bools(t: &Tensor, dims: &[usize], expected: &[bool]) {
    assert_eq!(t.dtype(), tensor_core::DType::Bool, "dtype of {t}");
    assert_eq!(t.dims(), dims, "dims of {t}");
    assert_eq!(t.to_vec::<bool>().expect("a concrete tensor"), expected, "values of {t}");
}
