use tensor_core::prelude::*;

#[graph_fn]
fn count(x: &Tensor, limit: &Tensor) -> Tensor {
    let mut x = x.clone();
    while x.lt(limit) {
        x = &x + 1;
        if x.item::<i32>().unwrap() == 3 {
            break;
        }
    }
    x
}

fn main() {}
