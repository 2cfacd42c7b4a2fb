use tensor_core::prelude::*;

#[derive(GraphArg)]
struct Model {
    w: Tensor,
    #[graph_arg(constant)]
    act: String,
}

fn main() {}
