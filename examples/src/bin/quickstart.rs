//! A first look: eager tensors, autograd, and the same code traced into a graph by
//! `#[graph_fn]`, then replayed.
//!
//! cargo run --release -p examples --bin quickstart

use tensor_core::prelude::*;

/// `tanh(x @ w + 1)`. The first call per input signature (the dtypes and shapes of `x` and
/// `w`) traces this body into a graph, which is optimized and cached; later calls with that
/// signature replay the graph without running the body.
#[graph_fn]
fn affine_tanh(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    // Host code such as `println!` runs only while tracing: it shows when a trace happens.
    println!("  (tracing affine_tanh for x: {} {})", x.dtype(), x.shape());
    x.matmul(w)?.add(1.0)?.tanh()
}

fn main() -> Result<()> {
    // Eager tensors: every op runs at once, so you can print anything.
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    let w = Tensor::randn(&[3, 2], DType::F32, 0);
    println!("x =\n{x}\nw =\n{w:.2}");
    let y = x.matmul(&w)?.relu()?;
    println!("relu(x @ w) =\n{y}");

    // Autograd with PyTorch's semantics.
    let a = Tensor::scalar(1.0f32).requires_grad_(true)?;
    let b = Tensor::scalar(2.0f32).requires_grad_(true)?;
    let z = (&a + &b) * (&a + 1.0);
    z.backward()?;
    println!("z = (a + b) * (a + 1) = {z:.1}; dz/da = {:.1}, dz/db = {:.1}", a.grad().unwrap(), b.grad().unwrap());

    // The same kind of code as a graph function: traced on the first call, replayed after.
    println!("affine_tanh(x, w):");
    let first = affine_tanh(&x, &w)?;
    println!("affine_tanh(x * 0.5, w), the same signature:");
    let second = affine_tanh(&(&x * 0.5), &w)?;
    println!("  = {second:.4}");
    println!("affine_tanh on a [4, 3] input, a new signature:");
    affine_tanh(&Tensor::ones(&[4, 3], DType::F32), &w)?;

    // The graph computes what eager code computes, bit for bit.
    let eager = x.matmul(&w)?.add(1.0)?.tanh()?;
    let same = eager.to_vec::<f32>()?.iter().zip(first.to_vec::<f32>()?).all(|(e, g)| e.to_bits() == g.to_bits());
    println!("graph result == eager result, bit for bit: {same}");

    let f = tensor_core::function::lookup("affine_tanh").expect("called above");
    println!("affine_tanh: 3 calls, {} traces; why each traced: {:?}", f.trace_count(), f.retrace_reasons());
    println!("its optimized graph for x: f32 [2, 3]:\n{}", f.concrete_functions()[0].to_text());
    Ok(())
}
