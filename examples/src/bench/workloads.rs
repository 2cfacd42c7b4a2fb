//! The workloads as tensor-core code. Each is written once, as ordinary eager code; graph
//! mode traces the very same function.

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
pub struct Mlp {
    pub params: Vec<Tensor>,
}

impl Mlp {
    /// Parameters from a fixed seed (Glorot-scaled normal weights, zero biases).
    pub fn new(seed: u64) -> Result<Mlp> {
        let mut rng = tensor_core::seeded_rng(seed);
        let dims = [784, 512, 256, 10];
        let mut params = Vec::new();
        for w in dims.windows(2) {
            let scale = (2.0 / (w[0] + w[1]) as f64).sqrt();
            params.push((Tensor::randn_with(&[w[0], w[1]], DType::F32, &mut rng) * scale as f32).requires_grad_(true)?);
            params.push(Tensor::zeros(&[w[1]], DType::F32).requires_grad_(true)?);
        }
        Ok(Mlp { params })
    }

    /// The logits of a batch.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let p = &self.params;
        let h = x.matmul(&p[0])?.add(&p[1])?.relu()?;
        let h = h.matmul(&p[2])?.add(&p[3])?.relu()?;
        h.matmul(&p[4])?.add(&p[5])
    }

    /// One SGD training step; returns the loss.
    pub fn train_step(&self, x: &Tensor, labels: &Tensor, lr: f32) -> Result<Tensor> {
        self.params.iter().for_each(Tensor::zero_grad);
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

/// A graph traced lazily on the first call (the first call is not timed).
pub struct Lazy {
    name: &'static str,
    args: Vec<Tensor>,
    build: Box<dyn Fn(&[Tensor]) -> Result<Vec<Tensor>>>,
    function: Option<ConcreteFunction>,
}

impl Lazy {
    pub fn new(name: &'static str, args: Vec<Tensor>, build: impl Fn(&[Tensor]) -> Result<Vec<Tensor>> + 'static) -> Lazy {
        Lazy { name, args, build: Box::new(build), function: None }
    }

    /// Traces on the first call, then runs the graph.
    pub fn call(&mut self) -> Result<Vec<Tensor>> {
        if self.function.is_none() {
            let names: Vec<String> = (0..self.args.len()).map(|i| format!("arg{i}")).collect();
            let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&self.args).collect();
            let f = ConcreteFunction::trace(self.name, &named, || (self.build)(&self.args))?;
            self.function = Some(f);
        }
        let args: Vec<&Tensor> = self.args.iter().collect();
        self.function.as_ref().expect("traced above").call(&args)
    }
}
