//! The W4 model: LeNet-5 on NCHW f32 input, trained with Adam.

use tensor_core::nn::{self, Conv2d, Linear, MaxPool2d, Module};
use tensor_core::optim::{Adam, Optimizer};
use tensor_core::prelude::*;

/// LeNet-5: conv 6@5x5 pad 2 + relu, maxpool 2x2/2, conv 16@5x5 + relu, maxpool 2x2/2,
/// dense 120 relu, dense 84 relu, dense 10.
pub struct LeNet {
    conv1: Conv2d,
    conv2: Conv2d,
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
}

impl LeNet {
    /// The model from a seed.
    pub fn new(seed: u64) -> Result<LeNet> {
        let rng = Generator::new(seed);
        Ok(LeNet {
            conv1: Conv2d::new(1, 6, [5, 5], DType::F32, &rng)?.with_padding([2, 2]),
            conv2: Conv2d::new(6, 16, [5, 5], DType::F32, &rng)?,
            fc1: Linear::new(400, 120, DType::F32, &rng)?,
            fc2: Linear::new(120, 84, DType::F32, &rng)?,
            fc3: Linear::new(84, 10, DType::F32, &rng)?,
        })
    }

    /// The logits of a batch `[n, 1, 28, 28]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let pool = MaxPool2d::new([2, 2], [2, 2]);
        let h = pool.forward(&self.conv1.forward(x)?.relu()?)?;
        let h = pool.forward(&self.conv2.forward(&h)?.relu()?)?.flatten_from(1)?;
        let h = self.fc1.forward(&h)?.relu()?;
        let h = self.fc2.forward(&h)?.relu()?;
        self.fc3.forward(&h)
    }

    /// The trainable tensors.
    pub fn parameters(&self) -> Vec<Tensor> {
        [&self.conv1 as &dyn Module, &self.conv2, &self.fc1, &self.fc2, &self.fc3].iter().flat_map(|m| m.parameters()).collect()
    }
}

impl tensor_core::GraphArg for LeNet {
    fn flatten(&self, f: &mut tensor_core::function::Flattener) {
        self.parameters().flatten(f);
    }
}

/// One training step: loss, backward, Adam; returns the loss.
pub fn train_step(model: &LeNet, opt: &Adam, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    opt.zero_grad()?;
    let loss = nn::cross_entropy(&model.forward(x)?, labels)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

/// The W4 batch: x f32[64, 1, 28, 28], labels i64[64].
pub fn batch(seed: u64) -> Result<(Tensor, Tensor)> {
    let x = Tensor::randn(&[64, 1, 28, 28], DType::F32, seed);
    let labels: Vec<i64> = (0..64).map(|i| (i * 3 + 1) % 10).collect();
    Ok((x, Tensor::from_vec(labels, &[64])?))
}
