use tensor_core::prelude::*;

#[graph_fn(input_signature(x: float32[?, 784]))]
fn predict(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
