use tensor_core::prelude::*;

#[graph_fn]
fn step(x: &Tensor, n: i32) -> Tensor {
    let mut y = x.clone();
    if n {
        y = &y * 2.0;
    }
    y
}

fn main() {}
