//! Every graph function that has been called, by name, for introspection.

use super::graph_function::GraphFunction;
use std::sync::Mutex;

static REGISTRY: Mutex<Vec<&'static GraphFunction>> = Mutex::new(Vec::new());

pub(super) fn register(f: &'static GraphFunction) {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).push(f);
}

/// The graph function called `name`, once it has been called. `name` may be:
///
/// - its name: `"step"` for a function, `"Mlp::train_step"` for a method, or the `name = "..."`
///   it was given;
/// - that name qualified by its module: `"my_crate::model::Mlp::train_step"`;
/// - for a method, its bare name: `"train_step"`, when no other function goes by that name
///   and no other method of that name is registered.
///
/// A full or module-qualified name wins over a bare method name. A name that fits several
/// functions (two modules' `step`s, or `Mlp::train_step` and `Cnn::train_step` asked for as
/// `"train_step"`) finds none: `None`, so that the answer does not depend on which was called
/// first — qualify it.
///
/// ```
/// use tensor_core::prelude::*;
/// #[graph_fn]
/// fn twice(x: &Tensor) -> Tensor { x * 2.0 }
/// struct Mlp;
/// impl GraphArg for Mlp {
///     fn flatten(&self, _: &mut tensor_core::function::Flattener) {}
/// }
/// impl Mlp {
///     #[graph_fn]
///     fn train_step(&self, x: &Tensor) -> Tensor { x * 3.0 }
/// }
/// twice(&Tensor::scalar(1.0f32));
/// Mlp.train_step(&Tensor::scalar(1.0f32));
/// use tensor_core::function::lookup;
/// assert_eq!(lookup("twice").unwrap().trace_count(), 1);
/// assert_eq!(lookup("train_step").unwrap().name(), "Mlp::train_step");
/// assert!(lookup("Mlp::train_step").is_some());
/// assert!(lookup(&format!("{}::twice", module_path!())).is_some());
/// ```
pub fn lookup(name: &str) -> Option<&'static GraphFunction> {
    let all = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    let full = |f: &GraphFunction| f.name() == name || qualified(f) == name;
    let method = |f: &GraphFunction| f.name().rsplit_once("::").is_some_and(|(_, bare)| bare == name);
    match the_only(all.iter().copied().filter(|f| full(f))) {
        Found::None => the_only(all.iter().copied().filter(|f| method(f))).one(),
        found => found.one(),
    }
}

/// `module::path::name`.
fn qualified(f: &GraphFunction) -> String {
    format!("{}::{}", f.module(), f.name())
}

/// How many functions a name fits.
enum Found {
    None,
    One(&'static GraphFunction),
    Several,
}

impl Found {
    fn one(self) -> Option<&'static GraphFunction> {
        match self {
            Found::One(f) => Some(f),
            Found::None | Found::Several => None,
        }
    }
}

fn the_only(mut fits: impl Iterator<Item = &'static GraphFunction>) -> Found {
    match (fits.next(), fits.next()) {
        (None, _) => Found::None,
        (Some(f), None) => Found::One(f),
        (Some(_), Some(_)) => Found::Several,
    }
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
