use std::fmt::Display;
use tensor_core::prelude::*;

#[graph_fn]
fn show<T: tensor_core::GraphArg + Display>(x: T) {
    tprint!("{}", x);
    println!("{}", x);
    tprint!("tprint in graph");
    println!("println in graph");
}

#[test]
fn sequence() {
    let calls: Vec<Box<dyn Fn()>> = vec![
        Box::new(|| show(Tensor::scalar(1i32))),
        Box::new(|| show(Tensor::scalar(2i32))),
        Box::new(|| show(Tensor::scalar(1.1f32))),
        Box::new(|| show(Tensor::scalar(2.2f32))),
        Box::new(|| show(Tensor::scalar(3i32))),
        Box::new(|| show(1)),
        Box::new(|| show(2)),
        Box::new(|| show(1)),
    ];
    for (i, c) in calls.iter().enumerate() {
        println!("--- call {}", i + 1);
        c();
        println!("trace count {}", tensor_core::function::lookup("show").unwrap().trace_count());
    }
    println!("{:#?}", tensor_core::function::lookup("show").unwrap().traces());
}

#[derive(GraphArg)]
struct Model {
    w: Tensor,
    #[graph_arg(static)]
    act: String,
}

impl Model {
    #[graph_fn]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = x.matmul(&self.w)?;
        if self.act == "relu" {
            y.relu()
        } else {
            y.tanh()
        }
    }
}

#[test]
fn method() -> Result<()> {
    let m = Model { w: Tensor::ones(&[2, 2], DType::F32), act: "relu".into() };
    let x = Tensor::from_vec(vec![1.0f32, -2.0], &[1, 2])?;
    let eager = {
        run_functions_eagerly(true);
        let y = m.forward(&x)?;
        run_functions_eagerly(false);
        y
    };
    let y = m.forward(&x)?;
    let y2 = m.forward(&x)?;
    assert_eq!(y.to_vec::<f32>()?, eager.to_vec::<f32>()?);
    assert_eq!(y2.to_vec::<f32>()?, eager.to_vec::<f32>()?);
    let f = tensor_core::function::lookup("Model::forward").unwrap();
    assert_eq!(f.trace_count(), 1);
    println!("{}", f.concrete_functions()[0].to_text());
    Ok(())
}
