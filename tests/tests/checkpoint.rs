//! Checkpoints: state dicts named by the GraphArg derive, safetensors files, optimizer
//! state, resuming training bit for bit, PyTorch's files, and damaged files.

use proptest::prelude::*;
use std::path::PathBuf;
use tensor_core::io::{self, prefixed, unprefixed, StateDict};
use tensor_core::nn::{Conv2d, Linear, Module};
use tensor_core::optim::{Adam, Optimizer, Sgd, SgdConfig};
use tensor_core::prelude::*;

/// A path in the temp dir, unique to this process and `name`.
fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tc-checkpoint-{}-{name}", std::process::id()))
}

fn bits(t: &Tensor) -> Vec<u64> {
    let s = t.to_storage().unwrap();
    match t.dtype() {
        DType::F32 => s.array::<f32>().unwrap().iter().map(|v| v.to_bits() as u64).collect(),
        DType::F64 => s.array::<f64>().unwrap().iter().map(|v| v.to_bits()).collect(),
        DType::I64 => s.array::<i64>().unwrap().iter().map(|&v| v as u64).collect(),
        DType::I32 => s.array::<i32>().unwrap().iter().map(|&v| v as u64).collect(),
        DType::Bool => s.array::<bool>().unwrap().iter().map(|&v| v as u64).collect(),
    }
}

// ----------------------------------------------------------------------------- the model

#[derive(GraphArg)]
struct Block {
    conv: Conv2d,
    scale: Option<Tensor>,
}

#[derive(GraphArg)]
struct Net {
    blocks: Vec<Block>,
    head: Linear,
    #[graph_arg(static)]
    name: String,
}

impl Net {
    fn new(seed: u64) -> Result<Net> {
        let rng = &mut tensor_core::seeded_rng(seed);
        let blocks = vec![
            Block {
                conv: Conv2d::new(1, 3, [3, 3], DType::F32, rng)?.with_padding([1, 1]),
                scale: Some(Tensor::ones(&[1], DType::F32).requires_grad_(true)?),
            },
            Block { conv: Conv2d::new_without_bias(3, 2, [3, 3], DType::F32, rng)?, scale: None },
        ];
        Ok(Net { blocks, head: Linear::new(2 * 4 * 4, 3, DType::F32, rng)?, name: "net".into() })
    }

    /// The live parameter handles, in state dict order.
    fn parameters(&self) -> Vec<Tensor> {
        let mut p = Vec::new();
        for b in &self.blocks {
            p.extend(b.conv.parameters());
            p.extend(b.scale.clone());
        }
        p.extend(self.head.parameters());
        p
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        for b in &self.blocks {
            h = b.conv.forward(&h)?.tanh()?;
            if let Some(s) = &b.scale {
                h = h.mul(s)?;
            }
        }
        self.head.forward(&h.flatten_from(1)?)
    }

    fn loss(&self, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        self.forward(x)?.cross_entropy(y)
    }
}

fn batch(seed: u64) -> (Tensor, Tensor) {
    let x = Tensor::randn(&[4, 1, 6, 6], DType::F32, seed);
    let y = Tensor::from_vec((0..4).map(|i| (i + seed as i64) % 3).collect::<Vec<i64>>(), &[4]).unwrap();
    (x, y)
}

#[test]
fn state_dict_names_come_from_fields_vec_elements_and_options() {
    let net = Net::new(0).unwrap();
    let names: Vec<String> = net.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["blocks.0.conv.weight", "blocks.0.conv.bias", "blocks.0.scale", "blocks.1.conv.weight", "head.weight", "head.bias"]);
    // The entries are the parameters' values, in that order.
    for ((_, saved), live) in net.state_dict().iter().zip(net.parameters()) {
        assert_eq!(bits(saved), bits(&live));
    }
}

