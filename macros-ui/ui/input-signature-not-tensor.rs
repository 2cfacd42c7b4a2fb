use tensor_core::prelude::*;

#[graph_fn(input_signature(x: f32[?, 784], lr: f32[]))]
fn step(x: &Tensor, lr: f32) -> Tensor {
    x * lr
}

fn main() {}
