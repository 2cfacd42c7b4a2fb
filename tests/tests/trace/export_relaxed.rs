//! Exported relaxed traces: a LeNet-5 training step (forward, cross-entropy, backward, Adam)
//! traced with its batch dim relaxed by an `input_signature` with `?`, exported to one file,
//! loaded back and called at batches 1, 7 and 64 — each call with the bits of the same step
//! run eagerly, the loss, the gradients and the updated parameters — while a batch its guard
//! refuses is an `Err` naming the guard.

use tensor_core::export::{self, LoadedFunction};
use tensor_core::function::lookup;
use tensor_core::nn::{Conv2d, Linear, Module};
use tensor_core::optim::{Adam, Optimizer};
use tensor_core::prelude::*;

/// LeNet-5 as `examples/src/bin/lenet5.rs` writes it: 5x5 convolutions (the first 'same'),
/// 2x2 max pools, three dense layers reading `nn::Linear`'s `[out, in]` weights in place, Adam.
#[derive(GraphArg)]
struct LeNet5 {
    conv1_w: Tensor,
    conv1_b: Tensor,
    conv2_w: Tensor,
    conv2_b: Tensor,
    fc1_w: Tensor,
    fc1_b: Tensor,
    fc2_w: Tensor,
    fc2_b: Tensor,
    fc3_w: Tensor,
    fc3_b: Tensor,
    #[graph_arg(skip)]
    opt: Adam,
}

/// The largest batch the step takes (a guard on the trace: `n0 <= 256`).
const MAX_BATCH: usize = 256;

impl LeNet5 {
    fn new(seed: u64) -> Result<LeNet5> {
        let rng = &Generator::new(seed);
        let conv1 = Conv2d::new(1, 6, [5, 5], DType::F32, rng)?;
        let conv2 = Conv2d::new(6, 16, [5, 5], DType::F32, rng)?;
        let fc1 = Linear::new(400, 120, DType::F32, rng)?;
        let fc2 = Linear::new(120, 84, DType::F32, rng)?;
        let fc3 = Linear::new(84, 10, DType::F32, rng)?;
        let params = [conv1.parameters(), conv2.parameters(), fc1.parameters(), fc2.parameters(), fc3.parameters()].concat();
        let opt = Adam::new(params.clone(), 1e-3)?;
        let [conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b] = params.try_into().expect("ten parameters");
        Ok(LeNet5 { conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b, opt })
    }

    fn parameters(&self) -> Vec<Tensor> {
        [&self.conv1_w, &self.conv1_b, &self.conv2_w, &self.conv2_b, &self.fc1_w, &self.fc1_b, &self.fc2_w, &self.fc2_b, &self.fc3_w, &self.fc3_b]
            .into_iter()
            .cloned()
            .collect()
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.conv2d(&self.conv1_w, Some(&self.conv1_b), [1, 1], [2, 2])?.relu()?.max_pool2d([2, 2], [2, 2])?; // 6@14x14
        let x = x.conv2d(&self.conv2_w, Some(&self.conv2_b), [1, 1], [0, 0])?.relu()?.max_pool2d([2, 2], [2, 2])?; // 16@5x5
        let x = x.flatten_from(1)?; // [n, 400]: the batch stays symbolic
        let x = x.matmul_t(&self.fc1_w, false, true)?.add(&self.fc1_b)?.relu()?;
        let x = x.matmul_t(&self.fc2_w, false, true)?.add(&self.fc2_b)?.relu()?;
        x.matmul_t(&self.fc3_w, false, true)?.add(&self.fc3_b)
    }

    /// One step: the batch's mean cross-entropy, its gradients, Adam's update. The batch is
    /// checked by host code, which records a guard on a relaxed trace.
    fn step_body(&self, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        if x.dim(0) > MAX_BATCH {
            return Err(Error::InvalidArgument { op: "train_step", arg: "x", reason: format!("batches of at most {MAX_BATCH}") });
        }
        self.opt.zero_grad()?;
        let loss = self.forward(x)?.cross_entropy(y)?;
        loss.backward()?;
        self.opt.step()?;
        Ok(loss)
    }

    #[graph_fn(input_signature(x: f32[?, 1, 28, 28], y: i64[?]))]
    fn train_step(&self, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        self.step_body(x, y)
    }
}

fn batch(n: usize, seed: u64) -> (Tensor, Tensor) {
    let x = Tensor::randn(&[n, 1, 28, 28], DType::F32, seed);
    let y = Tensor::from_vec((0..n as i64).map(|i| (i * 7 + seed as i64) % 10).collect::<Vec<_>>(), &[n]).expect("n labels");
    (x, y)
}

fn assert_same_bits(got: &Tensor, want: &Tensor, what: &str) {
    assert!(got.dtype() == want.dtype() && got.dims() == want.dims() && got.bit_eq(want).unwrap(), "{what}: {got} vs {want}");
}

/// Calls the loaded step with `model`'s parameters and the batch.
fn call(loaded: &LoadedFunction, model: &LeNet5, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    let mut args = model.parameters();
    args.extend([x.clone(), y.clone()]);
    let refs: Vec<&Tensor> = args.iter().collect();
    Ok(loaded.call(&refs)?.remove(0))
}