#[test]
fn a_saved_model_loads_into_another_bit_for_bit_and_keeps_its_handles() -> Result<()> {
    let (a, mut b) = (Net::new(1)?, Net::new(2)?);
    let path = temp("roundtrip.safetensors");
    io::save_safetensors(&a, &path)?;
    let handles = b.parameters();
    io::load_safetensors(&mut b, &path)?;
    for ((h, pa), pb) in handles.iter().zip(a.parameters()).zip(b.parameters()) {
        assert!(h.same_as(&pb), "loading keeps the model's own tensors");
        assert!(pb.requires_grad(), "and their requires_grad");
        assert_eq!(bits(&pa), bits(&pb));
    }
    let (x, _) = batch(3);
    assert_eq!(bits(&a.forward(&x)?), bits(&b.forward(&x)?));
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

#[test]
fn loading_a_file_of_another_model_names_the_first_mismatch_and_changes_nothing() -> Result<()> {
    let path = temp("other.safetensors");
    let mut net = Net::new(4)?;
    let before: Vec<Vec<u64>> = net.parameters().iter().map(bits).collect();
    let check = |named: &[(String, Tensor)], net: &mut Net, expected: &str| {
        io::save_tensors(&path, named).unwrap();
        let err = io::load_safetensors(net, &path).unwrap_err();
        assert!(err.to_string().contains(expected), "{err}\nexpected: {expected}");
        assert!(err.to_string().ends_with("nothing was loaded"), "{err}");
        let after: Vec<Vec<u64>> = net.parameters().iter().map(bits).collect();
        assert_eq!(before, after, "nothing changed after: {err}");
    };
    let good = Net::new(5)?.state_dict();
    let mut shape = good.clone();
    shape[4].1 = Tensor::zeros(&[3, 32], DType::F32); // PyTorch's [out, in] layout
    check(&shape, &mut net, "tensor `head.weight`: the model has f32[32, 3], the tensor to load is f32[3, 32]");
    let mut dtype = good.clone();
    dtype[2].1 = Tensor::ones(&[1], DType::F64);
    check(&dtype, &mut net, "tensor `blocks.0.scale`: the model has f32[1], the tensor to load is f64[1]");
    check(&good[1..], &mut net, "tensor `blocks.0.conv.weight` is missing");
    let extra = [good.clone(), vec![("blocks.1.scale".to_string(), Tensor::ones(&[1], DType::F32))]].concat();
    check(&extra, &mut net, "tensor `blocks.1.scale` is not a tensor of the model");
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

// ----------------------------------------------------------------------------- resuming

/// Runs `steps` training steps (`step` gives each loss) and returns the losses.
fn train(steps: std::ops::Range<u64>, step: &mut dyn FnMut(&Tensor, &Tensor) -> Result<f32>) -> Result<Vec<f32>> {
    steps.map(|s| batch(100 + s)).map(|(x, y)| step(&x, &y)).collect()
}

/// One eager training step of `net` with `opt`.
fn eager_step(net: &Net, opt: &dyn Optimizer, x: &Tensor, y: &Tensor) -> Result<f32> {
    opt.zero_grad()?;
    let loss = net.loss(x, y)?;
    loss.backward()?;
    opt.step()?;
    loss.item::<f32>()
}

#[graph_fn]
fn graph_step_adam(net: &Net, opt: &Adam, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    opt.zero_grad()?;
    let loss = net.loss(x, y)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

#[graph_fn]
fn graph_step_sgd(net: &Net, opt: &Sgd, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    opt.zero_grad()?;
    let loss = net.loss(x, y)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

/// A checkpoint of a model and its optimizer, and the step count, in one file.
fn save_checkpoint(path: &PathBuf, net: &Net, opt_state: Vec<(String, Tensor)>, step: i64) -> Result<()> {
    let mut named = prefixed("model", net.state_dict());
    named.extend(prefixed("optimizer", opt_state));
    named.push(("step".into(), Tensor::scalar(step)));
    io::save_tensors(path, &named)
}

#[derive(Clone, Copy)]
enum Kind {
    Adam,
    SgdMomentum,
}

fn make_opt(kind: Kind, net: &Net) -> Result<Box<dyn Resumable>> {
    Ok(match kind {
        Kind::Adam => Box::new(Adam::new(net.parameters(), 0.01)?),
        Kind::SgdMomentum => Box::new(Sgd::with_config(net.parameters(), SgdConfig { lr: 0.05, momentum: 0.9, weight_decay: 1e-3 })?),
    })
}

/// What the resume test needs of an optimizer.
trait Resumable {
    fn opt(&self) -> &dyn Optimizer;
    fn state(&self) -> Vec<(String, Tensor)>;
    fn load(&mut self, named: &[(String, Tensor)]) -> Result<()>;
    fn graph_step(&self, net: &Net, x: &Tensor, y: &Tensor) -> Result<Tensor>;
}

impl Resumable for Adam {
    fn opt(&self) -> &dyn Optimizer {
        self
    }
    fn state(&self) -> Vec<(String, Tensor)> {
        self.state_dict()
    }
    fn load(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        self.load_state_dict(named)
    }
    fn graph_step(&self, net: &Net, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        graph_step_adam(net, self, x, y)
    }
}

impl Resumable for Sgd {
    fn opt(&self) -> &dyn Optimizer {
        self
    }
    fn state(&self) -> Vec<(String, Tensor)> {
        self.state_dict()
    }
    fn load(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        self.load_state_dict(named)
    }
    fn graph_step(&self, net: &Net, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        graph_step_sgd(net, self, x, y)
    }
}

/// Trains 6 steps straight, and 3 steps + checkpoint + a fresh model and optimizer (other
/// seed) resumed from the file + 3 steps: the losses and final parameters must be the same
/// bits.
fn resumes_bit_for_bit(kind: Kind, graph: bool) -> Result<()> {
    let step = |net: &Net, opt: &dyn Resumable, x: &Tensor, y: &Tensor| -> Result<f32> {
        if graph {
            opt.graph_step(net, x, y)?.item::<f32>()
        } else {
            eager_step(net, opt.opt(), x, y)
        }
    };
    let straight_net = Net::new(7)?;
    let straight_opt = make_opt(kind, &straight_net)?;
    let straight = train(0..6, &mut |x, y| step(&straight_net, straight_opt.as_ref(), x, y))?;

    let first_net = Net::new(7)?;
    let first_opt = make_opt(kind, &first_net)?;
    let mut resumed = train(0..3, &mut |x, y| step(&first_net, first_opt.as_ref(), x, y))?;
    let path = temp(&format!("resume-{}-{graph}.safetensors", kind as u8));
    save_checkpoint(&path, &first_net, first_opt.state(), 3)?;
    drop((first_net, first_opt));

    let mut net = Net::new(99)?;
    let mut opt = make_opt(kind, &net)?;
    let named = io::load_tensors(&path)?;
    net.load_state_dict(&unprefixed("model", &named))?;
    opt.load(&unprefixed("optimizer", &named))?;
    let start = named.iter().find(|(n, _)| n == "step").unwrap().1.item::<i64>()? as u64;
    resumed.extend(train(start..6, &mut |x, y| step(&net, opt.as_ref(), x, y))?);

    let as_bits = |v: &[f32]| v.iter().map(|l| l.to_bits()).collect::<Vec<_>>();
    assert_eq!(as_bits(&straight), as_bits(&resumed), "losses {straight:?} vs {resumed:?}");
    for (a, b) in straight_net.parameters().iter().zip(net.parameters()) {
        assert_eq!(bits(a), bits(&b));
    }
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

#[test]
fn adam_training_resumed_from_a_checkpoint_gives_the_same_losses_bit_for_bit() -> Result<()> {
    resumes_bit_for_bit(Kind::Adam, false)
}

#[test]
fn sgd_momentum_training_resumed_from_a_checkpoint_gives_the_same_losses_bit_for_bit() -> Result<()> {
    resumes_bit_for_bit(Kind::SgdMomentum, false)
}

#[test]
fn graph_training_resumed_from_a_checkpoint_gives_the_same_losses_bit_for_bit() -> Result<()> {
    resumes_bit_for_bit(Kind::Adam, true)?;
    resumes_bit_for_bit(Kind::SgdMomentum, true)
}

#[test]
fn optimizer_state_names_are_pytorchs() -> Result<()> {
    let net = Net::new(0)?;
    let adam = Adam::new(net.parameters(), 0.01)?;
    let names: Vec<String> = adam.state_dict().into_iter().map(|(n, _)| n).take(3).collect();
    assert_eq!(names, ["state.0.step", "state.0.exp_avg", "state.0.exp_avg_sq"]);
    let sgd = Sgd::with_config(net.parameters(), SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() })?;
    assert_eq!(sgd.state_dict()[5].0, "state.5.momentum_buffer");
    Ok(())
}

// ----------------------------------------------------------------------------- PyTorch

/// A `torch.nn.Linear`: weight `[out, in]`, as PyTorch lays it out.
#[derive(GraphArg)]
struct TorchLinear {
    weight: Tensor,
    bias: Tensor,
}

impl TorchLinear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight.transpose(0, 1)?)?.add(&self.bias)
    }
}

/// The MLP of `tests/fixtures/make_torch_mlp.py`: layers in a `ModuleList`.
#[derive(GraphArg)]
struct TorchMlp {
    layers: Vec<TorchLinear>,
}

impl TorchMlp {
    fn zeros() -> TorchMlp {
        let linear = |i: usize, o: usize| TorchLinear { weight: Tensor::zeros(&[o, i], DType::F32), bias: Tensor::zeros(&[o], DType::F32) };
        TorchMlp { layers: vec![linear(4, 16), linear(16, 16), linear(16, 3)] }
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.layers[0].forward(x)?.tanh()?;
        let h = self.layers[1].forward(&h)?.relu()?;
        self.layers[2].forward(&h)
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

#[test]
fn a_state_dict_written_by_pytorch_loads_and_reproduces_its_outputs() -> Result<()> {
    let mut mlp = TorchMlp::zeros();
    io::load_safetensors(&mut mlp, fixture("torch_mlp.safetensors"))?;
    let io_tensors = io::load_tensors(fixture("torch_mlp_io.safetensors"))?;
    let get = |name: &str| io_tensors.iter().find(|(n, _)| n == name).unwrap().1.clone();
    let (x, expected) = (get("x"), get("y"));
    let y = mlp.forward(&x)?;
    assert_eq!(y.dims(), vec![5, 3]);
    for (a, b) in y.to_vec::<f32>()?.iter().zip(expected.to_vec::<f32>()?) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs PyTorch's {b}");
    }
    // The same model written here reads back in PyTorch's names.
    let path = temp("torch-names.safetensors");
    io::save_safetensors(&mlp, &path)?;
    let mut names: Vec<String> = io::load_tensors(&path)?.into_iter().map(|(n, _)| n).collect();
    names.sort();
    assert_eq!(names, ["layers.0.bias", "layers.0.weight", "layers.1.bias", "layers.1.weight", "layers.2.bias", "layers.2.weight"]);
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

// ----------------------------------------------------------------------------- bad files

#[test]
fn truncated_flipped_and_foreign_checkpoints_are_errors() -> Result<()> {
    let net = Net::new(3)?;
    let path = temp("good.safetensors");
    io::save_safetensors(&net, &path)?;
    let good = std::fs::read(&path).unwrap();
    let bad = temp("bad.safetensors");
    let load = |bytes: &[u8]| {
        std::fs::write(&bad, bytes).unwrap();
        io::load_safetensors(&mut Net::new(4).unwrap(), &bad)
    };
    let err = load(&good[..good.len() - 3]).unwrap_err().to_string();
    assert!(err.contains("not a valid safetensors file"), "{err}");
    let mut flipped = good.clone();
    let last = flipped.len() - 5; // a byte of the last tensor's data
    flipped[last] ^= 0x10;
    let err = load(&flipped).unwrap_err().to_string();
    assert!(err.contains("checksum") && err.contains("changed or was damaged"), "{err}");
    let err = load(b"").unwrap_err().to_string();
    assert!(err.contains("not a valid safetensors file"), "{err}");
    let err = io::load_tensors(temp("missing.safetensors")).unwrap_err().to_string();
    assert!(err.contains("cannot read"), "{err}");
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&bad).unwrap();
    Ok(())
}

/// Loading `bytes` into a model: an `Err`, or exactly the values that were saved (checked
/// when `exact`; several edits may damage the checksum's own entry and the data at once, and
/// such a file reads as one without a checksum, as files from elsewhere do).
fn load_mutated(bytes: &[u8], saved: &[Vec<u64>], path: &PathBuf, exact: bool) {
    std::fs::write(path, bytes).unwrap();
    let mut net = Net::new(4).unwrap();
    if io::load_safetensors(&mut net, path).is_ok() && exact {
        let loaded: Vec<Vec<u64>> = net.parameters().iter().map(bits).collect();
        assert_eq!(loaded, saved, "a changed file loaded different values without an error");
    }
}

/// Applies `edits` (position, byte, kind: flip, replace, cut, insert) to `bytes`.
fn mutate(bytes: &mut Vec<u8>, edits: &[(prop::sample::Index, u8, u8)]) {
    for (at, byte, kind) in edits {
        if bytes.is_empty() {
            return;
        }
        let i = at.index(bytes.len());
        match kind {
            0 => bytes[i] ^= (*byte).max(1),
            1 => bytes[i] = *byte,
            2 => bytes.truncate(i),
            _ => bytes.insert(i, *byte),
        }
    }
}

proptest! {
    // Bounded to a second or two in `cargo test`; PROPTEST_CASES=20000 runs longer (see
    // docs/EXPORT.md).
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A checkpoint with a byte flipped, replaced, cut or inserted anywhere loads the saved
    /// values or fails with an `Err`; with several such edits it never panics.
    #[test]
    fn mutated_checkpoints_load_exactly_or_fail(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..5)) {
        let net = Net::new(3).unwrap();
        let saved: Vec<Vec<u64>> = net.parameters().iter().map(bits).collect();
        let path = temp(&format!("fuzz-{:?}.safetensors", std::thread::current().id()));
        io::save_safetensors(&net, &path).unwrap();
        let good = std::fs::read(&path).unwrap();
        let mut one = good.clone();
        mutate(&mut one, &edits[..1]);
        load_mutated(&one, &saved, &path, true);
        let mut several = good;
        mutate(&mut several, &edits);
        load_mutated(&several, &saved, &path, false);
        std::fs::remove_file(&path).ok();
    }
}
