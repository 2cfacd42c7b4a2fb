use tensor_core::prelude::*;

#[graph_fn(max_traces = "five")]
fn step(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
