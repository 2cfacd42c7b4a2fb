//! A `#[graph_fn]` method on a `#[derive(GraphArg)]` model: an MLP training step on `&self`
//! — forward, cross-entropy, `backward()`, an SGD update and `zero_grad` — traced into one
//! graph, leaving bit-for-bit the parameters the eager run of the same code leaves.

use tensor_core::prelude::*;

#[derive(GraphArg)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

impl Mlp {
    fn new(inputs: usize, hidden: usize, classes: usize, seed: u64) -> Result<Mlp> {
        let param = |shape: &[usize], seed: u64, scale: f64| (Tensor::randn(shape, DType::F32, seed) * scale).requires_grad_(true);
        Ok(Mlp {
            w1: param(&[inputs, hidden], seed, 0.5)?,
            b1: param(&[hidden], seed + 1, 0.1)?,
            w2: param(&[hidden, classes], seed + 2, 0.5)?,
            b2: param(&[classes], seed + 3, 0.1)?,
        })
    }

    fn params(&self) -> [&Tensor; 4] {
        [&self.w1, &self.b1, &self.w2, &self.b2]
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.w1)?.add(&self.b1)?.relu()?.matmul(&self.w2)?.add(&self.b2)
    }

    /// One SGD step, as plain eager code.
    fn step(&self, x: &Tensor, labels: &Tensor, lr: f32) -> Result<Tensor> {
        let loss = self.forward(x)?.cross_entropy(labels)?;
        loss.backward()?;
        no_grad(|| -> Result<()> {
            for p in self.params() {
                let g = p.grad().ok_or_else(|| Error::ControlFlow { construct: "a parameter without a gradient".into() })?;
                p.sub_(&g.mul(lr)?)?;
                p.zero_grad()?;
            }
            Ok(())
        })?;
        Ok(loss)
    }

    /// The same step, traced into one graph on the first call per signature.
    #[graph_fn]
    fn train_step(&self, x: &Tensor, labels: &Tensor, lr: f32) -> Result<Tensor> {
        self.step(x, labels, lr)
    }
}

/// A small classification problem: 4 inputs, 3 classes decided by the inputs' signs.
fn batch(n: usize, seed: u64) -> Result<(Tensor, Tensor)> {
    let x = Tensor::randn(&[n, 4], DType::F32, seed);
    let v = x.to_vec::<f32>()?;
    let labels: Vec<i64> = v
        .chunks(4)
        .map(|r| {
            if r[0] + r[1] > 0.5 {
                0
            } else if r[2] - r[3] > 0.0 {
                1
            } else {
                2
            }
        })
        .collect();
    Ok((x, Tensor::from_vec(labels, &[n])?))
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>().expect("concrete").iter().map(|v| v.to_bits()).collect()
}

#[test]
fn a_traced_training_step_matches_the_eager_run_bit_for_bit() -> Result<()> {
    let eager = Mlp::new(4, 16, 3, 7)?;
    let graph = Mlp::new(4, 16, 3, 7)?;
    let batches: Vec<(Tensor, Tensor)> = (0..4).map(|i| batch(32, 100 + i)).collect::<Result<_>>()?;
    let mut losses = Vec::new();
    for epoch in 0..10 {
        for (x, labels) in &batches {
            let a = eager.step(x, labels, 0.1)?;
            let b = graph.train_step(x, labels, 0.1)?;
            assert_eq!(bits(&a), bits(&b), "loss of epoch {epoch}");
            losses.push(b.item::<f32>()?);
        }
    }
    for (p, q) in eager.params().into_iter().zip(graph.params()) {
        tests::assert_bits_eq(p, q);
        assert!(q.requires_grad() && q.is_leaf());
        assert!(p.grad().is_none() && q.grad().is_none(), "zero_grad inside the graph cleared the caller's .grad");
    }
    let f = tensor_core::function::lookup("Mlp::train_step").expect("registered");
    assert!(std::ptr::eq(f, tensor_core::function::lookup("train_step").expect("the bare method name finds it")));
    assert_eq!(f.trace_count(), 1, "one graph for the whole training loop");
    assert!(losses[losses.len() - 1] < losses[0] * 0.8, "training made progress: {losses:?}");
    let text = f.concrete_functions()[0].to_text();
    let header =
        "graph Mlp::train_step(self.w1: f32[4, 16], self.b1: f32[16], self.w2: f32[16, 3], self.b2: f32[3], x: f32[32, 4], labels: i64[32]) {";
    assert_eq!(text.lines().next(), Some(header), "{text}");
    for write in ["self.w1 <-", "self.b1 <-", "self.w2 <-", "self.b2 <-"] {
        assert!(text.contains(write), "the update is written back to {write}:\n{text}");
    }

    // A new batch size is a new signature; the parameters stay identical.
    let (x, labels) = batch(8, 999)?;
    for _ in 0..3 {
        assert_eq!(bits(&eager.step(&x, &labels, 0.05)?), bits(&graph.train_step(&x, &labels, 0.05)?));
    }
    assert_eq!(f.trace_count(), 2);
    assert_eq!(f.retrace_reasons()[1], "arg x: shape [32, 4] -> [8, 4]; arg labels: shape [32] -> [8]; arg lr: 0.1 -> 0.05");
    for (p, q) in eager.params().into_iter().zip(graph.params()) {
        tests::assert_bits_eq(p, q);
    }
    Ok(())
}
