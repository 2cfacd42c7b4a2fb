//! Signatures and retrace reasons name a model's layers as its author wrote them: a
//! `Sequential`'s layer by its index (`net.body.1`), an element of a `Vec` by its index, an
//! enum variant and an `Option` by name (`Tanh`, `Some`), never by an internal number.

use tensor_core::function::lookup;
use tensor_core::nn::{Gelu, Linear, Module, ReLU, Sequential};
use tensor_core::prelude::*;

#[derive(GraphArg)]
enum Act {
    Relu,
    Tanh,
}

#[derive(GraphArg)]
struct Net {
    body: Sequential,
    acts: Vec<Act>,
    head: Option<Linear>,
}

impl Net {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = self.body.forward(x)?;
        for act in &self.acts {
            h = match act {
                Act::Relu => h.relu()?,
                Act::Tanh => h.tanh()?,
            };
        }
        match &self.head {
            Some(head) => head.forward(&h),
            None => Ok(h),
        }
    }
}

#[graph_fn]
fn layer_names_run(net: &Net, x: &Tensor) -> Result<Tensor> {
    net.forward(x)
}

/// `Linear(2, 3)`, the `middle` layer, `Linear(3, 2)`, from one seed.
fn body(middle: impl Module + Send + Sync + 'static) -> Result<Sequential> {
    let rng = &Generator::new(0);
    Ok(Sequential::new().add(Linear::new(2, 3, DType::F32, rng)?).add(middle).add(Linear::new(3, 2, DType::F32, rng)?))
}

#[test]
fn retrace_reasons_name_the_layer_index_and_the_variant() -> Result<()> {
    let x = Tensor::randn(&[4, 2], DType::F32, 1);
    let head = || Linear::new(2, 2, DType::F32, &Generator::new(1));
    let nets = [
        Net { body: body(ReLU)?, acts: vec![Act::Relu, Act::Tanh], head: None },
        Net { body: body(Gelu::new())?, acts: vec![Act::Relu, Act::Tanh], head: None },
        Net { body: body(Gelu::new())?, acts: vec![Act::Relu, Act::Relu], head: None },
        Net { body: body(Gelu::new())?, acts: vec![Act::Relu, Act::Relu], head: Some(head()?) },
    ];
    for net in &nets {
        // Each call is the model's eager forward pass, bit for bit.
        let (graph, eager) = (layer_names_run(net, &x)?, net.forward(&x)?);
        assert_eq!(
            graph.to_vec::<f32>()?.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            eager.to_vec::<f32>()?.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
    let f = lookup("layer_names_run").expect("registered once called");
    let reasons = f.retrace_reasons();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert_eq!(reasons[1], "arg net.body.1: type ReLU -> Gelu");
    assert_eq!(reasons[2], "arg net.acts.1: Tanh -> Relu");
    assert!(reasons[3].starts_with("arg net: structure (") && reasons[3].contains("head: None) -> ("), "{}", reasons[3]);
    assert!(
        reasons[3].ends_with("head: Some, head.weight: f32[2, 2] requires_grad, head.bias: Some, head.bias: f32[2] requires_grad)"),
        "{}",
        reasons[3]
    );

    let signature = &f.traces()[0].signature;
    assert!(
        signature.starts_with("net: (body: length 3, body.0.weight: f32[3, 2] requires_grad, body.0.bias: Some, body.0.bias: f32[3] requires_grad, "),
        "{signature}"
    );
    assert!(
        signature.contains("body.2.weight: f32[2, 3] requires_grad") && signature.contains("acts.0: Relu, acts.1: Tanh, head: None"),
        "{signature}"
    );
    assert!(!signature.contains("variant") && !reasons.iter().any(|r| r.contains("variant")), "{signature}\n{reasons:?}");
    Ok(())
}
