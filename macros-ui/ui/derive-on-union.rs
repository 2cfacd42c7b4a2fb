use tensor_core::prelude::*;

#[derive(GraphArg)]
union Bits {
    f: f32,
    i: i32,
}

fn main() {}
