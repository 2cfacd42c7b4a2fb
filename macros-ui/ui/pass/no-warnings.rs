//! Correct code under `#[graph_fn]` builds without a warning: every supported form of `if`
//! and `while` (tensor and `bool` conditions, values and statements, `else if` chains,
//! countdowns, nesting), methods, every option, and the return types. It also runs, checking
//! a few values against plain Rust.
#![deny(warnings)]

use tensor_core::ops::CmpOp;
use tensor_core::prelude::*;

/// An `if` with tensor conditions as a value, with braces a plain `if` needs.
#[graph_fn]
fn abs_doubled(x: &Tensor) -> Tensor {
    let positive = x.gt(0.0);
    if positive {
        x * 2.0
    } else {
        x * -1.0
    }
}

/// An `if` used as a statement, and an `else if` chain giving a value.
#[graph_fn]
fn piecewise(x: &Tensor) -> Tensor {
    let mut y = x.clone();
    if x.lt(0.0) {
        y = -&y;
    }
    let scale = if y.gt(10.0) {
        Tensor::scalar(0.1f32)
    } else if y.gt(1.0) {
        Tensor::scalar(1.0f32)
    } else {
        Tensor::scalar(10.0f32)
    };
    &y * &scale
}

/// A countdown whose counter is not read after the loop, and a branch that only assigns.
#[graph_fn]
fn countdown(n: &Tensor) -> Tensor {
    let zero = Tensor::scalar(0i32);
    let mut n = n.clone();
    let mut total = Tensor::scalar(0i32);
    while n.gt(&zero) {
        n = &n - 1;
        total = &total + 2;
    }
    let mut sign = Tensor::scalar(1i32);
    if total.gt(4) {
        sign = Tensor::scalar(-1i32);
    }
    &total * &sign
}

/// Nested forms: an `if` in a `while` in an `if`, and a `while` in a `while`.
#[graph_fn]
fn nested(x: &Tensor, n: &Tensor) -> (Tensor, Tensor) {
    let mut acc = Tensor::scalar(0.0f32);
    let mut i = Tensor::scalar(0i32);
    if x.gt(0.0) {
        while i.lt(n) {
            if i.lt(2) {
                acc = &acc + x;
            } else {
                acc = &acc - 0.5;
            }
            i = &i + 1;
        }
    } else {
        acc = -x;
    }
    let mut outer = Tensor::scalar(0i32);
    let mut cells = Tensor::scalar(0i32);
    while outer.lt(n) {
        let mut inner = Tensor::scalar(0i32);
        while inner.lt(&outer) {
            cells = &cells + 1;
            inner = &inner + 1;
        }
        outer = &outer + 1;
    }
    (acc, cells)
}

/// Fallible comparisons as conditions: a `Result`, and `?` on one; `?` in the branch.
#[graph_fn]
fn fallible(x: &Tensor, limit: &Tensor) -> Result<Tensor> {
    let mut x = x.clone();
    while x.compare(CmpOp::Lt, limit) {
        x = &x * 2.0;
    }
    if x.compare(CmpOp::Gt, limit)? {
        x = x.sub(limit)?;
    }
    Ok(x)
}

/// `bool` conditions stay plain Rust and may carry any type.
#[graph_fn]
fn repeat(x: &Tensor, times: usize, double: bool) -> Tensor {
    let mut y = x.clone();
    let mut done = 0;
    let mut going = done < times;
    while going {
        y = &y + 1.0;
        done += 1;
        going = done < times;
    }
    let mut label = "once";
    if double {
        y = &y * 2.0;
        label = "twice";
    }
    let _ = label;
    y
}

/// A model: a method on `&self` with tensor conditions on its fields.
#[derive(GraphArg)]
struct Clamp {
    low: Tensor,
    high: Tensor,
    #[graph_arg(static)]
    label: String,
    #[graph_arg(skip)]
    calls: std::cell::Cell<usize>,
}

impl Clamp {
    #[graph_fn]
    fn apply(&self, x: &Tensor) -> Tensor {
        self.calls.set(self.calls.get() + 1);
        let _ = &self.label;
        if x.lt(&self.low) {
            self.low.clone()
        } else if x.gt(&self.high) {
            self.high.clone()
        } else {
            x.clone()
        }
    }
}

/// Every option.
#[graph_fn(reduce_retracing, max_traces = 8, optimize = false, cache_capacity = 4, name = "options_all")]
fn options_all(x: &Tensor) -> Tensor {
    x * 3.0
}

#[graph_fn(input_signature(x: f32[?], y: i64[2]), max_traces(4, error))]
fn signature(x: &Tensor, y: &Tensor) -> Result<(Tensor, Tensor)> {
    Ok((x + 1.0, y * 2))
}

#[graph_fn(max_traces(3, warn), reduce_retracing = false, optimize = true)]
fn policies(x: &Tensor) -> Vec<Tensor> {
    vec![x + 1.0, x - 1.0]
}

/// `Option` and unit returns.
#[graph_fn]
fn maybe(x: &Tensor, some: bool) -> Option<Tensor> {
    if some {
        Some(x * 2.0)
    } else {
        None
    }
}

#[graph_fn]
fn nothing(x: &Tensor) {
    tprint!("x = {}", x);
}

fn f32s(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap()
}

fn main() -> Result<()> {
    assert_eq!(abs_doubled(&Tensor::scalar(-3.0f32)).item::<f32>()?, 3.0);
    assert_eq!(abs_doubled(&Tensor::scalar(3.0f32)).item::<f32>()?, 6.0);
    assert_eq!(piecewise(&Tensor::scalar(-20.0f32)).item::<f32>()?, 2.0);
    assert_eq!(piecewise(&Tensor::scalar(0.5f32)).item::<f32>()?, 5.0);
    assert_eq!(countdown(&Tensor::scalar(3i32)).item::<i32>()?, -6);
    assert_eq!(countdown(&Tensor::scalar(1i32)).item::<i32>()?, 2);
    let (acc, cells) = nested(&Tensor::scalar(1.5f32), &Tensor::scalar(4i32));
    assert_eq!((acc.item::<f32>()?, cells.item::<i32>()?), (2.0, 6));
    assert_eq!(fallible(&Tensor::scalar(1.0f32), &Tensor::scalar(10.0f32))?.item::<f32>()?, 6.0);
    assert_eq!(repeat(&f32s(&[1.0]), 2, true).to_vec::<f32>()?, [6.0]);
    let clamp = Clamp { low: Tensor::scalar(0.0f32), high: Tensor::scalar(1.0f32), label: "unit".into(), calls: Default::default() };
    assert_eq!(clamp.apply(&Tensor::scalar(2.0f32)).item::<f32>()?, 1.0);
    assert_eq!(clamp.apply(&Tensor::scalar(0.25f32)).item::<f32>()?, 0.25);
    assert_eq!(options_all(&f32s(&[1.0])).to_vec::<f32>()?, [3.0]);
    let (a, b) = signature(&f32s(&[1.0, 2.0, 3.0]), &Tensor::from_vec(vec![1i64, 2], &[2])?)?;
    assert_eq!((a.to_vec::<f32>()?, b.to_vec::<i64>()?), (vec![2.0, 3.0, 4.0], vec![2, 4]));
    assert_eq!(policies(&f32s(&[1.0])).len(), 2);
    assert!(maybe(&f32s(&[1.0]), false).is_none());
    assert_eq!(maybe(&f32s(&[1.0]), true).unwrap().to_vec::<f32>()?, [2.0]);
    nothing(&f32s(&[1.0]));
    Ok(())
}
