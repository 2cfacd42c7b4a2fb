//! The seed's counter: TF1 needed `tf.while_loop(cond, body, vars)`; PyTorch runs a plain
//! `while` over tensors. Here the plain `while` is written once and runs both ways: eagerly, op
//! by op, and — under `#[graph_fn]` — traced into one `While` node whose trip count is decided
//! when the graph runs.
//!
//! cargo run --release -p examples --bin while_loop

use tensor_core::control::while_loop;
use tensor_core::function::lookup;
use tensor_core::prelude::*;

/// Adds 2 to `first` and 1 to `second` while `first < second`.
#[graph_fn]
fn counter(first: &Tensor, second: &Tensor) -> (Tensor, Tensor) {
    let mut first = first.clone();
    let mut second = second.clone();
    while first.lt(&second).unwrap() {
        first = &first + 2;
        second = &second + 1;
    }
    (first, second)
}

fn show(label: &str, (a, b): &(Tensor, Tensor)) -> Result<()> {
    println!("{label:<34} first = {:>2}, second = {:>2}", a.item::<i32>()?, b.item::<i32>()?);
    Ok(())
}

fn main() -> Result<()> {
    let (first, second) = (Tensor::scalar(0i32), Tensor::scalar(10i32));

    // 1. Eagerly: the same function body, run op by op.
    tensor_core::run_functions_eagerly(true);
    show("eager (run_functions_eagerly):", &counter(&first, &second))?;
    tensor_core::run_functions_eagerly(false);

    // 2. As a graph: the first call traces, later calls replay the same trace.
    show("graph, first = 0, second = 10:", &counter(&first, &second))?;
    show("graph, first = 0, second = 3:", &counter(&Tensor::scalar(0i32), &Tensor::scalar(3i32)))?;
    show("graph, first = 7, second = 2:", &counter(&Tensor::scalar(7i32), &Tensor::scalar(2i32)))?;

    let f = lookup("counter").expect("a #[graph_fn] registers itself");
    let graph = &f.concrete_functions()[0];
    println!("\ntraced {} time(s); the graph has {} While node(s):\n", f.trace_count(), graph.traced_graph().count_op("while"));
    println!("{}", graph.to_text());

    // 3. The library form, TF1-style: the same loop as an explicit while_loop call.
    let out = while_loop(|(a, b): &(Tensor, Tensor)| a.lt(b), |(a, b)| Ok((&a + 2, &b + 1)), (first, second))?;
    println!();
    show("while_loop(cond, body, vars):", &out)?;
    Ok(())
}
