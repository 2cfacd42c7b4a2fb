use tensor_core::prelude::*;

#[derive(GraphArg)]
struct Model {
    w: Tensor,
}

impl Model {
    #[graph_fn]
    fn forward(self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.w)
    }
}

fn main() {}
