//! The runtime behind `#[graph_fn]`: concrete functions (one traced graph per signature).

mod concrete;

pub use concrete::ConcreteFunction;
