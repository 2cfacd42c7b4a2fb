//! The process-wide switch that runs every `#[graph_fn]` body as plain eager code.

use std::sync::atomic::{AtomicBool, Ordering};

static RUN_EAGERLY: AtomicBool = AtomicBool::new(false);

/// Makes every `#[graph_fn]` run its body as plain eager code on every call (for debugging),
/// as TF's `tf.config.run_functions_eagerly`.
///
/// ```standalone_crate
/// tensor_core::run_functions_eagerly(true);
/// assert!(tensor_core::functions_run_eagerly());
/// tensor_core::run_functions_eagerly(false);
/// ```
pub fn run_functions_eagerly(on: bool) {
    RUN_EAGERLY.store(on, Ordering::SeqCst);
}

/// True when `run_functions_eagerly(true)` is in effect.
///
/// ```standalone_crate
/// use tensor_core::prelude::*;
/// use tensor_core::function::functions_run_eagerly;
/// run_functions_eagerly(true);
/// assert!(functions_run_eagerly());
/// run_functions_eagerly(false);
/// assert!(!functions_run_eagerly());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn functions_run_eagerly() -> bool {
    RUN_EAGERLY.load(Ordering::SeqCst)
}
