use tensor_core::prelude::*;

#[graph_fn(reduce_retracing, jit_compile = true)]
fn step(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
