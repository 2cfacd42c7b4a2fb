//! W7: a GPT-style decoder's training step with AdamW (docs/WORKLOADS.md).

use crate::gpt::{Gpt, GptConfig};
use tensor_core::optim::{AdamConfig, AdamW};
use tensor_core::prelude::*;

/// The model (weights normal(0, 0.02) from `seed`, no dropout) and its AdamW (lr 3e-4, betas
/// 0.9/0.95, eps 1e-8, weight decay 0.1 on every parameter).
pub fn setup(seed: u64) -> Result<(Gpt, AdamW)> {
    setup_on(seed, Device::Cpu)
}

/// [`setup`] with the model on `device`: built on the CPU, its parameters moved there in
/// place, then the optimizer made (its state lives where the parameters do).
pub fn setup_on(seed: u64, device: Device) -> Result<(Gpt, AdamW)> {
    let model = Gpt::new(GptConfig::w7(), seed, &Generator::new(seed))?;
    for p in model.parameters() {
        p.to_device_(device)?;
    }
    let config = AdamConfig { lr: 3e-4, betas: (0.9, 0.95), eps: 1e-8, weight_decay: 0.1 };
    let opt = AdamW::with_config(model.parameters(), config)?;
    Ok((model, opt))
}

/// Tokens and targets, i64 `[4, 128]` in `0..1024`, from `seed`.
pub fn batch(seed: u64) -> Result<(Tensor, Tensor)> {
    let c = GptConfig::w7();
    let ids = |s: u64| Tensor::rand(&[4, c.context], DType::F64, s).mul(c.vocab as f64)?.cast(DType::I64);
    Ok((ids(seed)?, ids(seed + 1)?))
}
