use tensor_core::prelude::*;

#[graph_fn]
fn show(x: impl GraphArg + std::fmt::Display) {
    tprint!("{}", x);
}

fn main() {}
