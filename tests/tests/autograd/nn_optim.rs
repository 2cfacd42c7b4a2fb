//! `tensor_core::nn` (layers, loss, initializers) and `tensor_core::optim` (SGD, Adam):
//! layer outputs on hand-computed cases, initializer statistics, single optimizer steps
//! against PyTorch's update rules, training a small MLP, the in-place rules for parameters,
//! and optimizer steps traced into graphs matching the eager ones.

use tensor_core::function::ConcreteFunction;
use tensor_core::nn::{self, init, Conv2d, Flatten, Linear, MaxPool2d, Module, ReLU, Sequential};
use tensor_core::optim::lr_scheduler::{CosineAnnealingLR, LrScheduler, OneCycleLR};
use tensor_core::optim::{Adam, AdamConfig, AdamW, Optimizer, Sgd, SgdConfig};
use tensor_core::prelude::*;
use tests::{assert_bits_eq, assert_close, assert_values, tensor};

// ------------------------------------------------------------------------------ layers

#[test]
fn linear_with_known_weights() -> Result<()> {
    // PyTorch's layout, [out, in]: output j is row j of W dotted with the input.
    let w = tensor::<f64>(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0], &[3, 2]);
    let b = tensor::<f64>(&[0.5, 0.0, -0.5], &[3]);
    let layer = Linear::from_tensors(w.clone(), Some(b.clone()))?;
    let x = tensor::<f64>(&[1.0, 0.0, 1.0, -1.0], &[2, 2]);
    let y = layer.forward(&x)?;
    assert_eq!(y.dims(), vec![2, 3]);
    // [1, 0] @ Wᵀ = [1, 2, 3]; [1, -1] @ Wᵀ = [-3, -3, -3]; plus the bias.
    assert_values(&y, &[1.5, 2.0, 2.5, -2.5, -3.0, -3.5]);

    let params = layer.parameters();
    assert_eq!(params.len(), 2);
    assert!(params[0].same_as(&w) && params[1].same_as(&b));
    assert!(params.iter().all(|p| p.requires_grad() && p.is_leaf()));

    // d(sum y)/dW = onesᵀ @ x (laid out as W: each row the column sums of x), d(sum y)/db =
    // the batch size.
    y.sum()?.backward()?;
    assert_values(&w.grad().unwrap(), &[2.0, -1.0, 2.0, -1.0, 2.0, -1.0]);
    assert_values(&b.grad().unwrap(), &[2.0, 2.0, 2.0]);
    Ok(())
}

#[test]
fn linear_shapes_init_and_errors() -> Result<()> {
    let rng = Generator::new(3);
    let layer = Linear::new(4, 5, DType::F32, &rng)?;
    assert_eq!(layer.weight().dims(), vec![5, 4]);
    assert_eq!(layer.bias().unwrap().dims(), vec![5]);
    // PyTorch's default init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
    for p in layer.parameters() {
        assert!(p.to_vec::<f32>()?.iter().all(|v| v.abs() <= 0.5));
    }
    // Leading dims pass through.
    assert_eq!(layer.forward(&Tensor::ones(&[2, 3, 4], DType::F32))?.dims(), vec![2, 3, 5]);
    let err = layer.forward(&Tensor::ones(&[2, 3], DType::F32)).unwrap_err().to_string();
    assert!(err.contains("Linear") && err.contains("in_features = 4 (the weight is [out, in] = [5, 4])"), "{err}");
    assert!(layer.forward(&Tensor::ones(&[4], DType::F32))?.dims() == vec![5], "a vector input");
    assert!(layer.forward(&Tensor::scalar(1.0f32)).is_err(), "a scalar input");

    let no_bias = Linear::new_without_bias(4, 5, DType::F32, &rng)?;
    let x = Tensor::randn(&[3, 4], DType::F32, 9);
    assert_bits_eq(&no_bias.forward(&x)?, &x.matmul_t(no_bias.weight(), false, true)?);
    // The product reads the weight in place: the same values as a copied transpose.
    assert_close(&no_bias.forward(&x)?, &tests::as_f64(&x.matmul(&no_bias.weight().t()?)?), 1e-6);
    assert_eq!(no_bias.parameters().len(), 1);

    // The same seed gives the same layer.
    let a = Linear::new(3, 2, DType::F64, &Generator::new(11))?;
    let b = Linear::new(3, 2, DType::F64, &Generator::new(11))?;
    for (p, q) in a.parameters().iter().zip(&b.parameters()) {
        assert_bits_eq(p, q);
    }

    assert!(Linear::new(2, 2, DType::I64, &rng).is_err());
    assert!(Linear::from_tensors(Tensor::zeros(&[2, 3, 1], DType::F32), None).is_err());
    // A [out, in] = [2, 3] weight takes a bias of 2, not 3.
    assert!(Linear::from_tensors(Tensor::zeros(&[2, 3], DType::F32), Some(Tensor::zeros(&[3], DType::F32))).is_err());
    assert!(Linear::from_tensors(Tensor::zeros(&[2, 3], DType::F32), Some(Tensor::zeros(&[2], DType::F64))).is_err());
    assert!(Linear::from_tensors(Tensor::zeros(&[2, 3], DType::F32), Some(Tensor::zeros(&[2], DType::F32))).is_ok());
    Ok(())
}

