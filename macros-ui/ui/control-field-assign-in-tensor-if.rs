use tensor_core::prelude::*;

struct Stats {
    last: Tensor,
}

#[graph_fn]
fn record(x: &Tensor) -> Tensor {
    let mut stats = Stats { last: x.clone() };
    if x.gt(0.0) {
        stats.last = x * 2.0;
    }
    stats.last
}

fn main() {}
