use tensor_core::prelude::*;

#[graph_fn]
fn settle(x: &Tensor) -> Result<Tensor> {
    let mut x = x.clone();
    while x.sum().gt(1.0) {
        x = x.mul(0.5)?;
    }
    Ok(x)
}

fn main() {}
