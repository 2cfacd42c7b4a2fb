//! The workloads as tensor-core code. Each is written once, as ordinary eager code; graph
//! mode traces the very same function.

use std::path::Path;
use std::time::{Duration, Instant};
use tensor_core::export::LoadedFunction;
use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;

/// W1: 100 times `x = x * 1.0001 + 0.0001` on f32[16].
pub fn w1(x: &Tensor) -> Result<Tensor> {
    let mut x = x.clone();
    for _ in 0..100 {
        x = &(&x * 1.0001f32) + 0.0001f32;
    }
    Ok(x)
}

/// W2: `tanh(x * 1.5 + 0.5) * sigmoid(x) - x * 0.5`.
pub fn w2(x: &Tensor) -> Result<Tensor> {
    let a = (x * 1.5f32 + 0.5f32).tanh()?;
    Ok(a * x.sigmoid()? - x * 0.5f32)
}

/// W5: one 1024 x 1024 matmul.
pub fn w5(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.matmul(b)
}

/// W6: `x + 1`.
pub fn w6(x: &Tensor) -> Result<Tensor> {
    x.add(1.0f32)
}

/// The W3 multi-layer perceptron: 784-512-256-10.
#[derive(GraphArg)]
pub struct Mlp {
    pub params: Vec<Tensor>,
}

impl Mlp {
    /// Parameters from a fixed seed (Glorot-scaled normal weights, zero biases).
    pub fn new(seed: u64) -> Result<Mlp> {
        let rng = Generator::new(seed);
        let dims = [784, 512, 256, 10];
        let mut params = Vec::new();
        for w in dims.windows(2) {
            let scale = (2.0 / (w[0] + w[1]) as f64).sqrt();
            params.push((tensor_core::nn::init::normal(&[w[0], w[1]], 0.0, 1.0, DType::F32, &rng)? * scale as f32).requires_grad_(true)?);
            params.push(Tensor::zeros(&[w[1]], DType::F32).requires_grad_(true)?);
        }
        Ok(Mlp { params })
    }

    /// The logits of a batch.
    /// The same model with its parameters on `device` (still trainable leaves).
    pub fn to_device(&self, device: Device) -> Result<Mlp> {
        Ok(Mlp { params: self.params.iter().map(|p| p.to_device(device)).collect::<Result<_>>()? })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let p = &self.params;
        let h = x.matmul(&p[0])?.add(&p[1])?.relu()?;
        let h = h.matmul(&p[2])?.add(&p[3])?.relu()?;
        h.matmul(&p[4])?.add(&p[5])
    }

    /// One SGD training step; returns the loss.
    pub fn train_step(&self, x: &Tensor, labels: &Tensor, lr: f32) -> Result<Tensor> {
        self.params.iter().try_for_each(Tensor::zero_grad)?;
        let loss = self.forward(x)?.cross_entropy(labels)?;
        loss.backward()?;
        no_grad(|| -> Result<()> {
            for p in &self.params {
                let g = p.grad().expect("every parameter gets a gradient");
                p.sub_(&(g * lr))?;
            }
            Ok(())
        })?;
        Ok(loss)
    }
}

/// The W3 inputs: x f32[128, 784], labels i64[128] in 0..10.
pub fn w3_batch(seed: u64) -> Result<(Tensor, Tensor)> {
    let x = Tensor::randn(&[128, 784], DType::F32, seed);
    let labels: Vec<i64> = (0..128).map(|i| (i * 7 + 3) % 10).collect();
    Ok((x, Tensor::from_vec(labels, &[128])?))
}

// ----------------------------------------------------------------------- the graph versions

/// W1 as a graph function.
#[graph_fn]
pub fn w1_graph(x: &Tensor) -> Result<Tensor> {
    w1(x)
}

/// W2 as a graph function.
#[graph_fn]
pub fn w2_graph(x: &Tensor) -> Result<Tensor> {
    w2(x)
}

/// W3 as a graph function: the whole training step is one graph.
#[graph_fn]
pub fn w3_graph(model: &Mlp, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    model.train_step(x, labels, 0.01)
}

/// W3's forward pass and loss as a graph function (backward and SGD stay eager).
#[graph_fn]
pub fn w3_forward_graph(model: &Mlp, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    model.forward(x)?.cross_entropy(labels)
}

/// W3 with the forward pass and loss as a graph call, the backward through it and the SGD
/// update eager.
pub fn w3_graph_forward(model: &Mlp, x: &Tensor, labels: &Tensor, lr: f32) -> Result<Tensor> {
    model.params.iter().try_for_each(Tensor::zero_grad)?;
    let loss = w3_forward_graph(model, x, labels)?;
    loss.backward()?;
    no_grad(|| -> Result<()> {
        for p in &model.params {
            let g = p.grad().expect("every parameter gets a gradient");
            p.sub_(&(g * lr))?;
        }
        Ok(())
    })?;
    Ok(loss)
}

/// W4's LeNet-5 forward pass and loss as a graph function.
#[graph_fn]
pub fn w4_forward_graph(model: &super::lenet::LeNet, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    tensor_core::nn::cross_entropy(&model.forward(x)?, labels)
}

/// W4 with the forward pass and loss as a graph call, backward and Adam eager.
pub fn w4_graph_forward(model: &super::lenet::LeNet, opt: &tensor_core::optim::Adam, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    use tensor_core::optim::Optimizer;
    opt.zero_grad()?;
    let loss = w4_forward_graph(model, x, labels)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

/// W4 as a graph function: LeNet-5 forward, backward and Adam in one graph.
#[graph_fn]
pub fn w4_graph(model: &super::lenet::LeNet, opt: &tensor_core::optim::Adam, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    super::lenet::train_step(model, opt, x, labels)
}

/// W5 as a graph function.
#[graph_fn]
pub fn w5_graph(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    w5(a, b)
}

/// W6 as a graph function: every call after the first is a cache hit.
#[graph_fn]
pub fn w6_graph(x: &Tensor) -> Result<Tensor> {
    w6(x)
}

// ----------------------------------------------------------------------------- W8: serving

/// W8's function: W4's LeNet-5 forward pass on one image f32[1, 1, 28, 28], traced with the
/// weights captured (so they travel in the exported file).
pub fn w8_forward(model: &super::lenet::LeNet) -> Result<ConcreteFunction> {
    let image = Tensor::zeros(&[1, 1, 28, 28], DType::F32);
    no_grad(|| ConcreteFunction::trace("lenet5", &[("image", &image)], || Ok(vec![model.forward(&image)?])))
}

/// W8 as served: `w8_forward` exported to `path`, then loaded back; with the time the load
/// took (read, check, rebuild, compile).
pub fn w8_loaded(model: &super::lenet::LeNet, path: &Path) -> Result<(LoadedFunction, Duration)> {
    w8_forward(model)?.export(path)?;
    let start = Instant::now();
    let loaded = tensor_core::export::load(path)?;
    Ok((loaded, start.elapsed()))
}
