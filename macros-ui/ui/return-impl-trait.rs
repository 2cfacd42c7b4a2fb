use tensor_core::prelude::*;

#[graph_fn]
fn step(x: &Tensor) -> impl std::fmt::Display {
    x * 2.0
}

fn main() {}
