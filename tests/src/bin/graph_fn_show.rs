//! The acceptance sequence of `#[graph_fn]`, run as a child process by
//! `tests/tests/graph_fn_acceptance.rs` so that its standard output can be checked line by
//! line. Standard output holds exactly what the functions print; the trace count after each
//! call goes to standard error.
//!
//! Usage: `graph_fn_show <sequence | flag> [eager]` — `eager` turns on
//! `run_functions_eagerly(true)` first.

use std::fmt::Display;
use tensor_core::prelude::*;

/// TF's example: `tf.print` and `print` inside a `tf.function`.
#[graph_fn]
fn show<T: GraphArg + Display>(x: T) {
    tprint!("{}", x);
    println!("{}", x);
    tprint!("tprint in graph");
    println!("println in graph");
}

/// What `executing_eagerly()` says inside a graph function, at trace time and at run time.
#[graph_fn]
fn flag(x: &Tensor) {
    let _ = x;
    println!("{}", executing_eagerly());
    tprint!("{}", executing_eagerly());
}

fn trace_count(name: &str) -> usize {
    tensor_core::function::lookup(name).map_or(0, |f| f.trace_count())
}

fn sequence() {
    let calls: [&dyn Fn(); 8] = [
        &|| show(Tensor::scalar(1i32)),
        &|| show(Tensor::scalar(2i32)),
        &|| show(Tensor::scalar(1.1f32)),
        &|| show(Tensor::scalar(2.2f32)),
        &|| show(Tensor::scalar(3i32)),
        &|| show(1),
        &|| show(2),
        &|| show(1),
    ];
    for call in calls {
        call();
        eprintln!("trace count {}", trace_count("show"));
    }
}

fn flags() {
    for i in 0..3 {
        flag(&Tensor::scalar(i as f32));
        eprintln!("trace count {}", trace_count("flag"));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "eager") {
        run_functions_eagerly(true);
    }
    match args.first().map(String::as_str) {
        Some("sequence") => sequence(),
        Some("flag") => flags(),
        other => panic!("unknown mode {other:?}: expected `sequence` or `flag`"),
    }
}