#[test]
fn conv2d_layer_equals_tensor_conv2d() -> Result<()> {
    let conv = Conv2d::new(3, 4, [3, 3], DType::F32, &Generator::new(5))?.with_stride([2, 2]).with_padding([1, 1]);
    assert_eq!(conv.weight().dims(), vec![4, 3, 3, 3]);
    assert_eq!(conv.bias().unwrap().dims(), vec![4]);
    let bound = 1.0 / 27f32.sqrt();
    assert!(conv.weight().to_vec::<f32>()?.iter().all(|v| v.abs() <= bound));

    let x = Tensor::randn(&[2, 3, 7, 7], DType::F32, 6);
    let y = conv.forward(&x)?;
    assert_eq!(y.dims(), vec![2, 4, 4, 4]);
    assert_bits_eq(&y, &x.conv2d(conv.weight(), conv.bias(), [2, 2], [1, 1])?);

    let params = conv.parameters();
    assert!(params[0].same_as(conv.weight()) && params[1].same_as(conv.bias().unwrap()));

    // A hand-computed case: a 2x2 kernel of ones plus a bias sums each window.
    let w = Tensor::ones(&[1, 1, 2, 2], DType::F64);
    let conv = Conv2d::from_tensors(w, Some(tensor::<f64>(&[0.5], &[1])))?;
    let x = Tensor::arange(0.0f64, 9.0).reshape([1, 1, 3, 3])?;
    assert_values(&conv.forward(&x)?, &[8.5, 12.5, 20.5, 24.5]);
    assert!(Conv2d::from_tensors(Tensor::ones(&[1, 1, 2, 2], DType::F64), Some(Tensor::ones(&[2], DType::F64))).is_err());
    Ok(())
}

#[test]
fn parameterless_layers() -> Result<()> {
    let x = Tensor::arange(-8.0f32, 8.0).reshape([1, 1, 4, 4])?;
    let pooled = MaxPool2d::new([2, 2], [2, 2]).forward(&x)?;
    assert_values(&pooled, &[-3.0, -1.0, 5.0, 7.0]);
    assert_eq!(MaxPool2d::new([2, 2], [1, 1]).forward(&x)?.dims(), vec![1, 1, 3, 3]);
    assert_values(&ReLU.forward(&pooled)?, &[0.0, 0.0, 5.0, 7.0]);
    assert_eq!(Flatten.forward(&Tensor::zeros(&[2, 3, 4, 5], DType::F32))?.dims(), vec![2, 60]);
    assert!(MaxPool2d::new([2, 2], [2, 2]).parameters().is_empty());
    assert!(ReLU.parameters().is_empty() && Flatten.parameters().is_empty());
    Ok(())
}

#[test]
fn sequential_composes_layers_and_parameters() -> Result<()> {
    let rng = Generator::new(7);
    let (l1, l2) = (Linear::new(2, 8, DType::F32, &rng)?, Linear::new(8, 3, DType::F32, &rng)?);
    let expected_params: Vec<Tensor> = l1.parameters().into_iter().chain(l2.parameters()).collect();
    let x = Tensor::randn(&[5, 2], DType::F32, 8);
    let by_hand = l2.forward(&l1.forward(&x)?.relu()?)?;

    let model = Sequential::new().add(l1).add(ReLU).add(l2);
    assert_eq!(model.len(), 3);
    assert_bits_eq(&model.forward(&x)?, &by_hand);
    let params = model.parameters();
    assert_eq!(params.len(), 4);
    for (p, e) in params.iter().zip(&expected_params) {
        assert!(p.same_as(e));
    }
    assert!(Sequential::new().forward(&x)?.same_as(&x));
    Ok(())
}

#[test]
fn small_cnn_forward_and_backward() -> Result<()> {
    let rng = Generator::new(9);
    let model = Sequential::new()
        .add(Conv2d::new(1, 4, [3, 3], DType::F32, &rng)?.with_padding([1, 1]))
        .add(ReLU)
        .add(MaxPool2d::new([2, 2], [2, 2]))
        .add(Flatten)
        .add(Linear::new(4 * 4 * 4, 3, DType::F32, &rng)?);
    let x = Tensor::randn(&[2, 1, 8, 8], DType::F32, 10);
    let logits = model.forward(&x)?;
    assert_eq!(logits.dims(), vec![2, 3]);
    nn::cross_entropy(&logits, &Tensor::from_vec(vec![0i64, 2], &[2])?)?.backward()?;
    let params = model.parameters();
    assert_eq!(params.len(), 4);
    for p in &params {
        assert_eq!(p.grad().expect("every parameter gets a grad").dims(), p.dims());
    }
    Ok(())
}

#[test]
fn cross_entropy_hand_computed() -> Result<()> {
    let logits = tensor::<f64>(&[1.0, 2.0, 3.0, 0.0, 0.0, 0.0], &[2, 3]);
    let labels = Tensor::from_vec(vec![2i64, 1], &[2])?;
    let lse = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln();
    let expected = ((lse - 3.0) + 3f64.ln()) / 2.0;
    assert_close(&nn::cross_entropy(&logits, &labels)?, &[expected], 1e-12);
    assert!(nn::cross_entropy(&logits, &Tensor::from_vec(vec![0i64], &[1])?).is_err());
    Ok(())
}

// ------------------------------------------------------------------------------ initializers

/// (mean, standard deviation, largest |value|).
fn stats(t: &Tensor) -> (f64, f64, f64) {
    let v = tests::as_f64(t);
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt(), v.iter().fold(0.0f64, |m, x| m.max(x.abs())))
}

