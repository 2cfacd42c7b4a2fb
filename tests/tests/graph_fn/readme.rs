//! The README's code, compiled and run, so the front page stays true.

use tensor_core::prelude::*;

#[test]
fn the_autograd_snippet() -> Result<()> {
    let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
    let y = (&w + &x) * (&w + 1.0);
    y.backward()?; // dy/dw = 5, dy/dx = 2
    assert_eq!(y.grad_fn().unwrap().name(), "MulBackward");
    assert_eq!((w.grad().unwrap().item::<f32>()?, x.grad().unwrap().item::<f32>()?), (5.0, 2.0));
    Ok(())
}

#[derive(GraphArg)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

impl Mlp {
    #[graph_fn]
    fn loss(&self, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
        let h = x.matmul(&self.w1)?.add(&self.b1)?.relu()?;
        h.matmul(&self.w2)?.add(&self.b2)?.cross_entropy(labels)
    }
}

#[test]
fn the_graph_function_snippet_matches_eager_bits() -> Result<()> {
    let mlp = Mlp {
        w1: Tensor::randn(&[4, 8], DType::F32, 1),
        b1: Tensor::zeros(&[8], DType::F32),
        w2: Tensor::randn(&[8, 3], DType::F32, 2),
        b2: Tensor::zeros(&[3], DType::F32),
    };
    let x = Tensor::randn(&[5, 4], DType::F32, 3);
    let labels = Tensor::from_vec(vec![0i64, 1, 2, 1, 0], &[5])?;
    let graph = mlp.loss(&x, &labels)?;
    let eager = x.matmul(&mlp.w1)?.add(&mlp.b1)?.relu()?.matmul(&mlp.w2)?.add(&mlp.b2)?.cross_entropy(&labels)?;
    assert_eq!(graph.item::<f32>()?.to_bits(), eager.item::<f32>()?.to_bits());
    Ok(())
}

#[graph_fn]
fn counter(first: &Tensor, second: &Tensor) -> (Tensor, Tensor) {
    let mut first = first.clone();
    let mut second = second.clone();
    while first.lt(&second).unwrap() {
        // a tensor condition: one `While` node when traced
        first = &first + 2;
        second = &second + 1;
    }
    (first, second)
}

#[test]
fn the_counter_snippet() -> Result<()> {
    let (a, b) = counter(&Tensor::scalar(0i32), &Tensor::scalar(10i32));
    assert_eq!((a.item::<i32>()?, b.item::<i32>()?), (20, 20));
    Ok(())
}
