use tensor_core::prelude::*;

#[graph_fn]
struct Model {
    w: Tensor,
}

fn main() {}
