use tensor_core::prelude::*;

#[graph_fn]
fn skip_odd(x: &Tensor, limit: &Tensor) -> Tensor {
    let mut x = x.clone();
    let mut total = x.zeros_like();
    while x.lt(limit) {
        x = &x + 1;
        if x.item::<i32>().unwrap() % 2 == 1 {
            continue;
        }
        total = &total + &x;
    }
    total
}

fn main() {}
