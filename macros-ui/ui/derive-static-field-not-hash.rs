use tensor_core::prelude::*;

#[derive(GraphArg)]
struct Model {
    w: Tensor,
    #[graph_arg(static)]
    scale: f32,
}

fn main() {}