#[test]
fn initializer_statistics() -> Result<()> {
    let rng = Generator::new(42);

    // Glorot/Xavier uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out)), std a / sqrt(3).
    let w = init::xavier_uniform(&[200, 300], DType::F32, &rng)?;
    let a = (6.0f64 / 500.0).sqrt();
    let (mean, std, max) = stats(&w);
    println!("xavier_uniform [200, 300]: bound {a:.5}, max {max:.5}, std {std:.5} (expected {:.5})", a / 3f64.sqrt());
    assert!(max <= a && max > 0.99 * a, "max {max} vs bound {a}");
    assert!((std / (a / 3f64.sqrt()) - 1.0).abs() < 0.03, "std {std}");
    assert!(mean.abs() < 0.01 * a);

    // He/Kaiming normal: std sqrt(2 / fan_in); for OIHW, fan_in = in * kh * kw = 144.
    let w = init::kaiming_normal(&[128, 16, 3, 3], DType::F64, &rng)?;
    let expected = (2.0f64 / 144.0).sqrt();
    let (mean, std, _) = stats(&w);
    println!("kaiming_normal [128, 16, 3, 3]: std {std:.5} (expected {expected:.5}), mean {mean:.5}");
    assert!((std / expected - 1.0).abs() < 0.03, "std {std}");
    assert!(mean.abs() < 0.02 * expected);

    // He/Kaiming uniform: U(-a, a), a = sqrt(6 / fan_in), so the same std; a 2-d weight is
    // [out, in] as in PyTorch, so fan_in = 256.
    let w = init::kaiming_uniform(&[400, 256], DType::F32, &rng)?;
    let (a, expected) = ((6.0f64 / 256.0).sqrt(), (2.0f64 / 256.0).sqrt());
    let (_, std, max) = stats(&w);
    assert!(max <= a && max > 0.99 * a, "max {max} vs bound {a}");
    assert!((std / expected - 1.0).abs() < 0.03, "std {std}");

    // Keras names, reproducibility, fans and errors.
    assert_bits_eq(&init::glorot_uniform(&[3, 4], DType::F32, &Generator::new(1))?, &init::xavier_uniform(&[3, 4], DType::F32, &Generator::new(1))?);
    assert_bits_eq(&init::he_normal(&[3, 4], DType::F32, &Generator::new(1))?, &init::kaiming_normal(&[3, 4], DType::F32, &Generator::new(1))?);
    assert_eq!(init::fans(&[8, 4, 5, 5])?, (100, 200));
    assert_eq!(init::fans(&[8, 4])?, (4, 8), "[out, in], PyTorch's _calculate_fan_in_and_fan_out");
    assert!(init::xavier_uniform(&[10], DType::F32, &rng).is_err());
    assert!(init::kaiming_normal(&[2, 2], DType::I32, &rng).is_err());
    Ok(())
}

// ------------------------------------------------------------------------------ optimizers

/// Runs `steps` optimizer steps on `p` with the loss `sum(p * c)` (so the grad is `c`),
/// returning the values after each step.
fn steps_on_linear_loss(opt: &mut impl Optimizer, p: &Tensor, c: &Tensor, steps: usize) -> Result<Vec<Vec<f64>>> {
    let mut out = Vec::new();
    for _ in 0..steps {
        opt.zero_grad()?;
        p.mul(c)?.sum()?.backward()?;
        opt.step()?;
        out.push(tests::as_f64(p));
    }
    Ok(out)
}

fn close(got: &[f64], expected: &[f64], tol: f64) -> bool {
    got.len() == expected.len() && got.iter().zip(expected).all(|(g, e)| (g - e).abs() <= tol)
}

#[test]
fn sgd_steps_match_pytorch_rule() -> Result<()> {
    let c = tensor::<f64>(&[0.5, -1.0], &[2]);
    let param = || tensor::<f64>(&[1.0, -2.0], &[2]).requires_grad_(true);

    // Plain SGD: p -= lr * g.
    let p = param()?;
    let got = steps_on_linear_loss(&mut Sgd::new(vec![p.clone()], 0.1)?, &p, &c, 2)?;
    assert!(close(&got[0], &[0.95, -1.9], 1e-12) && close(&got[1], &[0.9, -1.8], 1e-12), "{got:?}");

    // Momentum 0.9: buf = g first, then 0.9 * buf + g = 1.9 g.
    let p = param()?;
    let config = SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 0.0 };
    let got = steps_on_linear_loss(&mut Sgd::with_config(vec![p.clone()], config)?, &p, &c, 2)?;
    assert!(close(&got[0], &[0.95, -1.9], 1e-12) && close(&got[1], &[0.855, -1.71], 1e-12), "{got:?}");

    // Momentum and weight decay: g = c + 0.1 p.
    //   p = 1:  g 0.6,    buf 0.6,    p 0.94;   g 0.594,  buf 1.134,  p 0.8266
    //   p = -2: g -1.2,   buf -1.2,   p -1.88;  g -1.188, buf -2.268, p -1.6532
    let p = param()?;
    let config = SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 0.1 };
    let got = steps_on_linear_loss(&mut Sgd::with_config(vec![p.clone()], config)?, &p, &c, 2)?;
    assert!(close(&got[0], &[0.94, -1.88], 1e-12) && close(&got[1], &[0.8266, -1.6532], 1e-12), "{got:?}");

    // f32 parameters follow the same rule.
    let p = tensor::<f32>(&[1.0, -2.0], &[2]).requires_grad_(true)?;
    let got = steps_on_linear_loss(&mut Sgd::with_config(vec![p.clone()], config)?, &p, &c.cast(DType::F32)?, 2)?;
    assert!(close(&got[1], &[0.8266, -1.6532], 1e-6), "{got:?}");
    Ok(())
}

