use tensor_core::prelude::*;

#[derive(GraphArg)]
struct Model {
    w: Tensor,
    #[graph_arg(static, skip)]
    label: String,
}

fn main() {}
