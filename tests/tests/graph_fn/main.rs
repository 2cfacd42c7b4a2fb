//! #[graph_fn]: arguments, the trace cache and grad mode in its key, options, introspection,
//! models, random numbers, and the names messages give layers.

mod acceptance;
mod args;
mod cache;
mod control_gradients;
mod grad_mode;
mod gradients;
mod introspection;
mod layer_names;
mod model;
mod options;
mod random;
mod readme;
mod residuals;
mod symbolic_dims;
mod symbolic_shapes;
