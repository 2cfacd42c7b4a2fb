use tensor_core::prelude::*;

#[graph_fn(input_signature(x: f32[2; 3]))]
fn step(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
