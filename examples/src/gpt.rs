//! A GPT-style decoder (nanoGPT's shape): learned token and position embeddings, blocks of
//! pre-LayerNorm causal self-attention and a GELU (tanh) MLP with residual adds, a final
//! LayerNorm and an output projection to the vocabulary (not tied). Used by the `gpt`
//! example and by benchmark workload W7.

use tensor_core::function::Flattener;
use tensor_core::nn::{CausalSelfAttention, Dropout, Embedding, Gelu, LayerNorm, Linear, Module};
use tensor_core::optim::{AdamW, Optimizer};
use tensor_core::prelude::*;

/// The shape of a [`Gpt`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GptConfig {
    /// Tokens in the vocabulary.
    pub vocab: usize,
    /// The longest sequence (the number of learned positions).
    pub context: usize,
    /// Blocks.
    pub layers: usize,
    /// The width of the residual stream.
    pub d_model: usize,
    /// Attention heads (each `d_model / heads` wide).
    pub heads: usize,
    /// The width of the MLP's hidden layer.
    pub mlp: usize,
    /// Dropout after the embeddings, on the attention weights and after each residual branch.
    pub dropout: f64,
}

impl GptConfig {
    /// W7's model (docs/WORKLOADS.md): vocab 1024, context 128, 2 blocks of width 256 with 4
    /// heads and an MLP of 1024, no dropout.
    pub fn w7() -> GptConfig {
        GptConfig { vocab: 1024, context: 128, layers: 2, d_model: 256, heads: 4, mlp: 1024, dropout: 0.0 }
    }
}

/// One block: `x + attn(ln1(x))`, then `x + mlp(ln2(x))`.
struct Block {
    ln1: LayerNorm,
    attn: CausalSelfAttention,
    ln2: LayerNorm,
    fc: Linear,
    fc2: Linear,
    drop: Dropout,
}

impl Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.add(&self.attn.forward(&self.ln1.forward(x)?)?)?;
        let h = Gelu::tanh().forward(&self.fc.forward(&self.ln2.forward(&x)?)?)?;
        x.add(&self.drop.forward(&self.fc2.forward(&h)?)?)
    }

    fn parameters(&self) -> Vec<Tensor> {
        let mut p = self.ln1.parameters();
        p.extend(self.attn.parameters());
        p.extend(self.ln2.parameters());
        p.extend(self.fc.parameters());
        p.extend(self.fc2.parameters());
        p
    }

    fn set_training(&mut self, training: bool) {
        self.attn.set_training(training);
        self.drop.set_training(training);
    }
}

/// The decoder. Its parameters are in the order of the peers' W7 (`wte`, `wpe`, per block
/// ln1, attention, proj, ln2, fc, fc2, then the final LayerNorm and the head).
pub struct Gpt {
    config: GptConfig,
    wte: Embedding,
    wpe: Embedding,
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    head: Linear,
    drop: Dropout,
}

impl Gpt {
    /// A model with weights drawn from normal(0, 0.02) and zero biases (GPT-2's
    /// initialization), from `seed`; dropout masks are drawn from `dropout_rng`.
    pub fn new(config: GptConfig, seed: u64, dropout_rng: &Generator) -> Result<Gpt> {
        let init = Generator::new(seed);
        let normal = |shape: &[usize]| -> Result<Tensor> { Tensor::randn_gen(shape, DType::F32, &init)?.mul(0.02) };
        let zeros = |n: usize| Tensor::zeros(&[n], DType::F32);
        // PyTorch's layout: a weight [out, in].
        let linear = |i: usize, o: usize, bias: bool| -> Result<Linear> { Linear::from_tensors(normal(&[o, i])?, bias.then(|| zeros(o))) };
        let (d, heads) = (config.d_model, config.heads);
        let dropout = || Dropout::new(config.dropout, dropout_rng);
        let wte = Embedding::from_tensor(normal(&[config.vocab, d])?)?;
        let wpe = Embedding::from_tensor(normal(&[config.context, d])?)?;
        let mut blocks = Vec::new();
        for _ in 0..config.layers {
            let attn =
                CausalSelfAttention::from_linears(linear(d, 3 * d, true)?, linear(d, d, true)?, heads)?.with_dropout(config.dropout, dropout_rng)?;
            blocks.push(Block {
                ln1: LayerNorm::new(d, 1e-5, DType::F32)?,
                attn,
                ln2: LayerNorm::new(d, 1e-5, DType::F32)?,
                fc: linear(d, config.mlp, true)?,
                fc2: linear(config.mlp, d, true)?,
                drop: dropout()?,
            });
        }
        let ln_f = LayerNorm::new(d, 1e-5, DType::F32)?;
        let head = linear(d, config.vocab, false)?;
        Ok(Gpt { config, wte, wpe, blocks, ln_f, head, drop: dropout()? })
    }

    /// The shape.
    pub fn config(&self) -> &GptConfig {
        &self.config
    }

    /// The logits `[b, t, vocab]` for tokens `[b, t]` (i64), `t` at most the context.
    pub fn forward(&self, tokens: &Tensor) -> Result<Tensor> {
        let t = tokens.shape().dims()[1];
        let positions = self.wpe.weight().narrow(0, 0, t)?;
        let mut x = self.drop.forward(&self.wte.forward(tokens)?.add(&positions)?)?;
        for block in &self.blocks {
            x = block.forward(&x)?;
        }
        self.head.forward(&self.ln_f.forward(&x)?)
    }

    /// The mean cross-entropy of the next-token predictions for `tokens` against `targets`
    /// (both `[b, t]`, i64).
    pub fn loss(&self, tokens: &Tensor, targets: &Tensor) -> Result<Tensor> {
        let logits = self.forward(tokens)?;
        logits.reshape([-1, self.config.vocab as isize])?.cross_entropy(&targets.reshape([-1])?)
    }

    /// Every trainable tensor.
    pub fn parameters(&self) -> Vec<Tensor> {
        let mut p = vec![self.wte.weight().clone(), self.wpe.weight().clone()];
        p.extend(self.blocks.iter().flat_map(Block::parameters));
        p.extend(self.ln_f.parameters());
        p.extend(self.head.parameters());
        p
    }

    /// Switches every dropout between training and evaluation mode.
    pub fn set_training(&mut self, training: bool) {
        self.drop.set_training(training);
        self.blocks.iter_mut().for_each(|b| b.set_training(training));
    }

    /// True when dropout is active (training mode with a probability above 0).
    pub fn training(&self) -> bool {
        self.drop.training() && self.config.dropout > 0.0
    }
}

/// As a graph-function argument: the parameters are leaves, and the dropout layers' mode and
/// generator state (one generator; its state is flattened once per layer, as an alias).
impl GraphArg for Gpt {
    fn flatten(&self, f: &mut Flattener) {
        self.parameters().flatten(f);
        self.drop.flatten(f);
    }
}

/// One training step: zero the grads, loss, backward, AdamW; returns the loss.
pub fn train_step(model: &Gpt, opt: &AdamW, tokens: &Tensor, targets: &Tensor) -> Result<Tensor> {
    opt.zero_grad()?;
    let loss = model.loss(tokens, targets)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

/// [`train_step`] as a graph function: traced once, then replayed.
#[graph_fn]
pub fn train_step_graph(model: &Gpt, opt: &AdamW, tokens: &Tensor, targets: &Tensor) -> Result<Tensor> {
    train_step(model, opt, tokens, targets)
}
