//! The model of issue 35 builds without a warning and without any mark: `nn` layers and
//! containers (`Sequential`, `Vec`s and arrays of layers, `Option`s of one) are `GraphArg`
//! fields, and a skipped field of another type (an optimizer holding the same parameters, a
//! counter) stays allowed. It also runs: its graph function reads the Sequential's
//! parameters, which its state dict names by position.
#![deny(warnings)]

use tensor_core::nn::{Linear, Module, ReLU, Sequential};
use tensor_core::optim::Sgd;
use tensor_core::prelude::*;

#[derive(GraphArg)]
struct Model {
    body: Sequential,
    heads: Vec<Linear>,
    pair: [Linear; 2],
    extra: Option<Linear>,
    #[graph_arg(skip)]
    opt: Sgd,
    #[graph_arg(skip)]
    calls: std::cell::Cell<usize>,
}

impl Model {
    #[graph_fn]
    fn predict(&self, x: &Tensor) -> Result<Tensor> {
        self.calls.set(self.calls.get() + 1);
        let h = self.heads[0].forward(&self.body.forward(x)?)?;
        let h = self.pair[1].forward(&self.pair[0].forward(&h)?)?;
        match &self.extra {
            Some(extra) => extra.forward(&h),
            None => Ok(h),
        }
    }
}

fn main() -> Result<()> {
    let g = &Generator::new(0);
    let body = Sequential::new().add(Linear::new(2, 3, DType::F32, g)?).add(ReLU).add(Linear::new(3, 3, DType::F32, g)?);
    let heads = vec![Linear::new(3, 2, DType::F32, g)?];
    let pair = [Linear::new(2, 2, DType::F32, g)?, Linear::new_without_bias(2, 2, DType::F32, g)?];
    let params: Vec<Tensor> = [body.parameters(), heads[0].parameters(), pair[0].parameters(), pair[1].parameters()].concat();
    let model = Model { body, heads, pair, extra: None, opt: Sgd::new(params, 0.1)?, calls: std::cell::Cell::new(0) };
    let x = Tensor::ones(&[4, 2], DType::F32);
    assert_eq!(model.predict(&x)?.to_vec::<f32>()?, model.predict(&x)?.to_vec::<f32>()?);
    assert_eq!(model.calls.get(), 1, "traced once, replayed once");
    let names: Vec<String> = model.state_dict()?.into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[..4], ["body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias"]);
    assert_eq!(names.len(), 4 + 2 + 3);
    Ok(())
}