#[test]
fn sgd_skips_parameters_without_grad() -> Result<()> {
    let a = Tensor::scalar(1.0f64).requires_grad_(true)?;
    let b = Tensor::scalar(1.0f64).requires_grad_(true)?;
    let config = SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 0.1 };
    let opt = Sgd::with_config(vec![a.clone(), b.clone()], config)?;
    (&a * 2.0).backward()?;
    opt.step()?;
    assert_eq!(b.item::<f64>()?, 1.0, "no grad: untouched (weight decay too)");
    opt.zero_grad()?;
    (&a * 2.0 + &b * 2.0).backward()?;
    opt.step()?;
    // b's first step with a grad: buf = g = 2 + 0.1, so b = 1 - 0.21.
    assert_close(&b, &[0.79], 1e-12);
    Ok(())
}

/// Adam on one f64 value, written out from PyTorch's `_single_tensor_adam`.
fn adam_reference(mut p: f64, grad: impl Fn(f64) -> f64, c: AdamConfig, steps: usize) -> Vec<f64> {
    let ((b1, b2), (mut m, mut v)) = (c.betas, (0.0, 0.0));
    (1..=steps as i32)
        .map(|t| {
            let g = grad(p) + c.weight_decay * p;
            m = b1 * m + (1.0 - b1) * g;
            v = b2 * v + (1.0 - b2) * g * g;
            let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
            p -= c.lr / bc1 * m / (v.sqrt() / bc2.sqrt() + c.eps);
            p
        })
        .collect()
}

#[test]
fn adam_steps_match_pytorch_rule() -> Result<()> {
    // A constant grad 0.5: the bias-corrected moments are exactly 0.5 and 0.25 at every
    // step, so each step moves p by lr * 0.5 / (0.5 + eps), about lr. (Without the
    // correction the first step would move it by 0.316.)
    let p = Tensor::scalar(1.0f64).requires_grad_(true)?;
    let mut opt = Adam::new(vec![p.clone()], 0.1)?;
    let got = steps_on_linear_loss(&mut opt, &p, &Tensor::scalar(0.5f64), 2)?;
    let step = 0.1 * 0.5 / (0.5 + 1e-8);
    assert!(close(&got[0], &[1.0 - step], 1e-12) && close(&got[1], &[1.0 - 2.0 * step], 1e-12), "{got:?}");
    assert!((got[1][0] - 0.8).abs() < 1e-7);
    assert_eq!(opt.step_count(0).unwrap().item::<f64>()?, 2.0);

    // loss = p^2 (grad 2p) with weight decay, against the reference, in f64 and f32.
    let config = AdamConfig { lr: 0.05, betas: (0.8, 0.9), eps: 1e-6, weight_decay: 0.1 };
    let expected = adam_reference(1.5, |p| 2.0 * p, config, 5);
    for dtype in [DType::F64, DType::F32] {
        let p = Tensor::scalar(1.5f64).cast(dtype)?.requires_grad_(true)?;
        let opt = Adam::with_config(vec![p.clone()], config)?;
        for e in &expected {
            opt.zero_grad()?;
            (&p * &p).backward()?;
            opt.step()?;
            assert_close(&p, &[*e], if dtype == DType::F64 { 1e-12 } else { 1e-6 });
        }
    }
    Ok(())
}

#[test]
fn adam_skips_parameters_without_grad() -> Result<()> {
    let a = Tensor::scalar(1.0f32).requires_grad_(true)?;
    let b = Tensor::scalar(1.0f32).requires_grad_(true)?;
    let opt = Adam::new(vec![a.clone(), b.clone()], 0.1)?;
    for _ in 0..3 {
        opt.zero_grad()?;
        (&a * 2.0).backward()?;
        opt.step()?;
    }
    assert_eq!(b.item::<f32>()?, 1.0);
    assert_eq!(opt.step_count(1).unwrap().item::<f64>()?, 0.0);
    opt.zero_grad()?;
    (&b * 2.0).backward()?;
    opt.step()?;
    // b's first step is bias-corrected as step 1 (a moves no more).
    assert_close(&b, &[0.9], 1e-6);
    assert_eq!(tests::as_f64(opt.step_count(0).unwrap()), [3.0]);
    Ok(())
}

#[test]
fn zero_grad_clears_grads() -> Result<()> {
    let model = Linear::new(3, 2, DType::F32, &Generator::new(0))?;
    let opt = Sgd::new(model.parameters(), 0.1)?;
    model.forward(&Tensor::ones(&[4, 3], DType::F32))?.sum()?.backward()?;
    assert!(opt.parameters().iter().all(|p| p.grad().is_some()));
    opt.zero_grad()?;
    assert!(model.parameters().iter().all(|p| p.grad().is_none()));

    // With every grad cleared a step changes nothing.
    let before: Vec<Vec<f64>> = model.parameters().iter().map(tests::as_f64).collect();
    opt.step()?;
    let after: Vec<Vec<f64>> = model.parameters().iter().map(tests::as_f64).collect();
    assert_eq!(before, after);

    model.forward(&Tensor::ones(&[4, 3], DType::F32))?.sum()?.backward()?;
    model.zero_grad()?;
    assert!(model.parameters().iter().all(|p| p.grad().is_none()));
    Ok(())
}

