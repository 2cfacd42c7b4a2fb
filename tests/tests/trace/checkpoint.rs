//! Checkpoints: state dicts named by the GraphArg derive, safetensors files, optimizer
//! state, resuming training bit for bit, and damaged files (PyTorch's files:
//! `pytorch_fixtures.rs`).

use proptest::prelude::*;
use std::path::PathBuf;
use tensor_core::io::{self, prefixed, unprefixed, StateDict};
use tensor_core::nn::{CausalSelfAttention, Conv2d, Dropout, Embedding, Gelu, LayerNorm, Linear, Module, ReLU, Sequential};
use tensor_core::optim::{Adam, Optimizer, Sgd, SgdConfig};
use tensor_core::prelude::*;

/// A path in the temp dir, unique to this process and `name`.
fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tc-checkpoint-{}-{name}", std::process::id()))
}

fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        DType::F32 => t.to_vec::<f32>().unwrap().iter().map(|v| v.to_bits() as u64).collect(),
        DType::F64 => t.to_vec::<f64>().unwrap().iter().map(|v| v.to_bits()).collect(),
        DType::I64 => t.to_vec::<i64>().unwrap().iter().map(|&v| v as u64).collect(),
        DType::I32 => t.to_vec::<i32>().unwrap().iter().map(|&v| v as u64).collect(),
        DType::Bool => t.to_vec::<bool>().unwrap().iter().map(|&v| v as u64).collect(),
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
        let rng = &Generator::new(seed);
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
    let names: Vec<String> = net.state_dict().unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["blocks.0.conv.weight", "blocks.0.conv.bias", "blocks.0.scale", "blocks.1.conv.weight", "head.weight", "head.bias"]);
    // The entries are the parameters' values, in that order.
    for ((_, saved), live) in net.state_dict().unwrap().iter().zip(net.parameters()) {
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
fn loading_a_file_of_another_model_names_the_mismatches_and_changes_nothing() -> Result<()> {
    let path = temp("other.safetensors");
    let mut net = Net::new(4)?;
    let before: Vec<Vec<u64>> = net.parameters().iter().map(bits).collect();
    let check = |named: &[(String, Tensor)], net: &mut Net, expected: &str| {
        io::save_tensors(&path, named).unwrap();
        let err = io::load_safetensors(net, &path).unwrap_err();
        assert!(err.to_string().contains(expected), "{err}\nexpected: {expected}");
        assert!(err.to_string().contains("; nothing was loaded"), "{err}");
        let after: Vec<Vec<u64>> = net.parameters().iter().map(bits).collect();
        assert_eq!(before, after, "nothing changed after: {err}");
    };
    let good = Net::new(5)?.state_dict()?;
    let mut shape = good.clone();
    shape[4].1 = Tensor::zeros(&[32, 3], DType::F32); // [in, out], the transpose of PyTorch's layout
    check(&shape, &mut net, "tensor `head.weight`: the model has f32[3, 32], the tensor to load is f32[32, 3]");
    let mut dtype = good.clone();
    dtype[2].1 = Tensor::ones(&[1], DType::F64);
    check(&dtype, &mut net, "tensor `blocks.0.scale`: the model has f32[1], the tensor to load is f64[1]");
    check(&good[1..], &mut net, "load_state_dict: 1 missing key: `blocks.0.conv.weight`; nothing was loaded");
    let extra = [good.clone(), vec![("blocks.1.scale".to_string(), Tensor::ones(&[1], DType::F32))]].concat();
    check(&extra, &mut net, "load_state_dict: 1 unexpected key: `blocks.1.scale`; nothing was loaded");
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

// ----------------------------------------------------------------------------- nn containers

/// A model of `nn` containers: a `Sequential` with parameterless layers between its
/// `Linear`s, a `Vec` and an array of layers, and `Option`s of one.
#[derive(GraphArg)]
struct Stack {
    body: Sequential,
    heads: Vec<Linear>,
    norms: [LayerNorm; 1],
    extra: Option<Linear>,
    none: Option<Linear>,
}

impl Stack {
    fn new(seed: u64) -> Result<Stack> {
        let rng = &Generator::new(seed);
        let body = Sequential::new().add(Linear::new(3, 4, DType::F32, rng)?).add(ReLU).add(Linear::new(4, 4, DType::F32, rng)?).add(Gelu::new());
        let heads = vec![Linear::new(4, 3, DType::F32, rng)?];
        let norms = [LayerNorm::new(3, 1e-5, DType::F32)?];
        Ok(Stack { body, heads, norms, extra: Some(Linear::new_without_bias(3, 3, DType::F32, rng)?), none: None })
    }

    #[graph_fn]
    fn predict(&self, x: &Tensor) -> Result<Tensor> {
        self.forward(x)
    }

    #[graph_fn]
    fn train_step(&self, opt: &Sgd, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        opt.zero_grad()?;
        let loss = self.forward(x)?.cross_entropy(y)?;
        loss.backward()?;
        opt.step()?;
        Ok(loss)
    }
}

/// A model is a `Module` by its `forward` alone: `parameters` are its flattening's.
impl Module for Stack {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.norms[0].forward(&self.heads[0].forward(&self.body.forward(x)?)?)?;
        match &self.extra {
            Some(extra) => extra.forward(&h),
            None => Ok(h),
        }
    }
}

const STACK_NAMES: [&str; 9] = [
    "body.0.weight",
    "body.0.bias",
    "body.2.weight",
    "body.2.bias",
    "heads.0.weight",
    "heads.0.bias",
    "norms.0.weight",
    "norms.0.bias",
    "extra.weight",
];

fn stack_input() -> (Tensor, Tensor) {
    (Tensor::randn(&[5, 3], DType::F32, 42), Tensor::from_vec(vec![0i64, 1, 2, 1, 0], &[5]).unwrap())
}

fn names(named: &[(String, Tensor)]) -> Vec<String> {
    named.iter().map(|(n, _)| n.clone()).collect()
}

fn all_bits(m: &Stack) -> Vec<Vec<u64>> {
    m.parameters().iter().map(bits).collect()
}

#[test]
fn nn_layers_and_containers_have_pytorchs_state_dict_names() -> Result<()> {
    let stack = Stack::new(0)?;
    assert_eq!(names(&stack.state_dict()?), STACK_NAMES);
    // The default `parameters` are those tensors, in that order.
    let params = stack.parameters();
    assert_eq!(params.len(), 9);
    assert!(params[2].same_as(stack.body.layers()[2].parameters().first().unwrap()));

    #[derive(GraphArg)]
    struct Decoder {
        wte: Embedding,
        attn: CausalSelfAttention,
        ln: LayerNorm,
        drop: Dropout,
    }
    let rng = &Generator::new(0);
    let attn = CausalSelfAttention::new(4, 2, DType::F32, rng)?;
    let decoder = Decoder {
        wte: Embedding::new(5, 4, DType::F32, rng)?,
        attn,
        ln: LayerNorm::new(4, 1e-5, DType::F32)?,
        drop: Dropout::new(0.1, &Generator::new(0))?,
    };
    let expected =
        ["wte.weight", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias", "ln.weight", "ln.bias", "drop.generator"];
    assert_eq!(names(&decoder.state_dict()?), expected);
    Ok(())
}

#[test]
fn a_model_holding_a_sequential_saves_and_loads_bit_for_bit_in_both_modes() -> Result<()> {
    let (saved, mut fresh) = (Stack::new(1)?, Stack::new(2)?);
    let (x, _) = stack_input();
    let path = temp("sequential.safetensors");
    io::save_safetensors(&saved, &path)?;
    // The file holds the nine tensors (3*4 + 4 + 4*4 + 4 + 4*3 + 3 + 3 + 3 + 3*3 = 66 floats).
    assert_eq!(names(&io::load_tensors(&path)?).len(), 9);
    assert!(std::fs::metadata(&path).unwrap().len() > 66 * 4);

    assert_ne!(bits(&saved.forward(&x)?), bits(&fresh.forward(&x)?), "another init");
    io::load_safetensors(&mut fresh, &path)?;
    assert_eq!(all_bits(&saved), all_bits(&fresh));
    assert_eq!(bits(&saved.forward(&x)?), bits(&fresh.forward(&x)?), "eager");
    assert_eq!(bits(&saved.predict(&x)?), bits(&fresh.predict(&x)?), "graph");
    assert_eq!(bits(&fresh.predict(&x)?), bits(&fresh.forward(&x)?), "graph == eager");
    // The graph reads the Sequential's parameters as inputs, named by position: one trace
    // of `Stack::predict` serves both models.
    let f = tensor_core::function::lookup("Stack::predict").unwrap();
    assert_eq!(f.trace_count(), 1);
    let graph = f.concrete_functions()[0].to_text();
    assert!(graph.contains("self.body.0.weight") && graph.contains("self.body.2.bias"), "{graph}");
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

#[test]
fn a_graph_training_step_updates_a_sequentials_parameters_as_eager_does() -> Result<()> {
    let (eager, graph) = (Stack::new(3)?, Stack::new(3)?);
    let initial = all_bits(&graph);
    let sgd = |m: &Stack| Sgd::with_config(m.parameters(), SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 0.0 });
    let (eager_opt, graph_opt) = (sgd(&eager)?, sgd(&graph)?);
    let (x, y) = stack_input();
    for _ in 0..3 {
        let eager_loss = eager_step_stack(&eager, &eager_opt, &x, &y)?;
        let graph_loss = graph.train_step(&graph_opt, &x, &y)?;
        assert_eq!(bits(&eager_loss), bits(&graph_loss));
    }
    assert_eq!(all_bits(&eager), all_bits(&graph), "the same parameters, bit for bit");
    let moved = initial.iter().zip(all_bits(&graph)).filter(|(a, b)| *a != b).count();
    assert_eq!(moved, 9, "every parameter was updated, the Sequential's included");
    assert_eq!(tensor_core::function::lookup("Stack::train_step").unwrap().trace_count(), 1);
    Ok(())
}

fn eager_step_stack(model: &Stack, opt: &Sgd, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    opt.zero_grad()?;
    let loss = model.forward(x)?.cross_entropy(y)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

#[test]
fn a_strict_load_of_a_file_lacking_parameters_lists_them_and_changes_nothing() -> Result<()> {
    let path = temp("lacking.safetensors");
    let mut model = Stack::new(4)?;
    let before = all_bits(&model);
    let (x, _) = stack_input();
    let outputs = (bits(&model.forward(&x)?), bits(&model.predict(&x)?));
    // The file the model wrote: no tensors at all.
    io::save_tensors(&path, &[])?;
    let err = io::load_safetensors(&mut model, &path).unwrap_err();
    let all = STACK_NAMES.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    assert_eq!(
        err.to_string(),
        format!("load_state_dict: 9 missing keys: {all}; nothing was loaded (a non-strict load takes the names that match and returns the others)")
    );
    // A file without the Sequential's third layer, with a name of another model.
    let mut named = Stack::new(5)?.state_dict()?;
    named.retain(|(n, _)| !n.starts_with("body.2."));
    named.push(("body.1.weight".to_string(), Tensor::zeros(&[4], DType::F32)));
    io::save_tensors(&path, &named)?;
    let err = io::load_safetensors(&mut model, &path).unwrap_err();
    assert!(err.to_string().contains("2 missing keys: `body.2.weight`, `body.2.bias`; 1 unexpected key: `body.1.weight`; nothing"), "{err}");
    assert!(matches!(&err, Error::StateDictKeys { missing, .. } if missing.len() == 2), "{err:#?}");
    assert_eq!(before, all_bits(&model), "the model is unchanged");
    assert_eq!(outputs, (bits(&model.forward(&x)?), bits(&model.predict(&x)?)), "in both modes");
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

#[test]
fn a_non_strict_load_returns_the_missing_and_unexpected_keys() -> Result<()> {
    let path = temp("non-strict.safetensors");
    let (mut model, source) = (Stack::new(6)?, Stack::new(7)?);
    let before = all_bits(&model);
    let mut named = source.state_dict()?;
    named.retain(|(n, _)| !n.starts_with("body.2."));
    named.push(("body.1.weight".to_string(), Tensor::zeros(&[4], DType::F32)));
    io::save_tensors(&path, &named)?;
    let keys = io::load_safetensors_non_strict(&mut model, &path)?;
    assert_eq!(keys.missing, ["body.2.weight", "body.2.bias"]);
    assert_eq!(keys.unexpected, ["body.1.weight"]);
    let (after, wanted) = (all_bits(&model), all_bits(&source));
    for (i, name) in STACK_NAMES.iter().enumerate() {
        let expected = if name.starts_with("body.2.") { &before[i] } else { &wanted[i] };
        assert_eq!(&after[i], expected, "{name}");
    }
    // The graph function reads the loaded values: it agrees with eager on the mixed model.
    let (x, _) = stack_input();
    assert_eq!(bits(&model.predict(&x)?), bits(&model.forward(&x)?));
    // A complete file gives no keys back.
    io::save_safetensors(&source, &path)?;
    assert!(io::load_safetensors_non_strict(&mut model, &path)?.is_empty());
    assert_eq!(all_bits(&model), wanted);
    std::fs::remove_file(&path).unwrap();
    Ok(())
}

/// The model: the Sequential marked `skip`, as the old diagnostic suggested.
#[derive(GraphArg)]
struct Skipping {
    scale: Tensor,
    #[graph_arg(skip)]
    body: Sequential,
}

impl Skipping {
    #[graph_fn]
    fn predict(&self, x: &Tensor) -> Result<Tensor> {
        self.body.forward(&x.mul(&self.scale)?)
    }
}

#[test]
fn a_skipped_field_holding_parameters_is_an_error_in_both_modes_not_an_omission() -> Result<()> {
    let rng = &Generator::new(0);
    let mut model = Skipping { scale: Tensor::scalar(2.0f32), body: Sequential::new().add(Linear::new(3, 2, DType::F32, rng)?).add(ReLU) };
    let (x, _) = stack_input();
    let message = "is #[graph_arg(skip)] but holds tensors that require grad (parameters), which the signature and the state dict would leave out; remove the skip so that they are leaves";
    // Graph: the call is refused before anything is traced.
    let err = model.predict(&x).unwrap_err();
    assert_eq!(err.to_string(), format!("Skipping::predict: field `self.body` {message}"));
    assert_eq!(tensor_core::function::lookup("Skipping::predict").unwrap().trace_count(), 0);
    // Eager: every state dict use.
    assert_eq!(model.state_dict().unwrap_err().to_string(), format!("state_dict: field `body` {message}"));
    let path = temp("skipping.safetensors");
    assert!(io::save_safetensors(&model, &path).is_err());
    assert!(!path.exists(), "no 64-byte file of nothing");
    io::save_tensors(&path, &[("scale".to_string(), Tensor::scalar(3.0f32))])?;
    assert!(matches!(io::load_safetensors(&mut model, &path), Err(Error::SkippedParameters { .. })));
    assert!(io::load_safetensors_non_strict(&mut model, &path).is_err());
    assert_eq!(model.scale.item::<f32>()?, 2.0, "nothing was loaded");
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
    let mut named = prefixed("model", net.state_dict()?);
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
    #![proptest_config(ProptestConfig { cases: tests::proptest_cases(64), ..ProptestConfig::default() })]

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
