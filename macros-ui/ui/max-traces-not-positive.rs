use tensor_core::prelude::*;

#[graph_fn(max_traces = 0)]
fn step(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
