use tensor_core::prelude::*;

#[graph_fn]
fn checked(x: &Tensor) -> Tensor {
    if x.lt(0.0) {
        panic!("negative input");
    }
    x * 2.0
}

fn main() {}
