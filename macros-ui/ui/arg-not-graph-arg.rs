use tensor_core::prelude::*;

struct Config {
    scale: f32,
}

#[graph_fn]
fn step(x: &Tensor, config: &Config) -> Tensor {
    x * config.scale
}

fn main() {}
