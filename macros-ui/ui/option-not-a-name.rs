use tensor_core::prelude::*;

#[graph_fn("fast")]
fn step(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