#[test]
fn optimizer_updates_leaves_in_place_under_no_grad() -> Result<()> {
    let p = tensor::<f32>(&[1.0, 2.0], &[2]).requires_grad_(true)?;
    // A user's in-place op on a leaf that requires grad, with grad mode on, is an error and
    // changes nothing.
    let err = p.sub_(1.0).unwrap_err();
    assert!(matches!(err, Error::InPlaceOnLeaf { .. }), "{err}");
    assert_values(&p, &[1.0, 2.0]);
    assert_eq!(p.version(), 0);

    // The optimizer's in-place update runs under no_grad: no error, no history recorded,
    // and grad mode is back on afterwards.
    let alias = p.clone();
    (&p * 3.0).sum()?.backward()?;
    let opt = Sgd::new(vec![p.clone()], 0.1)?;
    opt.step()?;
    assert_close(&alias, &[0.7, 1.7], 1e-6);
    assert!(p.is_leaf() && p.requires_grad() && p.grad_fn().is_none());
    assert!(tensor_core::is_grad_enabled());
    let adam = Adam::new(vec![p.clone()], 0.1)?;
    adam.step()?;
    assert!(p.is_leaf() && p.grad_fn().is_none());

    // The same in-place op is allowed under no_grad, as in PyTorch.
    no_grad(|| p.sub_(1.0))?;
    assert!(p.version() >= 3);

    // Bad hyperparameters and parameter lists are errors.
    assert!(Sgd::new(vec![p.clone()], f64::NAN).is_err());
    assert!(Sgd::with_config(vec![p.clone()], SgdConfig { momentum: -0.5, ..Default::default() }).is_err());
    assert!(Adam::with_config(vec![p.clone()], AdamConfig { eps: -1.0, ..Default::default() }).is_err());
    assert!(Adam::new(vec![p.clone(), alias], 0.1).is_err(), "the same tensor twice");
    assert!(Sgd::new(vec![Tensor::zeros(&[2], DType::I64)], 0.1).is_err());
    Ok(())
}

// ------------------------------------------------------------------------------ training

/// Three Gaussian blobs in 2-d (radius-3 centers, std 0.5), `n` samples, labels `i % 3`.
fn blobs(n: usize, seed: u64) -> Result<(Tensor, Tensor)> {
    let centers = tensor::<f32>(&[0.0, 3.0, -2.6, -1.5, 2.6, -1.5], &[3, 2]);
    let labels = Tensor::from_vec((0..n as i64).map(|i| i % 3).collect(), &[n])?;
    let noise = Tensor::randn(&[n, 2], DType::F32, seed);
    let x = centers.index_select(0, &labels)?.add(&noise.mul(0.5)?)?;
    Ok((x, labels))
}

fn mlp(seed: u64) -> Result<Sequential> {
    let rng = Generator::new(seed);
    Ok(Sequential::new().add(Linear::new(2, 32, DType::F32, &rng)?).add(ReLU).add(Linear::new(32, 3, DType::F32, &rng)?))
}

/// Full-batch training; returns the loss before the first step and after the last.
fn train(model: &Sequential, opt: &mut impl Optimizer, x: &Tensor, labels: &Tensor, steps: usize) -> Result<(f32, f32)> {
    let loss_now = || nn::cross_entropy(&model.forward(x)?, labels)?.item::<f32>();
    let initial = no_grad(loss_now)?;
    for _ in 0..steps {
        opt.zero_grad()?;
        nn::cross_entropy(&model.forward(x)?, labels)?.backward()?;
        opt.step()?;
    }
    Ok((initial, no_grad(loss_now)?))
}

#[test]
fn mlp_trains_with_sgd_and_adam() -> Result<()> {
    let (x, labels) = blobs(256, 1)?;

    let model = mlp(2)?;
    let mut sgd = Sgd::with_config(model.parameters(), SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 0.0 })?;
    let (initial, last) = train(&model, &mut sgd, &x, &labels, 100)?;
    println!("SGD (lr 0.1, momentum 0.9), 100 steps: loss {initial:.4} -> {last:.3e}");
    assert!(last <= initial / 10.0, "SGD: loss {initial} -> {last}");

    let model = mlp(2)?;
    let mut adam = Adam::new(model.parameters(), 0.01)?;
    let (initial, last) = train(&model, &mut adam, &x, &labels, 100)?;
    println!("Adam (lr 0.01), 100 steps: loss {initial:.4} -> {last:.3e}");
    assert!(last <= initial / 10.0, "Adam: loss {initial} -> {last}");
    Ok(())
}

// ------------------------------------------------------------------------------ traced steps

/// Sets `.grad` of `p` to the gradient of `sum(p^2 * k)` (different at every call).
fn fresh_grad(p: &Tensor, k: f64) -> Result<()> {
    p.zero_grad()?;
    p.mul(p)?.mul(k)?.sum()?.backward()
}

/// Builds an optimizer over the given parameters.
type MakeOptimizer = Box<dyn Fn(Vec<Tensor>) -> Result<Box<dyn Optimizer>>>;

