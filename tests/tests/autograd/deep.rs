//! Deep graphs neither overflow the stack nor abort: a million-op autograd chain builds, runs
//! backward and drops on a thread with the default 2 MiB stack, and a traced body of a hundred
//! thousand ops traces, compiles, runs and drops there too (as PyTorch walks and frees deep
//! graphs without recursion).

use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;

/// Runs `f` on a new thread with a 2 MiB stack (Rust's default for spawned threads).
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(2 << 20).spawn(f).expect("spawn").join().expect("no stack overflow")
}

#[test]
fn a_million_op_chain_runs_backward_and_drops() {
    let grad = on_small_stack(|| -> Result<f64> {
        let x = Tensor::scalar(1.0f64).requires_grad_(true)?;
        let mut y = x.clone();
        for i in 0..1_000_000 {
            // Alternate two ops so both kinds of node are in the chain; d/dx is 1 throughout.
            y = if i % 2 == 0 { y.add(1.0)? } else { y.sub(1.0)? };
        }
        assert_eq!(y.item::<f64>()?, 1.0);
        y.backward()?;
        let g = x.grad().expect("a gradient").item::<f64>()?;
        drop(y); // the whole chain is freed here, node by node
        Ok(g)
    });
    assert_eq!(grad.unwrap(), 1.0);
}

#[test]
fn a_million_op_chain_that_saves_its_inputs_drops() {
    // `mul` saves both inputs, so nodes also reach each other through saved tensors.
    let value = on_small_stack(|| -> Result<f32> {
        let x = Tensor::scalar(1.0f32).requires_grad_(true)?;
        let one = Tensor::scalar(1.0f32);
        let mut y = x.clone();
        for _ in 0..1_000_000 {
            y = y.mul(&one)?;
        }
        let v = y.item::<f32>()?;
        drop(y);
        Ok(v)
    });
    assert_eq!(value.unwrap(), 1.0);
}

#[test]
fn a_hundred_thousand_op_trace_compiles_runs_and_drops() {
    let out = on_small_stack(|| -> Result<Vec<f32>> {
        let x = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3])?;
        let f = ConcreteFunction::trace("deep", &[("x", &x)], || {
            let mut y = x.clone();
            for i in 0..100_000 {
                y = if i % 2 == 0 { y.mul(2.0)? } else { y.mul(0.5)? };
            }
            Ok(vec![y])
        })?;
        let y = f.call(&[&x])?;
        let v = y[0].to_vec::<f32>()?;
        drop(f);
        Ok(v)
    });
    assert_eq!(out.unwrap(), vec![0.5, -1.0, 2.0]);
}

#[test]
fn a_long_chain_of_graph_calls_runs_backward_and_drops() {
    // Each call's node keeps the tensor it read (the previous call's output) for its
    // backward, so the nodes also reach each other through what the calls keep.
    let grad = on_small_stack(|| -> Result<f64> {
        let x = Tensor::scalar(0.5f64).requires_grad_(true)?;
        // y -> y*y*0 + y: the value stays 0.5 and each step's derivative is exactly 1.
        let f = ConcreteFunction::trace("step", &[("x", &x)], || Ok(vec![x.mul(&x)?.mul(0.0)?.add(&x)?]))?;
        let mut y = x.clone();
        for _ in 0..50_000 {
            y = f.call(&[&y])?.remove(0);
        }
        assert_eq!(y.item::<f64>()?, 0.5);
        // The chain is kept (retain_graph), then dropped in one piece.
        y.backward_opts(None, tensor_core::BackwardOptions { retain_graph: Some(true), create_graph: false })?;
        let g = x.grad().expect("a gradient").item::<f64>()?;
        drop(y);
        Ok(g)
    });
    assert_eq!(grad.unwrap(), 1.0);
}
