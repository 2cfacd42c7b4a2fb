//! The computation graph behind autograd, after PyTorch's autograd tutorial:
//! `y = (w + x) * (w + 1)` with `w = 1`, `x = 2`, so `dy/dw = 5` and `dy/dx = 2`.
//!
//! cargo run --release -p examples --bin autograd

use tensor_core::autograd::{GradFn, NextFunction};
use tensor_core::prelude::*;

fn main() -> Result<()> {
    let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
    let a = &w + &x;
    a.retain_grad()?; // a is not a leaf: keep its .grad too
    let b = &w + 1.0;
    let y = &a * &b;

    println!("y = (w + x) * (w + 1) = {}", y.item::<f32>()?);
    let named = [("w", &w), ("x", &x), ("a", &a), ("b", &b), ("y", &y)];
    println!("\n{:4} {:8} {:14} grad_fn", "", "is_leaf", "requires_grad");
    for (name, t) in named {
        let grad_fn = t.grad_fn().map_or("None".to_string(), |f| f.to_string());
        println!("{name:4} {:<8} {:<14} {grad_fn}", t.is_leaf(), t.requires_grad());
    }

    println!("\nthe backward graph, from y:");
    if let Some(f) = y.grad_fn() {
        print_tree(&f, "y", "", &named);
    }

    y.backward()?;
    println!("\nafter y.backward() (dy/dw = b + a = 5, dy/dx = b = 2, dy/da = b = 2):");
    for (name, t) in named {
        println!("  {name}.grad = {}", grad_of(t));
    }

    // The same computation inside a graph function: backward() is traced into the graph, and
    // the .grad it writes lands on the caller's tensors.
    let (w2, x2) = (Tensor::scalar(1.0f32).requires_grad_(true)?, Tensor::scalar(2.0f32).requires_grad_(true)?);
    let y2 = forward_backward(&w2, &x2)?;
    println!("\ninside a #[graph_fn]: y = {}, w.grad = {}, x.grad = {}", y2, grad_of(&w2), grad_of(&x2));
    let traced = tensor_core::function::lookup("forward_backward").expect("called above").concrete_functions();
    println!("the traced graph (forward and backward):\n{}", traced[0].to_text());
    Ok(())
}

#[graph_fn]
fn forward_backward(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let y = (w + x) * (w + 1.0);
    y.backward()?;
    Ok(y)
}

/// Prints a grad_fn and, indented below it, where it sends each input's gradient.
fn print_tree(f: &GradFn, label: &str, indent: &str, named: &[(&str, &Tensor)]) {
    println!("{label} <{}>", f.name());
    let next = f.next_functions();
    for (i, n) in next.iter().enumerate() {
        let last = i + 1 == next.len();
        print!("{indent}{}", if last { "└── " } else { "├── " });
        let child_indent = format!("{indent}{}", if last { "    " } else { "│   " });
        match n {
            NextFunction::Node(g) => {
                let output = named.iter().find(|(_, t)| t.grad_fn().is_some_and(|h| h.same_as(g)));
                print_tree(g, output.map_or("", |(name, _)| name), &child_indent, named);
            }
            NextFunction::AccumulateGrad(leaf) => {
                let name = named.iter().find(|(_, t)| t.same_as(leaf)).map_or("leaf", |(name, _)| name);
                println!("{name} <AccumulateGrad>");
            }
            NextFunction::None => println!("None (a constant: no gradient)"),
        }
    }
}

fn grad_of(t: &Tensor) -> String {
    t.grad().map_or("None".to_string(), |g| g.to_string())
}
