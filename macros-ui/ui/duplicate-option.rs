use tensor_core::prelude::*;

#[graph_fn(name = "step", max_traces = 4, name = "other")]
fn step(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
