//! The switch for code generation: whether fused programs may be compiled to machine code
//! (`kernels::fused::jit`) or always run in the interpreter. Both give the same bits, so the
//! switch changes speed only; it exists to compare the two paths and to rule one out.

use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns code generation for fused programs on (the default) or off. Both give the same
/// bits; off, every program runs in the interpreter. A program picks its path when it is
/// compiled, as its graph is lowered to run (right after the trace): set this before tracing.
///
/// ```
/// tensor_core::set_codegen(false);
/// assert!(!tensor_core::codegen_enabled());
/// tensor_core::set_codegen(true);
/// ```
pub fn set_codegen(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

/// Whether fused programs compiled from now on may be compiled to machine code (where the CPU
/// and the program allow it).
///
/// ```
/// assert!(tensor_core::codegen_enabled());
/// ```
pub fn codegen_enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}
