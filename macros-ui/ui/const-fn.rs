use tensor_core::prelude::*;

#[graph_fn]
const fn answer(n: i32) -> () {
    let _ = n;
}

fn main() {}
