//! `#[graph_fn]` in five lessons, after TensorFlow's guide to `tf.function`:
//! host side effects run while tracing, `tprint!` on every call; what retraces; which mode the
//! code runs in; debugging eagerly; and what a traced graph looks like.
//!
//! cargo run --release -p examples --bin tracing

use std::sync::atomic::{AtomicUsize, Ordering};
use tensor_core::function::lookup;
use tensor_core::prelude::*;

static BODY_RUNS: AtomicUsize = AtomicUsize::new(0);

/// `println!` is host code: it runs when the body is traced. `tprint!` is a graph node: it
/// prints on every call, with the run-time value.
#[graph_fn]
fn greet(x: &Tensor) -> Result<Tensor> {
    BODY_RUNS.fetch_add(1, Ordering::SeqCst);
    println!("  println!: tracing with x = {x}");
    tprint!("  tprint!:  running with x = {}", x);
    Ok(x * 2.0)
}

/// A new dtype, shape or Rust scalar value is a new signature, so a new trace.
#[graph_fn]
fn scale(x: &Tensor, factor: f32) -> Result<Tensor> {
    println!("  tracing scale(x: {} {}, factor: {factor})", x.dtype(), x.shape());
    Ok(x * factor)
}

/// `executing_eagerly()` is false while the body is traced into a graph.
#[graph_fn]
fn which_mode(x: &Tensor) -> Result<Tensor> {
    println!("  body runs: executing_eagerly() = {}", executing_eagerly());
    x.relu()
}

/// A small function to look at: its graph as text and as Graphviz DOT.
#[graph_fn]
fn dense_tanh(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    x.matmul(w)?.add(b)?.tanh()
}

fn main() -> Result<()> {
    println!("1. println! runs while tracing, tprint! on every call");
    for v in [1.0f32, 1.0, 2.0] {
        println!("greet({v}):");
        greet(&Tensor::scalar(v))?;
    }
    let traces = lookup("greet").expect("called").trace_count();
    println!("-> 3 calls, {traces} trace(s), the body's host code ran {} time(s)\n", BODY_RUNS.load(Ordering::SeqCst));

    println!("2. retracing: by dtype, by shape, by a Rust scalar's value");
    let calls: [(&str, Tensor, f32); 6] = [
        ("f32 scalar, factor 2", Tensor::scalar(1.0f32), 2.0),
        ("same again", Tensor::scalar(5.0f32), 2.0),
        ("f64 scalar", Tensor::scalar(1.0f64), 2.0),
        ("f32 [3]", Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?, 2.0),
        ("factor 3", Tensor::scalar(1.0f32), 3.0),
        ("factor 2 again", Tensor::scalar(7.0f32), 2.0),
    ];
    for (what, x, factor) in calls {
        println!("scale: {what}");
        let before = lookup("scale").map_or(0, |f| f.trace_count());
        scale(&x, factor)?;
        let after = lookup("scale").expect("called").trace_count();
        println!("  -> {}", if after > before { "traced" } else { "cached graph reused" });
    }
    let f = lookup("scale").expect("called");
    println!("scale: {} traces; why each happened:", f.trace_count());
    for t in f.traces() {
        println!("  {:40} {}", t.signature, t.reason);
    }
    println!();

    println!("3. executing_eagerly() inside and outside a graph function");
    println!("outside: executing_eagerly() = {}", executing_eagerly());
    let x = Tensor::from_vec(vec![-1.0f32, 2.0], &[2])?;
    for call in 1..=2 {
        println!("which_mode call {call}:");
        which_mode(&x)?;
    }
    println!("(call 2 printed nothing: it ran the cached graph, not the body)\n");

    println!("4. run_functions_eagerly(true): the body runs as plain eager code on every call");
    run_functions_eagerly(true);
    for call in 1..=2 {
        println!("which_mode call {call}:");
        which_mode(&x)?;
    }
    run_functions_eagerly(false);
    println!("(traces of which_mode: still {})\n", lookup("which_mode").expect("called").trace_count());

    println!("5. a traced graph, as text and as Graphviz DOT");
    let (w, b) = (Tensor::randn(&[2, 3], DType::F32, 0), Tensor::zeros(&[3], DType::F32));
    let y = dense_tanh(&x.reshape([1, 2])?, &w, &b)?;
    println!("dense_tanh(x) = {y}");
    let concrete = &lookup("dense_tanh").expect("called").concrete_functions()[0];
    println!("{}", concrete.to_text());
    println!("{}", concrete.to_dot());
    Ok(())
}
