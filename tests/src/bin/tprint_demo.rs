//! Prints from eager code, from a `#[graph_fn]` and from a traced `ConcreteFunction`, so
//! `tests/trace_print.rs` can check, line by line, what appears on standard output and in
//! which order: `tprint!` on every call with the run-time values, `println!` only while
//! tracing, and `tprint!` at once when eager; and the same lines from a function loaded
//! from its exported bytes.

use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;

#[graph_fn]
fn demo(x: &Tensor) -> Result<Tensor> {
    println!("trace");
    tprint!("x = {}", x);
    let y = x * 2.0;
    tprint!("y = {} after x = {:.1}", y, x);
    Ok(y)
}

fn eager() -> Result<()> {
    println!("== eager");
    let x = Tensor::from_vec(vec![1.5f32, -2.0], &[2])?;
    println!("before");
    tprint!("eager x = {}, twice = {:.2}", x, Tensor::scalar(2.25f32) * 2.0);
    println!("after");
    Ok(())
}

fn graph_fn_calls() -> Result<()> {
    println!("== graph_fn");
    for v in [1.0f32, 2.5, -3.0] {
        println!("call {v}");
        let y = demo(&Tensor::scalar(v))?;
        println!("returned {}", y.item::<f32>()?);
    }
    println!("== run_functions_eagerly");
    run_functions_eagerly(true);
    for v in [4.0f32, 5.0] {
        println!("call {v}");
        demo(&Tensor::scalar(v))?;
    }
    run_functions_eagerly(false);
    Ok(())
}

fn concrete_calls() -> Result<()> {
    println!("== concrete");
    let c = Tensor::scalar(10.0f32);
    let x = Tensor::scalar(0.0f32);
    let f = ConcreteFunction::trace("concrete_demo", &[("x", &x)], || {
        println!("trace");
        let y = &x + &c;
        tprint!("first {}", y);
        c.add_(1.0)?;
        tprint!("second {} {:.1}", x, c);
        Ok(vec![y])
    })?;
    println!("traced");
    for v in [1.0f32, 2.0] {
        println!("call {v}");
        f.call(&[&Tensor::scalar(v)])?;
    }
    println!("c = {}", c.item::<f32>()?);
    Ok(())
}

/// A capture printed before anything else in the body uses it: still its run-time value.
fn capture_printed_first() -> Result<()> {
    println!("== capture");
    let steps = Tensor::scalar(0i64);
    let f = ConcreteFunction::trace("counter", &[], || {
        tprint!("step {}", steps);
        steps.add_(1)?;
        tprint!("now {:>3}", steps);
        Ok(vec![])
    })?;
    for _ in 0..3 {
        f.call(&[])?;
    }
    Ok(())
}

/// One function called as traced, then as loaded from its exported bytes (with its own
/// copy of the captured state): the same lines, from `tprint!`s in the body and in branches.
fn exported_calls() -> Result<()> {
    let x = Tensor::scalar(0.0f32);
    let total = Tensor::scalar(0.0f32);
    let f = ConcreteFunction::trace("exported_demo", &[("x", &x)], || {
        tprint!("x = {:.1}", x);
        total.add_(&x)?;
        tprint!("total {:>6.2}", total);
        let y = tensor_core::control::cond(
            &x.gt(0.0)?,
            || {
                tprint!("positive {}", x);
                x.mul(2.0)
            },
            || {
                tprint!("not positive");
                x.neg()
            },
        )?;
        Ok(vec![y])
    })?;
    let loaded = tensor_core::export::load_bytes(&f.export_bytes()?)?;
    println!("== original");
    for v in [1.0f32, -2.5, 3.0] {
        f.call(&[&Tensor::scalar(v)])?;
    }
    println!("== loaded");
    for v in [1.0f32, -2.5, 3.0] {
        loaded.call(&[&Tensor::scalar(v)])?;
    }
    Ok(())
}

fn main() -> Result<()> {
    eager()?;
    graph_fn_calls()?;
    concrete_calls()?;
    capture_printed_first()?;
    exported_calls()?;
    println!("== end");
    Ok(())
}
