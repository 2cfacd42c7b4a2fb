use tensor_core::prelude::*;

// Holds a parameter but does not derive GraphArg: the fix is the derive, never `skip`.
struct Head {
    weight: Tensor,
}

#[derive(GraphArg)]
struct Model {
    body: tensor_core::nn::Sequential,
    head: Head,
}

fn main() {}
