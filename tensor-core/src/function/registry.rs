//! Every graph function that has been called, by name, for introspection.

use super::graph_function::GraphFunction;
use std::sync::Mutex;

static REGISTRY: Mutex<Vec<&'static GraphFunction>> = Mutex::new(Vec::new());

pub(super) fn register(f: &'static GraphFunction) {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).push(f);
}

/// The graph function called `name` (`"step"`, or `"Mlp::forward"` for a method), once it
/// has been called. If several share a name, the first registered is returned; a
/// `module::path::name` picks one by its module.
///
/// ```
/// use tensor_core::prelude::*;
/// #[graph_fn]
/// fn twice(x: &Tensor) -> Tensor { x * 2.0 }
/// twice(&Tensor::scalar(1.0f32));
/// let f = tensor_core::function::lookup("twice").unwrap();
/// assert_eq!(f.trace_count(), 1);
/// ```
pub fn lookup(name: &str) -> Option<&'static GraphFunction> {
    let all = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    all.iter().copied().find(|f| f.name() == name || format!("{}::{}", f.module(), f.name()) == name)
}

/// Every graph function called so far.
///
/// ```
/// use tensor_core::prelude::*;
/// #[graph_fn]
/// fn listed(x: &Tensor) -> Tensor {
///     x.clone()
/// }
/// listed(&Tensor::ones(&[1], DType::F32));
/// assert!(tensor_core::function::all().iter().any(|f| f.name() == "listed"));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn all() -> Vec<&'static GraphFunction> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
