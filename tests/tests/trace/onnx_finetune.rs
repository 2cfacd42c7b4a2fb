//! A real exported model, imported and fine-tuned: tests/fixtures/onnx_models/small_cnn
//! (written by scripts/onnx_real_models.py from a PyTorch CNN: conv + batchnorm + relu,
//! maxpool, conv + batchnorm + relu, depthwise conv, global average pool, linear) matches
//! ONNX Runtime's outputs within 1e-4 relative, eagerly and as a graph, and trains as a
//! `#[graph_fn]` step: the loss falls, gradients match finite differences, and eager and
//! graph give the same bits at every step.

use std::path::{Path, PathBuf};
use tensor_core::onnx::OnnxModel;
use tensor_core::optim::{Optimizer, Sgd};
use tensor_core::prelude::*;

fn small_cnn_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join("onnx_models").join("small_cnn")
}

fn small_cnn() -> OnnxModel {
    tensor_core::onnx::import(small_cnn_dir().join("model.onnx")).unwrap()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn bits(t: &Tensor) -> Vec<u32> {
    f32s(t).iter().map(|x| x.to_bits()).collect()
}

/// The parameters an optimizer trains: every float initializer but batchnorm's running
/// statistics, which are state, not weights.
fn weights(m: &OnnxModel) -> Vec<Tensor> {
    m.parameters().into_iter().filter(|(name, t)| t.dtype().is_float() && !name.contains("running_")).map(|(_, t)| t).collect()
}

/// ONNX Runtime's logits for the committed input, within 1e-4 relative (and 1e-6 absolute
/// for logits near zero); the traced graph gives eager's bits, for the batch it was traced
/// with and, its batch dim being dynamic, for another.
#[test]
fn the_small_cnn_matches_onnx_runtime_eagerly_and_as_a_graph() -> Result<()> {
    let m = small_cnn();
    assert_eq!(m.ops(), ["BatchNormalization", "Conv", "Flatten", "Gemm", "GlobalAveragePool", "MaxPool", "Relu"]);
    assert_eq!(m.inputs()[0].dims, vec![None, Some(3), Some(16), Some(16)]);
    let set = small_cnn_dir().join("test_data_set_0");
    let (_, x) = tensor_core::onnx::read_tensor(set.join("input_0.pb"))?;
    let (_, expected) = tensor_core::onnx::read_tensor(set.join("output_0.pb"))?;
    assert_eq!(expected.dims(), vec![2, 10]);
    let eager = m.call(&[&x])?.remove(0);
    assert_eq!(eager.dims(), vec![2, 10]);
    for (a, b) in f32s(&eager).iter().zip(f32s(&expected)) {
        assert!((a - b).abs() <= 1e-6 + 1e-4 * b.abs(), "{a} vs ONNX Runtime's {b}");
    }
    let f = m.trace("small_cnn")?;
    assert_eq!(bits(&f.call(&[&x])?[0]), bits(&eager));
    // One graph for every batch: the first image alone gives the first row's bits.
    let first = x.narrow(0, 0, 1)?;
    assert_eq!(bits(&f.call(&[&first])?[0]), bits(&m.call(&[&first])?[0]));
    Ok(())
}

/// Eight synthetic images and their labels (0..10), from fixed seeds.
fn batch() -> Result<(Tensor, Tensor)> {
    let x = Tensor::randn(&[8, 3, 16, 16], DType::F32, 11);
    let labels: Vec<i64> = (0..8).map(|i| (i * 7 + 3) % 10).collect();
    Ok((x, Tensor::from_vec(labels, &[8])?))
}

/// One fine-tuning step: cross-entropy of the model's logits, backward, SGD.
fn train_step(m: &OnnxModel, opt: &Sgd, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    opt.zero_grad()?;
    let loss = m.call(&[x])?[0].cross_entropy(labels)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

/// The same step as one graph: forward, backward and the update traced once, replayed.
#[graph_fn]
fn train_step_graph(m: &OnnxModel, opt: &Sgd, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    train_step(m, opt, x, labels)
}

/// Fine-tuning the imported model as a `#[graph_fn]` step: the loss falls, and every
/// step's loss and every weight after it are eager's bits (two models imported from the
/// same file, one trained eagerly, one by the graph).
#[test]
fn the_small_cnn_fine_tunes_as_a_graph_fn_with_eagers_bits() -> Result<()> {
    let (x, labels) = batch()?;
    let (eager_model, graph_model) = (small_cnn(), small_cnn());
    eager_model.trainable(true);
    graph_model.trainable(true);
    let eager_opt = Sgd::new(weights(&eager_model), 0.2)?;
    let graph_opt = Sgd::new(weights(&graph_model), 0.2)?;
    let mut losses = Vec::new();
    for step in 0..6 {
        let eager = train_step(&eager_model, &eager_opt, &x, &labels)?;
        let graph = train_step_graph(&graph_model, &graph_opt, &x, &labels)?;
        assert_eq!(bits(&graph), bits(&eager), "step {step}: the graph's loss differs from eager's");
        for ((name, a), (_, b)) in eager_model.parameters().iter().zip(graph_model.parameters()) {
            assert_eq!(bits(a), bits(&b), "step {step}: `{name}` differs");
        }
        losses.push(f32s(&eager)[0]);
    }
    // ln 10 ≈ 2.30 for a random classifier (its logits are small); each step on the one batch
    // lowers it (by about 0.002 at lr 0.05, measured).
    assert!((losses[0] - 10f32.ln()).abs() < 0.1, "first loss {}", losses[0]);
    assert!(losses.windows(2).all(|w| w[1] < w[0]), "the loss must fall at every step: {losses:?}");
    assert!(losses[5] < losses[0] - 0.02, "losses {losses:?}");
    assert_eq!(tensor_core::function::lookup("train_step_graph").unwrap().trace_count(), 1);
    Ok(())
}

/// The loss of the model on the batch, without gradients.
fn loss_of(m: &OnnxModel, x: &Tensor, labels: &Tensor) -> f64 {
    no_grad(|| m.call(&[x]).unwrap()[0].cross_entropy(labels).unwrap().to_vec::<f32>().unwrap()[0] as f64)
}

/// Back-propagated gradients of a few weights of every kind of layer (first conv, both
/// batchnorms' scale and shift, the depthwise conv, the linear layer) match central finite
/// differences of the loss.
#[test]
fn the_small_cnn_gradients_match_finite_differences() -> Result<()> {
    let (x, labels) = batch()?;
    let m = small_cnn();
    m.trainable(true);
    let loss = m.call(&[&x])?[0].cross_entropy(&labels)?;
    loss.backward()?;
    let params = m.parameters();
    let picks = [
        ("conv1.weight", 5),
        ("conv1.bias", 2),
        ("bn1.weight", 3),
        ("bn2.bias", 7),
        ("conv2.weight", 100),
        ("depthwise.weight", 40),
        ("fc.weight", 17),
        ("fc.bias", 4),
    ];
    let eps = 1e-2f32;
    for (name, index) in picks {
        let p = &params.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no `{name}`")).1;
        let grad = f32s(&p.grad().unwrap())[index] as f64;
        let original = f32s(p);
        let nudged = |delta: f32| {
            let mut v = original.clone();
            v[index] += delta;
            no_grad(|| p.assign_(&Tensor::from_vec(v, &p.dims()).unwrap())).unwrap();
            loss_of(&m, &x, &labels)
        };
        let numeric = (nudged(eps) - nudged(-eps)) / (2.0 * eps as f64);
        no_grad(|| p.assign_(&Tensor::from_vec(original.clone(), &p.dims()).unwrap()))?;
        assert!((grad - numeric).abs() <= 2e-3 + 2e-2 * numeric.abs(), "{name}[{index}]: backward {grad}, finite differences {numeric}");
    }
    Ok(())
}
