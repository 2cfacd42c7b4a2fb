//! Grad mode, per thread: while off (`no_grad`), ops record nothing for backward;
//! `enable_grad` turns it back on inside.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// True when ops on this thread record grad nodes (the default).
///
/// ```
/// # use tensor_core::prelude::*;
/// assert!(tensor_core::is_grad_enabled());
/// no_grad(|| assert!(!tensor_core::is_grad_enabled()));
/// ```
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Turns recording on or off for this thread; returns the previous setting.
///
/// ```
/// use tensor_core::prelude::*;
/// let previous = tensor_core::autograd::set_grad_enabled(false);
/// let x = Tensor::scalar(1.0f32).requires_grad_(true)?;
/// assert!(!x.mul(2.0)?.requires_grad()); // not recorded
/// tensor_core::autograd::set_grad_enabled(previous);
/// assert!(x.mul(2.0)?.requires_grad());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn set_grad_enabled(on: bool) -> bool {
    GRAD_ENABLED.with(|c| c.replace(on))
}

/// Runs `f` with grad mode off on this thread, as PyTorch's `torch.no_grad()`.
///
/// ```
/// # use tensor_core::prelude::*;
/// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
/// let y = no_grad(|| &w * 2.0);
/// assert!(!y.requires_grad());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = NoGradGuard::new();
    f()
}

/// Turns grad mode off until dropped (restoring the previous mode, also on panic).
///
/// ```
/// # use tensor_core::prelude::*;
/// {
///     let _g = NoGradGuard::new();
///     assert!(!tensor_core::is_grad_enabled());
/// }
/// assert!(tensor_core::is_grad_enabled());
/// ```
pub struct NoGradGuard {
    _restore: GradModeGuard,
}

impl NoGradGuard {
    /// Turns grad mode off for this thread.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// {
    ///     let _guard = NoGradGuard::new();
    ///     assert!(x.mul(2.0)?.grad_fn().is_none());
    /// }
    /// assert!(x.mul(2.0)?.grad_fn().is_some());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        NoGradGuard { _restore: GradModeGuard::set(false) }
    }
}

/// Runs `f` with grad mode on on this thread, also inside `no_grad`, as PyTorch's
/// `torch.enable_grad()`.
///
/// ```
/// # use tensor_core::prelude::*;
/// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
/// let y = no_grad(|| tensor_core::enable_grad(|| &w * 2.0));
/// assert!(y.requires_grad());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn enable_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = EnableGradGuard::new();
    f()
}

/// Turns grad mode on until dropped (restoring the previous mode, also on panic).
///
/// ```
/// # use tensor_core::prelude::*;
/// no_grad(|| {
///     let _g = tensor_core::EnableGradGuard::new();
///     assert!(tensor_core::is_grad_enabled());
/// });
/// ```
pub struct EnableGradGuard {
    _restore: GradModeGuard,
}

impl EnableGradGuard {
    /// Turns grad mode on for this thread.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let _off = NoGradGuard::new();
    /// {
    ///     let _on = tensor_core::EnableGradGuard::new();
    ///     assert!(x.mul(2.0)?.grad_fn().is_some());
    /// }
    /// assert!(x.mul(2.0)?.grad_fn().is_none());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        EnableGradGuard { _restore: GradModeGuard::set(true) }
    }
}

/// Sets grad mode until dropped, then restores the previous mode.
pub(crate) struct GradModeGuard {
    previous: bool,
}

impl GradModeGuard {
    pub(crate) fn set(on: bool) -> Self {
        GradModeGuard { previous: set_grad_enabled(on) }
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        set_grad_enabled(self.previous);
    }
}
