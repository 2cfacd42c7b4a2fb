//! The autograd calls PyTorch users reach for: `backward` over several roots with their own
//! seeds, `enable_grad` inside `no_grad`, `detach_()`, and the in-place unary ops — values,
//! gradients against finite differences, version counters, and eager == graph bit for bit.

use tensor_core::autograd::{backward, BackwardOptions};
use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;
use tensor_core::{enable_grad, EnableGradGuard};
use tests::{as_f64, assert_bits_eq};

/// Central differences of the scalar `f` at every element of `x` (f64).
fn finite_diff(x: &Tensor, f: impl Fn(&Tensor) -> Result<f64>) -> Result<Vec<f64>> {
    let eps = 1e-6;
    let base = as_f64(x);
    (0..base.len())
        .map(|j| {
            let at = |d: f64| -> Result<f64> {
                let mut v = base.clone();
                v[j] += d;
                f(&Tensor::from_vec(v, &x.dims())?)
            };
            Ok((at(eps)? - at(-eps)?) / (2.0 * eps))
        })
        .collect()
}

#[track_caller]
fn assert_close(analytic: &[f64], numeric: &[f64]) {
    assert_eq!(analytic.len(), numeric.len());
    assert!(numeric.iter().any(|n| n.abs() > 1e-3), "every numeric gradient is zero");
    for (a, n) in analytic.iter().zip(numeric) {
        assert!((a - n).abs() <= 1e-6 * n.abs().max(1.0), "analytic {a}, numeric {n}");
    }
}

// ------------------------------------------------------------------- backward over several roots

/// y1 = tanh(x) * 3, y2 = sum(y1 * x) (depends on y1), y3 = exp(x); seeds g1, g2, g3.
fn roots(x: &Tensor) -> Result<[Tensor; 3]> {
    let y1 = x.tanh()?.mul(3.0)?;
    let y2 = y1.mul(x)?.sum()?;
    let y3 = x.exp()?;
    Ok([y1, y2, y3])
}

fn seeds() -> [Tensor; 3] {
    [Tensor::from_vec(vec![1.0f64, -2.0, 0.5], &[3]).unwrap(), Tensor::scalar(0.25f64), Tensor::from_vec(vec![0.1f64, 0.2, 0.3], &[3]).unwrap()]
}

/// The scalar whose gradient a multi-root backward computes: sum over roots of root · seed.
fn seeded_sum(x: &Tensor) -> Result<f64> {
    let (ys, gs) = (roots(x)?, seeds());
    let mut total = 0.0;
    for (y, g) in ys.iter().zip(&gs) {
        total += as_f64(y).iter().zip(as_f64(g)).map(|(a, b)| a * b).sum::<f64>();
    }
    Ok(total)
}

#[test]
fn backward_over_dependent_roots_with_their_seeds_matches_finite_differences() -> Result<()> {
    let x0 = Tensor::from_vec(vec![0.3f64, -0.7, 1.1], &[3])?;
    let x = x0.requires_grad_(true)?;
    let [y1, y2, y3] = roots(&x)?;
    let [g1, g2, g3] = seeds();
    backward(&[&y1, &y2, &y3], &[Some(&g1), Some(&g2), Some(&g3)], BackwardOptions::default())?;
    assert_close(&as_f64(&x.grad().unwrap()), &finite_diff(&x0, seeded_sum)?);
    // The same as one backward of the weighted sum.
    let x2 = x0.detach().requires_grad_(true)?;
    let [z1, z2, z3] = roots(&x2)?;
    z1.mul(&g1)?.sum()?.add(&z2.mul(&g2)?)?.add(&z3.mul(&g3)?.sum()?)?.backward()?;
    let (a, b) = (as_f64(&x.grad().unwrap()), as_f64(&x2.grad().unwrap()));
    for (a, b) in a.iter().zip(&b) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
    Ok(())
}

#[test]
fn backward_over_several_roots_in_a_graph_matches_eager_bit_for_bit() -> Result<()> {
    let run = |x: &Tensor| -> Result<Vec<Tensor>> {
        let [y1, y2, y3] = roots(x)?;
        let [g1, g2, g3] = seeds();
        backward(&[&y1, &y2, &y3], &[Some(&g1), None, Some(&g3)], BackwardOptions::default())?;
        let _ = g2;
        Ok(vec![y2])
    };
    let xe = Tensor::from_vec(vec![0.3f64, -0.7, 1.1], &[3])?.requires_grad_(true)?;
    run(&xe)?;
    let xg = xe.detach().requires_grad_(true)?;
    let f = ConcreteFunction::trace("roots", &[("x", &xg)], || run(&xg))?;
    assert!(xg.grad().is_none(), "tracing leaves the real .grad alone");
    f.call(&[&xg])?;
    assert_bits_eq(&xe.grad().unwrap(), &xg.grad().unwrap());
    Ok(())
}

