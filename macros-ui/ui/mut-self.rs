use tensor_core::prelude::*;

#[derive(GraphArg)]
struct Model {
    w: Tensor,
}

impl Model {
    #[graph_fn]
    fn update(&mut self, x: &Tensor) {
        self.w = x.clone();
    }
}

fn main() {}