#[test]
fn traced_optimizer_steps_match_eager_on_every_call() -> Result<()> {
    let start = || tensor::<f32>(&[1.0, -2.0, 0.5], &[3]).requires_grad_(true);
    let steps: [MakeOptimizer; 3] = [
        Box::new(|p| Ok(Box::new(Sgd::with_config(p, SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 0.01 })?))),
        Box::new(|p| Ok(Box::new(Adam::with_config(p, AdamConfig { lr: 0.1, weight_decay: 0.01, ..Default::default() })?))),
        Box::new(|p| Ok(Box::new(AdamW::with_config(p, AdamConfig { lr: 0.1, betas: (0.9, 0.95), weight_decay: 0.1, ..Default::default() })?))),
    ];
    for make in &steps {
        let (p_graph, p_eager) = (start()?, start()?);
        let opt_graph = make(vec![p_graph.clone()])?;
        let opt_eager = make(vec![p_eager.clone()])?;
        fresh_grad(&p_graph, 1.0)?;
        let f = ConcreteFunction::trace("step", &[], || {
            opt_graph.step()?;
            Ok(vec![])
        })?;
        assert_values(&p_graph, &[1.0, -2.0, 0.5]); // tracing changes nothing
        for call in 0..4 {
            let k = 1.0 + call as f64;
            fresh_grad(&p_graph, k)?;
            fresh_grad(&p_eager, k)?;
            f.call(&[])?;
            opt_eager.step()?;
            assert_bits_eq(&p_graph, &p_eager);
        }
    }
    Ok(())
}