#[test]
fn backward_over_several_roots_checks_its_arguments() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().requires_grad_(true).unwrap();
    let y = x.mul(2.0).unwrap();
    let s = y.sum().unwrap();
    let e = backward(&[&y, &s], &[None], BackwardOptions::default()).unwrap_err();
    assert!(e.to_string().contains("1 seed gradients for 2 roots"), "{e}");
    // A vector root needs its seed.
    assert!(matches!(backward(&[&y, &s], &[], BackwardOptions::default()), Err(Error::BackwardNonScalar { .. })));
    assert!(backward(&[], &[], BackwardOptions::default()).is_err());
    assert!(x.grad().is_none(), "a refused backward changes no .grad");
    backward(&[&s, &s], &[], BackwardOptions::default()).unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![4.0, 4.0]);
}

// ------------------------------------------------------------------------------- enable_grad

#[test]
fn enable_grad_records_inside_no_grad_as_closure_and_guard() -> Result<()> {
    let w = Tensor::scalar(2.0f64).requires_grad_(true)?;
    let (off, on, guarded) = no_grad(|| -> Result<_> {
        let off = w.mul(3.0)?;
        let on = enable_grad(|| w.mul(&w))?;
        let guarded = {
            let _g = EnableGradGuard::new();
            w.exp()?
        };
        assert!(!tensor_core::is_grad_enabled(), "the guard restored no_grad");
        Ok((off, on, guarded))
    })?;
    assert!(!off.requires_grad());
    assert_eq!(on.grad_fn().unwrap().name(), "MulBackward");
    on.backward()?;
    assert_eq!(w.grad().unwrap().item::<f64>()?, 4.0);
    w.zero_grad()?;
    guarded.backward()?;
    assert_eq!(w.grad().unwrap().item::<f64>()?, 2.0f64.exp());
    Ok(())
}

#[test]
fn enable_grad_inside_no_grad_traces_the_same_gradients() -> Result<()> {
    let run = |x: &Tensor| -> Result<Vec<Tensor>> {
        let g = no_grad(|| enable_grad(|| -> Result<Tensor> { tensor_core::grad(&[&x.tanh()?.sum()?], &[x], false).map(|mut g| g.remove(0)) }))?;
        Ok(vec![g])
    };
    let x = Tensor::from_vec(vec![0.5f32, -1.5], &[2])?.requires_grad_(true)?;
    let eager = run(&x)?;
    let f = ConcreteFunction::trace("eg", &[("x", &x)], || run(&x))?;
    assert_bits_eq(&eager[0], &f.call(&[&x])?[0]);
    Ok(())
}

// ----------------------------------------------------------------------------------- detach_

#[test]
fn detach_in_place_cuts_every_handle_from_the_graph() -> Result<()> {
    let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
    let y = w.mul(2.0)?;
    let alias = y.clone();
    y.detach_()?;
    assert!(!alias.requires_grad() && alias.is_leaf() && alias.grad_fn().is_none());
    // Ops on it record nothing; the values are kept.
    assert!(!y.exp()?.requires_grad());
    assert_eq!(y.to_vec::<f32>()?, vec![2.0, 4.0]);
    // A leaf stops requiring grad.
    w.detach_()?;
    assert!(!w.requires_grad());
    Ok(())
}

#[test]
fn detach_in_place_in_a_graph() -> Result<()> {
    let run = |x: &Tensor| -> Result<Vec<Tensor>> {
        let y = x.mul(3.0)?;
        y.detach_()?;
        // Only the path through `z` carries a gradient.
        let z = x.mul(&y)?.sum()?;
        tensor_core::grad(&[&z], &[x], false)
    };
    let x = Tensor::from_vec(vec![1.0f32, -2.0], &[2])?.requires_grad_(true)?;
    let eager = run(&x)?;
    assert_eq!(eager[0].to_vec::<f32>()?, vec![3.0, -6.0]);
    let f = ConcreteFunction::trace("detach", &[("x", &x)], || run(&x))?;
    assert_bits_eq(&eager[0], &f.call(&[&x])?[0]);
    // An argument cannot be cut inside a trace.
    let e = ConcreteFunction::trace("arg", &[("x", &x)], || {
        x.detach_()?;
        Ok(vec![x.clone()])
    })
    .unwrap_err();
    assert!(e.to_string().contains("detach_") && e.to_string().contains("x.detach()"), "{e}");
    assert!(x.requires_grad(), "the refused detach_ changed nothing");
    Ok(())
}

// -------------------------------------------------------------------------- in-place unary ops

type InPlaceFn = fn(&Tensor) -> Result<()>;
type OutOfPlaceFn = fn(&Tensor) -> Result<Tensor>;

