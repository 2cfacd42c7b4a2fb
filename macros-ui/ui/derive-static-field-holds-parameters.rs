use tensor_core::prelude::*;

// A layer marked static: it is already GraphArg, so the fix is to drop the mark.
#[derive(GraphArg)]
struct Model {
    #[graph_arg(static)]
    body: tensor_core::nn::Sequential,
}

fn main() {}
