use tensor_core::prelude::*;

#[graph_fn]
fn step(x: &mut Tensor, lr: f32) -> Tensor {
    &*x * lr
}

fn main() {}
