//! A first look: eager tensors, autograd, and the same code traced into a graph.
//!
//! cargo run --release -p examples --bin quickstart

use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;

fn main() -> Result<()> {
    // Eager tensors: every op runs at once, so you can print anything.
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    let w = Tensor::randn(&[3, 2], DType::F32, 0);
    println!("x =\n{x}\nw =\n{w}");
    let y = x.matmul(&w)?.relu()?;
    println!("relu(x @ w) =\n{y}");

    // Autograd with PyTorch's semantics.
    let a = Tensor::scalar(1.0f32).requires_grad_(true)?;
    let b = Tensor::scalar(2.0f32).requires_grad_(true)?;
    let z = (&a + &b) * (&a + 1.0);
    z.backward()?;
    println!("z = (a + b) * (a + 1) = {z}; dz/da = {}, dz/db = {}", a.grad().unwrap(), b.grad().unwrap());

    // The same kind of code traced once into a graph, then replayed on new inputs.
    let f = ConcreteFunction::trace("affine", &[("x", &x)], || Ok(vec![x.matmul(&w)?.add(1.0)?.tanh()?]))?;
    println!("the traced graph:\n{}", f.to_text());
    let out = f.call(&[&(&x * 0.5)])?;
    println!("graph call on x * 0.5 =\n{}", out[0]);
    Ok(())
}