#[test]
fn an_exported_lenet5_training_step_serves_batches_1_7_and_64_from_one_file() -> Result<()> {
    // The traced model takes one step (the trace), then its step is exported; the eager twin
    // takes the same step, so both hold the same parameters and Adam state.
    let (traced, eager) = (LeNet5::new(7)?, LeNet5::new(7)?);
    let (x, y) = batch(3, 1);
    let first = traced.train_step(&x, &y)?;
    assert_same_bits(&first, &eager.step_body(&x, &y)?, "the traced step");
    let f = lookup("LeNet5::train_step").expect("called").concrete_functions().remove(0);
    assert_eq!(f.guards(), [format!("n0 <= {MAX_BATCH}")], "the batch stays symbolic: no guard pins it");
    assert!(f.to_text().contains("x: f32[n0, 1, 28, 28], y: i64[n1]"), "{}", f.to_text());
    let path = std::env::temp_dir().join(format!("tc-lenet5-step-{}.tcg", std::process::id()));
    f.export(&path)?;
    let loaded = export::load(&path)?;
    std::fs::remove_file(&path).unwrap();
    assert_eq!(loaded.guards(), [format!("n0 <= {MAX_BATCH}")]);
    assert_eq!(loaded.args()[10].shape.to_string(), "[?, 1, 28, 28]");
    // The loaded step trains a copy of the traced model's parameters; the eager twin trains
    // its own. Every batch size, one file, the same bits.
    let copy = LeNet5::new(8)?;
    for (a, b) in copy.parameters().iter().zip(traced.parameters()) {
        no_grad(|| a.assign_(&b))?;
    }
    for (k, n) in [1, 7, 64, 7].into_iter().enumerate() {
        let (x, y) = batch(n, 10 + k as u64);
        let want = eager.step_body(&x, &y)?;
        let got = call(&loaded, &copy, &x, &y)?;
        assert_same_bits(&got, &want, &format!("the loss of batch {n}"));
        for (i, (a, b)) in copy.parameters().iter().zip(eager.parameters()).enumerate() {
            assert_same_bits(a, &b, &format!("batch {n}: parameter {i}"));
            assert_same_bits(&a.grad().expect("a .grad"), &b.grad().expect("a .grad"), &format!("batch {n}: the .grad of parameter {i}"));
        }
    }
    // A batch the guard refuses is an Err naming the guard, and changes nothing.
    let (x, y) = batch(MAX_BATCH + 1, 30);
    let before = copy.conv1_w.to_vec::<f32>()?;
    let err = call(&loaded, &copy, &x, &y).unwrap_err().to_string();
    assert!(err.contains(&format!("arg x dim 0 = {} fails n0 <= {MAX_BATCH}", MAX_BATCH + 1)), "{err}");
    assert_eq!(copy.conv1_w.to_vec::<f32>()?, before);
    Ok(())
}

/// Shapes computed from the batch at run time: zeros and a mask of size `n`, a reshape to
/// `n * 2` rows, a narrow of `n - 1` rows.
fn run_time_shapes_body(x: &Tensor) -> Result<Tensor> {
    let n = x.dim(0);
    let scores = x.matmul(&x.t()?)?.add(&Tensor::zeros([n, n], DType::F32))?;
    let positions = Tensor::arange_len(n, DType::I64)?;
    let later = positions.reshape((1, n))?.gt(&positions.reshape((n, 1))?)?;
    let weights = scores.masked_fill(&later, f32::NEG_INFINITY)?.softmax(-1)?;
    let pairs = weights.matmul(x)?.reshape((n * 2, -1))?;
    pairs.narrow(0, 0, n * 2 - 1)
}

#[graph_fn(input_signature(x: f32[?, 4]))]
fn run_time_shapes(x: &Tensor) -> Result<Tensor> {
    run_time_shapes_body(x)
}

#[test]
fn an_exported_trace_computes_its_shapes_from_each_call_s_dims() -> Result<()> {
    let data = |n: usize| Tensor::from_vec((0..n * 4).map(|i| ((i * 37 % 11) as f32 - 5.0) / 4.0).collect::<Vec<_>>(), &[n, 4]);
    run_time_shapes(&data(3)?)?;
    let f = lookup("run_time_shapes").expect("called").concrete_functions().remove(0);
    assert!(f.to_text().contains("reshape[shape=[n0 * 2, -1]]"), "{}", f.to_text());
    let path = std::env::temp_dir().join(format!("tc-run-time-shapes-{}.tcg", std::process::id()));
    f.export(&path)?;
    let loaded = export::load(&path)?;
    std::fs::remove_file(&path).unwrap();
    for n in [1, 2, 5, 9] {
        let x = data(n)?;
        let want = run_time_shapes_body(&x)?;
        let got = loaded.call(&[&x])?.remove(0);
        assert_eq!(got.dims(), vec![2 * n - 1, 2], "size {n}");
        assert_same_bits(&got, &want, &format!("size {n}"));
    }
    Ok(())
}
