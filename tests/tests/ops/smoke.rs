use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;

#[test]
fn seed_example_eager_and_traced() -> Result<()> {
    let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
    let a = &w + &x;
    a.retain_grad()?;
    let b = &w + 1.0;
    let y = &a * &b;
    y.backward()?;
    assert_eq!(w.grad().unwrap().item::<f32>()?, 5.0);
    assert_eq!(x.grad().unwrap().item::<f32>()?, 2.0);
    assert_eq!(a.grad().unwrap().item::<f32>()?, 2.0);
    assert!(b.grad().is_none());
    assert_eq!(y.grad_fn().unwrap().name(), "MulBackward");
    println!("{}", y);

    let w2 = Tensor::scalar(1.0f32).requires_grad_(true)?;
    let x2 = Tensor::scalar(2.0f32).requires_grad_(true)?;
    let f = ConcreteFunction::trace("seed", &[("x", &x2)], || {
        let y = (&w2 + &x2) * (&w2 + 1.0);
        y.backward()?;
        Ok(vec![y])
    })?;
    println!("{}", f.to_text());
    assert!(w2.grad().is_none(), "tracing must not touch real grads");
    let out = f.call(&[&x2])?;
    assert_eq!(out[0].item::<f32>()?, 6.0);
    assert_eq!(w2.grad().unwrap().item::<f32>()?, 5.0);
    assert_eq!(x2.grad().unwrap().item::<f32>()?, 2.0);
    f.call(&[&x2])?;
    assert_eq!(w2.grad().unwrap().item::<f32>()?, 10.0);
    Ok(())
}

#[test]
fn display() {
    let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    assert_eq!(t.to_string(), "tensor([[1., 2.],\n        [3., 4.]], dtype=f32)");
    let t = Tensor::arange(0.0f32, 2000.0).reshape([2, 1000]).unwrap();
    println!("{t}");
    println!("{}", Tensor::from_vec(vec![1.5f64, -2.25, 3.0], &[3]).unwrap());
}