#[test]
fn traced_training_step_matches_eager() -> Result<()> {
    let (x, labels) = blobs(64, 3)?;
    let (model_graph, model_eager) = (mlp(4)?, mlp(4)?);
    let adam_graph = Adam::new(model_graph.parameters(), 0.01)?;
    let adam_eager = Adam::new(model_eager.parameters(), 0.01)?;
    let f = ConcreteFunction::trace("train_step", &[("x", &x)], || {
        adam_graph.zero_grad()?;
        let loss = nn::cross_entropy(&model_graph.forward(&x)?, &labels)?;
        loss.backward()?;
        adam_graph.step()?;
        Ok(vec![loss])
    })?;
    for _ in 0..5 {
        let loss_graph = f.call(&[&x])?.remove(0);
        adam_eager.zero_grad()?;
        let loss_eager = nn::cross_entropy(&model_eager.forward(&x)?, &labels)?;
        loss_eager.backward()?;
        adam_eager.step()?;
        assert_bits_eq(&loss_graph, &loss_eager.detach());
        for (p, q) in model_graph.parameters().iter().zip(&model_eager.parameters()) {
            assert_bits_eq(p, q);
            assert_bits_eq(&p.grad().unwrap(), &q.grad().unwrap());
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------ schedules

/// One training step: forward, mean cross-entropy, backward, the optimizer's update.
fn train_step(model: &Sequential, opt: &dyn Optimizer, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    opt.zero_grad()?;
    let loss = nn::cross_entropy(&model.forward(x)?, labels)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

#[graph_fn]
fn scheduled_adamw_step(model: &Sequential, opt: &AdamW, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    train_step(model, opt, x, labels)
}

#[graph_fn]
fn one_cycle_sgd_step(model: &Sequential, opt: &Sgd, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    train_step(model, opt, x, labels)
}

/// Runs `steps` scheduled steps eagerly and as a graph (`graph_step`), asserting after each
/// that the losses, parameters and gradients have the same bits.
fn scheduled_runs_match<O: Optimizer, S: LrScheduler>(
    make_opt: impl Fn(Vec<Tensor>) -> Result<O>,
    make_sched: impl Fn(&O) -> Result<S>,
    graph_step: impl Fn(&Sequential, &O, &Tensor, &Tensor) -> Result<Tensor>,
    steps: usize,
) -> Result<Vec<f64>> {
    let (x, labels) = blobs(48, 7)?;
    let (model_eager, model_graph) = (mlp(8)?, mlp(8)?);
    let (opt_eager, opt_graph) = (make_opt(model_eager.parameters())?, make_opt(model_graph.parameters())?);
    let (mut sched_eager, mut sched_graph) = (make_sched(&opt_eager)?, make_sched(&opt_graph)?);
    let mut lrs = Vec::new();
    for step in 0..steps {
        lrs.push(opt_graph.lr());
        let eager = train_step(&model_eager, &opt_eager, &x, &labels)?;
        let graph = graph_step(&model_graph, &opt_graph, &x, &labels)?;
        assert_eq!(eager.item::<f32>()?.to_bits(), graph.item::<f32>()?.to_bits(), "loss at step {step}");
        for (p, q) in model_eager.parameters().iter().zip(&model_graph.parameters()) {
            assert_bits_eq(p, q);
            assert_bits_eq(&p.grad().unwrap(), &q.grad().unwrap());
        }
        sched_eager.step()?;
        sched_graph.step()?;
        assert_eq!(opt_eager.lr().to_bits(), opt_graph.lr().to_bits());
    }
    Ok(lrs)
}

#[test]
fn a_hundred_cosine_scheduled_adamw_steps_are_one_trace_and_match_eager_bit_for_bit() -> Result<()> {
    let config = AdamConfig { lr: 0.05, betas: (0.9, 0.95), eps: 1e-8, weight_decay: 0.1 };
    let lrs = scheduled_runs_match(|p| AdamW::with_config(p, config), |opt| CosineAnnealingLR::new(opt, 100, 1e-4), scheduled_adamw_step, 100)?;
    // The schedule did move the rate the graph read: from 0.05 down towards 1e-4.
    assert_eq!(lrs[0], 0.05);
    assert!((lrs[50] - (1e-4 + (0.05 - 1e-4) / 2.0)).abs() < 1e-12, "{}", lrs[50]);
    assert!(lrs[99] < 1e-3, "{}", lrs[99]);
    let f = tensor_core::function::lookup("scheduled_adamw_step").unwrap();
    assert_eq!(f.trace_count(), 1, "{:?}", f.retrace_reasons());
    Ok(())
}

#[test]
fn one_cycle_moves_sgds_rate_and_momentum_without_retracing() -> Result<()> {
    let config = SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 1e-3 };
    let lrs = scheduled_runs_match(|p| Sgd::with_config(p, config), |opt| OneCycleLR::new(opt, 0.5, 20), one_cycle_sgd_step, 20)?;
    assert_eq!(lrs[5], 0.5); // the peak, at step 0.3 * 20 - 1
    let f = tensor_core::function::lookup("one_cycle_sgd_step").unwrap();
    assert_eq!(f.trace_count(), 1, "{:?}", f.retrace_reasons());
    Ok(())
}

#[test]
fn set_lr_changes_a_captured_traced_step_without_retracing() -> Result<()> {
    let p = tensor::<f32>(&[1.0, -2.0], &[2]).requires_grad_(true)?;
    let mut opt = Sgd::new(vec![p.clone()], 0.5)?;
    fresh_grad(&p, 0.5)?; // grad = p = [1, -2]
    let f = ConcreteFunction::trace("sgd_step", &[], || {
        opt.step()?;
        Ok(vec![])
    })?;
    f.call(&[])?; // p -= 0.5 * [1, -2]
    assert_values(&p, &[0.5, -1.0]);
    opt.set_lr(0.25)?;
    f.call(&[])?; // the same grad, the new rate
    assert_values(&p, &[0.25, -0.5]);
    Ok(())
}

// ------------------------------------------------------------------------------ transformer layers

/// AdamW on one f64 value, written out from PyTorch's `_single_tensor_adamw`: the decay
/// multiplies the parameter before the Adam step, which sees the plain gradient.
fn adamw_reference(mut p: f64, grad: impl Fn(f64) -> f64, c: AdamConfig, steps: usize) -> Vec<f64> {
    let ((b1, b2), (mut m, mut v)) = (c.betas, (0.0, 0.0));
    (1..=steps as i32)
        .map(|t| {
            let g = grad(p);
            p *= 1.0 - c.lr * c.weight_decay;
            m = b1 * m + (1.0 - b1) * g;
            v = b2 * v + (1.0 - b2) * g * g;
            let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
            p -= c.lr / bc1 * m / (v.sqrt() / bc2.sqrt() + c.eps);
            p
        })
        .collect()
}

#[test]
fn adamw_steps_match_pytorch_rule() -> Result<()> {
    let config = AdamConfig { lr: 0.05, betas: (0.9, 0.95), eps: 1e-8, weight_decay: 0.1 };
    let expected = adamw_reference(1.5, |p| 2.0 * p, config, 5);
    // Not Adam's L2 penalty: the two rules part after the first step.
    assert!((adam_reference(1.5, |p| 2.0 * p, config, 5)[4] - expected[4]).abs() > 1e-4);
    for dtype in [DType::F64, DType::F32] {
        let p = Tensor::scalar(1.5f64).cast(dtype)?.requires_grad_(true)?;
        let opt = AdamW::with_config(vec![p.clone()], config)?;
        for e in &expected {
            opt.zero_grad()?;
            (&p * &p).backward()?;
            opt.step()?;
            assert_close(&p, &[*e], if dtype == DType::F64 { 1e-12 } else { 1e-6 });
        }
        assert_eq!(opt.step_count(0).unwrap().item::<f64>()?, 5.0);
    }
    // A parameter without a grad is neither decayed nor stepped.
    let (a, b) = (Tensor::scalar(1.0f32).requires_grad_(true)?, Tensor::scalar(1.0f32).requires_grad_(true)?);
    let opt = AdamW::new(vec![a.clone(), b.clone()], 0.1)?;
    (&a * 2.0).backward()?;
    opt.step()?;
    assert_eq!(b.item::<f32>()?, 1.0);
    assert_ne!(a.item::<f32>()?, 1.0);
    Ok(())
}

#[test]
fn embedding_layer_norm_gelu_dropout_layers() -> Result<()> {
    use tensor_core::nn::{Dropout, Embedding, Gelu, LayerNorm};
    let emb = Embedding::from_tensor(tensor::<f64>(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2]))?;
    let tokens = Tensor::from_vec(vec![2i64, 2, 0], &[3])?;
    let e = emb.forward(&tokens)?;
    assert_values(&e, &[4.0, 5.0, 4.0, 5.0, 0.0, 1.0]);
    e.sum()?.backward()?;
    assert_values(&emb.weight().grad().unwrap(), &[1.0, 1.0, 0.0, 0.0, 2.0, 2.0]);
    assert!(emb.forward(&tensor::<f64>(&[1.0], &[1])).is_err(), "float indices");
    assert!(emb.forward(&Tensor::from_vec(vec![3i64], &[1])?).is_err(), "out of range");

    let ln = LayerNorm::new(4, 1e-5, DType::F64)?;
    no_grad(|| -> Result<()> {
        ln.weight().assign_(&tensor::<f64>(&[1.0, 2.0, 1.0, 1.0], &[4]))?;
        ln.bias().assign_(&tensor::<f64>(&[0.0, 0.0, 0.0, 1.0], &[4]))
    })?;
    let y = ln.forward(&tensor::<f64>(&[1.0, 2.0, 3.0, 4.0], &[1, 4]))?;
    // mean 2.5, biased variance 1.25
    let s = (1.25f64 + 1e-5).sqrt();
    assert_close(&y, &[-1.5 / s, 2.0 * -0.5 / s, 0.5 / s, 1.5 / s + 1.0], 1e-12);
    assert!(ln.forward(&Tensor::zeros(&[2, 3], DType::F64)).is_err(), "last dim 3, not 4");

    let x = tensor::<f32>(&[-2.0, 0.0, 2.0], &[3]);
    assert_close(&Gelu::new().forward(&x)?, &[-0.0455002638963584, 0.0, 1.9544997361036416], 1e-6);
    assert_close(&Gelu::tanh().forward(&x)?, &[-0.04540230591222, 0.0, 1.95459769408778], 1e-6);

    let mut drop = Dropout::new(0.5, &Generator::new(1))?;
    let ones = Tensor::ones(&[64], DType::F32);
    let a = drop.forward(&ones)?.to_vec::<f32>()?;
    assert!(a.iter().all(|&v| v == 0.0 || v == 2.0) && a.contains(&0.0) && a.contains(&2.0));
    drop.set_training(false);
    assert_bits_eq(&drop.forward(&ones)?, &ones);
    Ok(())
}

#[test]
fn causal_self_attention_sees_only_the_past() -> Result<()> {
    use tensor_core::nn::CausalSelfAttention;
    let attn = CausalSelfAttention::new(8, 2, DType::F64, &Generator::new(5))?;
    let x = Tensor::randn(&[2, 6, 8], DType::F64, 6).requires_grad_(true)?;
    let y = attn.forward(&x)?;
    assert_eq!(y.dims(), vec![2, 6, 8]);
    // The output at position 2 depends on positions 0..=2 only.
    y.narrow(1, 2, 1)?.sum()?.backward()?;
    let g = x.grad().unwrap().abs()?.sum_axes(&[0, 2], false)?.to_vec::<f64>()?;
    assert!(g[..3].iter().all(|&v| v > 0.0) && g[3..].iter().all(|&v| v == 0.0), "{g:?}");
    // The same block written out by hand: one head of 4 dims at a time.
    let p = attn.parameters();
    let qkv = x.matmul(&p[0].t()?)?.add(&p[1])?;
    let mut heads = Vec::new();
    for h in 0..2 {
        let part = |i: usize| qkv.narrow(2, i * 8 + h * 4, 4);
        let scores = part(0)?.matmul(&part(1)?.transpose(1, 2)?)?.div(2.0)?;
        let w = scores.masked_fill(&Tensor::causal_mask(6), f64::NEG_INFINITY)?.softmax(-1)?;
        heads.push(w.matmul(&part(2)?)?);
    }
    let expected = Tensor::concat(&[&heads[0], &heads[1]], 2)?.matmul(&p[2].t()?)?.add(&p[3])?;
    let (got, want) = (y.to_vec::<f64>()?, expected.to_vec::<f64>()?);
    assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-12));
    assert!(CausalSelfAttention::new(8, 3, DType::F32, &Generator::new(0)).is_err());
    Ok(())
}

