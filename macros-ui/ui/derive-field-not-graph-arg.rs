use tensor_core::prelude::*;

struct Activation;

#[derive(GraphArg)]
struct Model {
    w: Tensor,
    act: Activation,
}

fn main() {}
