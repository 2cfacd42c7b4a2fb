use tensor_core::prelude::*;

#[graph_fn(name = "")]
fn step(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
