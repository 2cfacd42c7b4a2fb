//! Tensors that are not owned locals as conditions: `&Tensor` and `Tensor` arguments,
//! references to them, fields of a `GraphArg` argument or receiver, and calls that return a
//! bool tensor (or a `Result` of one). The branch is picked by the value at each call.
#![deny(warnings)]

use tensor_core::ops::CmpOp;
use tensor_core::prelude::*;

#[graph_fn]
fn by_reference(x: &Tensor, flag: &Tensor) -> Tensor {
    if flag {
        x * 2.0
    } else {
        x - 1.0
    }
}

#[graph_fn]
fn by_value(x: &Tensor, flag: Tensor) -> Tensor {
    let mut y = x.clone();
    if flag {
        y = &y + 10.0;
    }
    y
}

#[graph_fn]
fn referenced(x: &Tensor, flag: &Tensor) -> Tensor {
    let gate = &flag;
    if gate {
        x * 3.0
    } else {
        x.clone()
    }
}

/// A `while` on an argument the loop reassigns.
#[graph_fn]
fn halve_while(x: &Tensor, go: &Tensor) -> Result<Tensor> {
    let mut x = x.clone();
    let mut go = go.clone();
    while go {
        x = &x * 0.5;
        go = x.compare(CmpOp::Gt, 1.0)?;
    }
    Ok(x)
}

#[derive(GraphArg)]
struct Gate {
    open: Tensor,
    limit: Tensor,
}

impl Gate {
    /// A bool tensor from a method.
    fn is_open(&self) -> Tensor {
        self.open.clone()
    }

    /// A fallible comparison from a method.
    fn below(&self, x: &Tensor) -> Result<Tensor> {
        x.compare(CmpOp::Lt, &self.limit)
    }

    #[graph_fn]
    fn apply(&self, x: &Tensor) -> Tensor {
        let mut y = x.clone();
        if self.open {
            y = &y * 2.0;
        }
        while self.below(&y) {
            y = &y + 1.0;
        }
        if self.is_open() {
            y = &y + 0.5;
        }
        y
    }
}

/// A field of a `GraphArg` argument, and a free function.
#[graph_fn]
fn through(gate: &Gate, x: &Tensor) -> Result<Tensor> {
    let mut y = x.clone();
    if gate.open {
        y = &y - 1.0;
    }
    if above(&y, &gate.limit)? {
        y = gate.limit.clone();
    }
    Ok(y)
}

/// A method of a tensor argument (`if x.gt(..)?`) and of a `GraphArg` argument (`while
/// gate.below(..)?`) as conditions.
#[graph_fn]
fn methods(x: &Tensor, gate: &Gate) -> Result<Tensor> {
    let mut y = x.clone();
    if x.gt(5.0f32)? {
        y = &y * 0.5;
    }
    while gate.below(&y)? {
        y = &y + 2.0;
    }
    Ok(y)
}

fn above(x: &Tensor, limit: &Tensor) -> Result<Tensor> {
    x.compare(CmpOp::Gt, limit)
}

fn main() -> Result<()> {
    let x = Tensor::scalar(4.0f32);
    let (yes, no) = (Tensor::scalar(true), Tensor::scalar(false));
    assert_eq!(by_reference(&x, &yes).item::<f32>()?, 8.0);
    assert_eq!(by_reference(&x, &no).item::<f32>()?, 3.0);
    assert_eq!(by_value(&x, yes.clone()).item::<f32>()?, 14.0);
    assert_eq!(by_value(&x, no.clone()).item::<f32>()?, 4.0);
    assert_eq!(referenced(&x, &yes).item::<f32>()?, 12.0);
    assert_eq!(halve_while(&x, &yes)?.item::<f32>()?, 1.0);
    assert_eq!(halve_while(&x, &no)?.item::<f32>()?, 4.0);
    let open = Gate { open: yes.clone(), limit: Tensor::scalar(10.0f32) };
    let shut = Gate { open: no.clone(), limit: Tensor::scalar(10.0f32) };
    // 4 * 2 = 8 -> 9 -> 10, + 0.5; shut: 4 -> ... -> 10.
    assert_eq!(open.apply(&x).item::<f32>()?, 10.5);
    assert_eq!(shut.apply(&x).item::<f32>()?, 10.0);
    assert_eq!(through(&open, &Tensor::scalar(20.0f32))?.item::<f32>()?, 10.0);
    assert_eq!(through(&shut, &x)?.item::<f32>()?, 4.0);
    // 4 -> 6 -> 8 -> 10; 7 * 0.5 = 3.5 -> 5.5 -> 7.5 -> 9.5 -> 11.5.
    assert_eq!(methods(&x, &open)?.item::<f32>()?, 10.0);
    assert_eq!(methods(&Tensor::scalar(7.0f32), &open)?.item::<f32>()?, 11.5);
    Ok(())
}
