//! #[graph_fn]: arguments, the trace cache, options, introspection, models, random numbers.

mod acceptance;
mod args;
mod cache;
mod control_gradients;
mod gradients;
mod introspection;
mod model;
mod options;
mod random;
mod readme;
mod residuals;