fn unary_pairs() -> Vec<(&'static str, InPlaceFn, OutOfPlaceFn)> {
    vec![
        ("exp_", |t| t.exp_(), |t| t.exp()),
        ("log_", |t| t.log_(), |t| t.log()),
        ("sqrt_", |t| t.sqrt_(), |t| t.sqrt()),
        ("tanh_", |t| t.tanh_(), |t| t.tanh()),
        ("sigmoid_", |t| t.sigmoid_(), |t| t.sigmoid()),
        ("relu_", |t| t.relu_(), |t| t.relu()),
        ("abs_", |t| t.abs_(), |t| t.abs()),
        ("neg_", |t| t.neg_(), |t| t.neg()),
        ("sign_", |t| t.sign_(), |t| t.sign()),
        ("clamp_", |t| t.clamp_(0.6f64, 1.5f64), |t| t.clamp(0.6f64, 1.5f64)),
        ("clamp_min_", |t| t.clamp_min_(0.9f64), |t| t.clamp_min(0.9f64)),
        ("clamp_max_", |t| t.clamp_max_(0.9f64), |t| t.clamp_max(0.9f64)),
    ]
}

/// Positive, away from the clamp bounds and from 0 (abs, relu, sign).
fn positive() -> Tensor {
    Tensor::from_vec(vec![0.3f64, 0.7, 1.2, 2.0], &[4]).unwrap()
}

#[test]
fn in_place_unary_ops_give_the_out_of_place_bits_and_bump_the_version() -> Result<()> {
    for (name, in_place, out_of_place) in unary_pairs() {
        let x = positive().mul(-1.0)?.add(1.0)?; // mixed signs
        let want = out_of_place(&x)?;
        let alias = x.clone();
        match in_place(&x) {
            Ok(()) => {
                assert_bits_eq(&alias, &want);
                assert_eq!(alias.version(), 1, "{name}");
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    Ok(())
}

#[test]
fn in_place_unary_gradients_match_finite_differences() -> Result<()> {
    for (name, in_place, _) in unary_pairs() {
        if name == "sign_" {
            continue; // zero gradient everywhere
        }
        // y = (x * 2) op_ in place, then a weighted sum.
        let f = |x: &Tensor| -> Result<Tensor> {
            let y = x.mul(2.0)?;
            in_place(&y)?;
            y.mul(&Tensor::from_vec(vec![1.0f64, -2.0, 3.0, 0.5], &[4])?)?.sum()
        };
        let x = positive().mul(0.5)?.requires_grad_(true)?;
        f(&x)?.backward()?;
        let numeric = finite_diff(&positive().mul(0.5)?, |t| f(t)?.item::<f64>())?;
        assert_close(&as_f64(&x.grad().unwrap()), &numeric);
    }
    Ok(())
}

#[test]
fn in_place_unary_ops_keep_the_version_rules() -> Result<()> {
    let w = Tensor::from_vec(vec![0.5f64, 2.0], &[2])?.requires_grad_(true)?;
    // A leaf that requires grad: refused, unchanged; allowed under no_grad.
    assert!(matches!(w.exp_(), Err(Error::InPlaceOnLeaf { op: "exp_" })));
    assert!(matches!(w.clamp_(0.0f64, 1.0f64), Err(Error::InPlaceOnLeaf { op: "clamp_" })));
    assert_eq!((w.to_vec::<f64>()?, w.version()), (vec![0.5, 2.0], 0));
    // A value saved for backward, overwritten: backward is an error.
    let y = w.mul(1.0)?;
    let z = y.log()?; // saves y
    y.relu_()?;
    assert!(matches!(z.sum()?.backward(), Err(Error::SavedTensorModified { .. })));
    // exp saves its output: an in-place op on that output makes its backward an error too.
    let e = w.exp()?;
    e.neg_()?;
    assert!(matches!(e.sum()?.backward(), Err(Error::SavedTensorModified { node: "ExpBackward", .. })));
    no_grad(|| w.abs_())?;
    assert_eq!(w.version(), 1);
    Ok(())
}

#[test]
fn in_place_unary_ops_in_a_graph_match_eager_bit_for_bit() -> Result<()> {
    let run = |x: &Tensor, state: &Tensor| -> Result<Vec<Tensor>> {
        // clamp saves its input (the old value, kept by the in-place op), exp its output.
        let y = x.mul(1.5)?;
        y.clamp_(-0.5f32, 0.8f32)?;
        y.exp_()?;
        let u = x.mul(0.5)?;
        u.tanh_()?;
        let loss = y.sum()?.add(&u.sum()?)?;
        let g = tensor_core::grad(&[&loss], &[x], false)?.remove(0);
        // An argument updated in place (no grad): the caller sees it after the call.
        no_grad(|| -> Result<()> {
            state.sigmoid_()?;
            state.neg_()
        })?;
        Ok(vec![y, u, g])
    };
    let x = Tensor::randn(&[5], DType::F32, 7).requires_grad_(true)?;
    let (se, sg) = (Tensor::randn(&[3], DType::F32, 8), Tensor::randn(&[3], DType::F32, 8));
    let eager = run(&x, &se)?;
    let f = ConcreteFunction::trace("unary", &[("x", &x), ("state", &sg)], || run(&x, &sg))?;
    let graph = f.call(&[&x, &sg])?;
    for (e, g) in eager.iter().zip(&graph) {
        assert_bits_eq(e, g);
    }
    assert_bits_eq(&se, &sg);
    Ok(())
}
