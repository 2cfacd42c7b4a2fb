use tensor_core::prelude::*;

#[graph_fn(input_signature())]
fn step(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
