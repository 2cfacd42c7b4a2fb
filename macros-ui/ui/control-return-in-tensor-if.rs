use tensor_core::prelude::*;

#[graph_fn]
fn clipped(x: &Tensor) -> Tensor {
    if x.gt(10.0) {
        return x * 0.1;
    }
    x.clone()
}

fn main() {}