// ------------------------------------------------------------------------------ BatchNorm2d

#[graph_fn]
fn batch_norm_train_step(bn: &nn::BatchNorm2d, opt: &Sgd, x: &Tensor) -> Result<Tensor> {
    let loss = bn.forward(x)?.mul(x)?.sum()?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

/// A BatchNorm2d training step run eagerly and as a graph: the same loss, parameters and
/// running statistics (state the graph writes back) at every step; then evaluation mode,
/// which traces apart, and a checkpoint of the running statistics.
#[test]
fn batch_norm2d_trains_the_same_in_a_graph_and_keeps_its_statistics() -> Result<()> {
    let x = Tensor::randn(&[4, 3, 2, 2], DType::F32, 11);
    let (mut eager, mut graph) = (nn::BatchNorm2d::new(3, 1e-5, 0.1, DType::F32)?, nn::BatchNorm2d::new(3, 1e-5, 0.1, DType::F32)?);
    let (opt_e, opt_g) = (Sgd::new(eager.parameters(), 0.1)?, Sgd::new(graph.parameters(), 0.1)?);
    for _ in 0..3 {
        opt_e.zero_grad()?;
        opt_g.zero_grad()?;
        let le = {
            let loss = eager.forward(&x)?.mul(&x)?.sum()?;
            loss.backward()?;
            opt_e.step()?;
            loss
        };
        let lg = batch_norm_train_step(&graph, &opt_g, &x)?;
        assert_bits_eq(&le, &lg);
        for ((ne, te), (ng, tg)) in eager.state_dict()?.iter().zip(&graph.state_dict()?) {
            assert_eq!(ne, ng);
            assert_bits_eq(te, tg);
        }
    }
    assert_eq!(graph.num_batches_tracked().item::<i64>()?, 3);
    assert_ne!(graph.running_mean().to_vec::<f32>()?, vec![0.0; 3]);
    // Evaluation: the running statistics, unchanged by the call.
    eager.set_training(false);
    graph.set_training(false);
    let before = graph.running_var().to_vec::<f32>()?;
    assert_bits_eq(&no_grad(|| eager.forward(&x))?, &no_grad(|| graph.forward(&x))?);
    assert_eq!(graph.running_var().to_vec::<f32>()?, before);
    // The statistics are checkpoint entries: a fresh layer loads them.
    let mut fresh = nn::BatchNorm2d::new(3, 1e-5, 0.1, DType::F32)?;
    fresh.load_state_dict(&graph.state_dict()?)?;
    fresh.set_training(false);
    assert_bits_eq(&no_grad(|| fresh.forward(&x))?, &no_grad(|| graph.forward(&x))?);
    Ok(())
}
