//! Gradients from outside through graph calls whose graph holds `cond` / `while_loop` nodes
//! (`jax.grad(jax.jit(f))` over `lax.cond` / `lax.while_loop`): the joint trace replays the
//! control-flow nodes with their gradients, so the call's backward is a graph with `cond` and
//! `while` nodes of its own. Each gradient is compared bit for bit with the same body run
//! eagerly (the body without the macro), and with hand-computed values or finite differences.

use tensor_core::control::{cond, while_loop, while_loop_opts, WhileOptions};
use tensor_core::function::{lookup, ConcreteFunction};
use tensor_core::prelude::*;
use tests::assert_bits_eq;

fn leaf(values: &[f32]) -> Tensor {
    Tensor::from_vec(values.to_vec(), &[values.len()]).unwrap().requires_grad_(true).unwrap()
}

fn leaf64(values: &[f64]) -> Tensor {
    Tensor::from_vec(values.to_vec(), &[values.len()]).unwrap().requires_grad_(true).unwrap()
}

/// A fresh leaf with the values of `t` (the eager twin's input).
fn twin(t: &Tensor) -> Tensor {
    t.detach().requires_grad_(true).unwrap()
}

/// The backward graphs traced for the calls of graph function `name`.
fn backward_graphs(name: &str) -> Vec<tensor_core::graph::Graph> {
    let f = lookup(name).unwrap();
    f.concrete_functions().iter().flat_map(|c| c.backward_functions()).map(|b| b.traced_graph().clone()).collect()
}

/// Two outputs from a branch: the product after the branch saves both (the residuals the
/// backward reads are outputs of the `Cond` node), `exp` saves its output; `w` is read by
/// both branches (two uses of one slot), `x` by one.
fn two_branches_eager(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let p = x.sum()?.gt(0.0)?;
    let (a, b) = cond(&p, || Ok((x.mul(w)?.exp()?, x.mul(2.0)?)), || Ok((w.sigmoid()?, x.tanh()?.mul(w)?)))?;
    a.mul(&b)?.tanh()?.sum()
}

#[graph_fn]
fn two_branches(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    two_branches_eager(x, w)
}

#[test]
fn a_cond_call_differentiates_from_outside_with_the_eager_bits_on_both_branches() -> Result<()> {
    for xv in [[0.5f32, 0.25, -0.125], [-0.5, 0.25, -0.125]] {
        let (x, w) = (leaf(&xv), leaf(&[0.3, -0.7, 1.1]));
        let (xe, we) = (twin(&x), twin(&w));
        let y = two_branches(&x, &w)?;
        assert_eq!(y.grad_fn().unwrap().name(), "two_branchesBackward");
        let ye = two_branches_eager(&xe, &we)?;
        assert_bits_eq(&y, &ye);
        y.backward()?;
        ye.backward()?;
        assert_bits_eq(&x.grad().unwrap(), &xe.grad().unwrap());
        assert_bits_eq(&w.grad().unwrap(), &we.grad().unwrap());
    }
    // The backward is a graph with a cond of its own (the gradient of the cond), traced once.
    let graphs = backward_graphs("two_branches");
    assert_eq!(graphs.len(), 1, "one backward, reused by the call taking the other branch");
    assert_eq!(graphs[0].count_op("cond"), 1, "{}", graphs[0]);
    Ok(())
}

#[test]
fn the_then_branch_gradient_is_the_hand_computed_one() -> Result<()> {
    // x > 0: y = sum(tanh(exp(x w) * 2x)); check one element against its derivative in f64.
    let (x, w) = (leaf(&[0.5, 0.25]), leaf(&[0.3, -0.7]));
    two_branches(&x, &w)?.backward()?;
    let (gx, gw) = (x.grad().unwrap().to_vec::<f32>()?, w.grad().unwrap().to_vec::<f32>()?);
    for (i, (xi, wi)) in [(0.5f64, 0.3f64), (0.25, -0.7)].into_iter().enumerate() {
        let u = (xi * wi).exp() * 2.0 * xi;
        let sech2 = 1.0 - u.tanh().powi(2);
        let dx = sech2 * ((xi * wi).exp() * wi * 2.0 * xi + (xi * wi).exp() * 2.0);
        let dw = sech2 * (xi * wi).exp() * xi * 2.0 * xi;
        assert!((gx[i] as f64 - dx).abs() < 1e-5 * dx.abs().max(1.0), "d/dx[{i}]: {} vs {dx}", gx[i]);
        assert!((gw[i] as f64 - dw).abs() < 1e-5 * dw.abs().max(1.0), "d/dw[{i}]: {} vs {dw}", gw[i]);
    }
    Ok(())
}

/// The macro's form: an `if` on a tensor condition is one `Cond` node.
#[graph_fn]
fn branchy_if(x: &Tensor) -> Result<Tensor> {
    let y = if x.sum()?.gt(0.0)? { x.mul(x)? } else { x.neg()?.exp()? };
    y.sum()
}

fn branchy_if_eager(x: &Tensor) -> Result<Tensor> {
    let y = if x.sum()?.gt(0.0)?.item::<bool>()? { x.mul(x)? } else { x.neg()?.exp()? };
    y.sum()
}

#[test]
fn an_if_on_a_tensor_condition_differentiates_from_outside() -> Result<()> {
    for (xv, expected) in [([1.0f32, 2.0], vec![2.0f32, 4.0]), ([-1.0, -2.0], vec![-(1.0f32.exp()), -(2.0f32.exp())])] {
        let x = leaf(&xv);
        let xe = twin(&x);
        branchy_if(&x)?.backward()?;
        branchy_if_eager(&xe)?.backward()?;
        assert_bits_eq(&x.grad().unwrap(), &xe.grad().unwrap());
        let g = x.grad().unwrap().to_vec::<f32>()?;
        for (a, b) in g.iter().zip(&expected) {
            assert!((a - b).abs() <= 1e-6 * b.abs(), "{g:?} vs {expected:?}");
        }
    }
    Ok(())
}

/// A loop with a fixed trip count: h <- tanh(h * w) three times; `w` is captured by the body
/// (its contributions from every iteration are summed), `x` starts the loop variable.
fn three_steps_eager(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (_, h) = while_loop(|(i, _): &(Tensor, Tensor)| i.lt(3i64), |(i, h)| Ok((&i + 1i64, h.mul(w)?.tanh()?)), (Tensor::scalar(0i64), x.clone()))?;
    h.sum()
}

#[graph_fn]
fn three_steps(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    three_steps_eager(x, w)
}

/// The same in f64 plain Rust, for finite differences.
fn three_steps_reference(x: &[f64], w: &[f64]) -> f64 {
    x.iter().zip(w).map(|(&h, &w)| (0..3).fold(h, |h, _| (h * w).tanh())).sum()
}

#[test]
fn a_while_loop_call_differentiates_from_outside_with_the_eager_bits() -> Result<()> {
    let (xv, wv) = ([0.5f32, -1.5, 2.0], [0.8f32, 1.3, -0.6]);
    let (x, w) = (leaf(&xv), leaf(&wv));
    let (xe, we) = (twin(&x), twin(&w));
    let y = three_steps(&x, &w)?;
    assert_eq!(y.grad_fn().unwrap().name(), "three_stepsBackward");
    let ye = three_steps_eager(&xe, &we)?;
    assert_bits_eq(&y, &ye);
    y.backward()?;
    ye.backward()?;
    assert_bits_eq(&x.grad().unwrap(), &xe.grad().unwrap());
    assert_bits_eq(&w.grad().unwrap(), &we.grad().unwrap());
    // Central differences in f64.
    let (gx, gw) = (x.grad().unwrap().to_vec::<f32>()?, w.grad().unwrap().to_vec::<f32>()?);
    let (x64, w64): (Vec<f64>, Vec<f64>) = (xv.iter().map(|&v| v as f64).collect(), wv.iter().map(|&v| v as f64).collect());
    let eps = 1e-6;
    for i in 0..3 {
        let nudged = |v: &[f64], d: f64| -> Vec<f64> {
            let mut v = v.to_vec();
            v[i] += d;
            v
        };
        let fdx = (three_steps_reference(&nudged(&x64, eps), &w64) - three_steps_reference(&nudged(&x64, -eps), &w64)) / (2.0 * eps);
        let fdw = (three_steps_reference(&x64, &nudged(&w64, eps)) - three_steps_reference(&x64, &nudged(&w64, -eps))) / (2.0 * eps);
        assert!((gx[i] as f64 - fdx).abs() < 1e-4 * fdx.abs().max(1.0), "d/dx[{i}]: {} vs {fdx}", gx[i]);
        assert!((gw[i] as f64 - fdw).abs() < 1e-4 * fdw.abs().max(1.0), "d/dw[{i}]: {} vs {fdw}", gw[i]);
    }
    // The backward walks the iterations back with a while loop of its own.
    let graphs = backward_graphs("three_steps");
    assert_eq!(graphs.len(), 1);
    assert_eq!(graphs[0].count_op("while"), 1, "{}", graphs[0]);
    Ok(())
}

/// A trip count that depends on the values (h grows until its sum passes 10), a branch inside
/// the body, and `max_iterations` as a bound.
fn grow_eager(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let opts = WhileOptions { max_iterations: Some(50), ..WhileOptions::default() };
    let h = while_loop_opts(
        &opts,
        |h: &Tensor| h.sum()?.lt(10.0),
        |h| {
            let p = h.sum()?.gt(2.0)?;
            cond(&p, || h.mul(w)?.add(1.0), || h.mul(2.0)?.add(w))
        },
        x.clone(),
    )?;
    h.mul(&h)?.sum()
}

#[graph_fn]
fn grow(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    grow_eager(x, w)
}

/// `grow` in f64 plain Rust.
fn grow_reference(x: &[f64], w: &[f64]) -> f64 {
    let mut h = x.to_vec();
    for _ in 0..50 {
        if h.iter().sum::<f64>() >= 10.0 {
            break;
        }
        h = if h.iter().sum::<f64>() > 2.0 {
            h.iter().zip(w).map(|(h, w)| h * w + 1.0).collect()
        } else {
            h.iter().zip(w).map(|(h, w)| h * 2.0 + w).collect()
        };
    }
    h.iter().map(|v| v * v).sum()
}

#[test]
fn a_value_dependent_loop_with_a_branch_inside_matches_eager_and_finite_differences() -> Result<()> {
    for (xv, wv) in [([0.25f64, 0.5], [1.5f64, 1.25]), ([1.0, 0.75], [1.1, 2.0])] {
        let (x, w) = (leaf64(&xv), leaf64(&wv));
        let (xe, we) = (twin(&x), twin(&w));
        let y = grow(&x, &w)?;
        let ye = grow_eager(&xe, &we)?;
        assert_eq!(y.to_vec::<f64>()?, ye.to_vec::<f64>()?);
        assert_eq!(y.item::<f64>()?, grow_reference(&xv, &wv));
        y.backward()?;
        ye.backward()?;
        let (gx, gw) = (x.grad().unwrap().to_vec::<f64>()?, w.grad().unwrap().to_vec::<f64>()?);
        assert_eq!(gx, xe.grad().unwrap().to_vec::<f64>()?);
        assert_eq!(gw, we.grad().unwrap().to_vec::<f64>()?);
        let eps = 1e-6;
        for i in 0..2 {
            let nudged = |v: &[f64], d: f64| -> Vec<f64> {
                let mut v = v.to_vec();
                v[i] += d;
                v
            };
            let fdx = (grow_reference(&nudged(&xv, eps), &wv) - grow_reference(&nudged(&xv, -eps), &wv)) / (2.0 * eps);
            let fdw = (grow_reference(&xv, &nudged(&wv, eps)) - grow_reference(&xv, &nudged(&wv, -eps))) / (2.0 * eps);
            assert!((gx[i] - fdx).abs() < 1e-5 * fdx.abs().max(1.0), "d/dx[{i}]: {} vs {fdx}", gx[i]);
            assert!((gw[i] - fdw).abs() < 1e-5 * fdw.abs().max(1.0), "d/dw[{i}]: {} vs {fdw}", gw[i]);
        }
    }
    Ok(())
}

/// Traced with inputs that do not require grad, the loop keeps no history; a call of that
/// concrete function on inputs that do runs a forward that keeps it, for the backward to walk.
#[test]
fn a_loop_traced_without_gradients_differentiates_when_a_call_needs_one() -> Result<()> {
    let w = Tensor::from_vec(vec![0.8f32, 1.3, -0.6], &[3])?;
    let x = Tensor::from_vec(vec![0.5f32, -1.5, 2.0], &[3])?;
    let f = ConcreteFunction::trace("steps_later", &[("x", &x), ("w", &w)], || Ok(vec![three_steps_eager(&x, &w)?]))?;
    let traced = f.traced_graph().to_string();
    assert!(f.traced_graph().count_op("while") == 1 && !traced.contains("history"), "{traced}");
    let plain = f.call(&[&x, &w])?.remove(0);
    let (xg, wg) = (leaf(&[0.5, -1.5, 2.0]), leaf(&[0.8, 1.3, -0.6]));
    let y = f.call(&[&xg, &wg])?.remove(0);
    assert_bits_eq(&y, &plain);
    y.backward()?;
    let (xe, we) = (twin(&xg), twin(&wg));
    three_steps_eager(&xe, &we)?.backward()?;
    assert_bits_eq(&xg.grad().unwrap(), &xe.grad().unwrap());
    assert_bits_eq(&wg.grad().unwrap(), &we.grad().unwrap());
    let forward = f.forwards_with_residuals();
    assert!(forward.len() == 1 && forward[0].to_string().contains("history"), "{}", forward[0]);
    Ok(())
}

fn cubic_or_exp_eager(x: &Tensor) -> Result<Tensor> {
    let p = x.sum()?.gt(0.0)?;
    cond(&p, || x.mul(x)?.mul(x), || x.exp())?.sum()
}

#[graph_fn]
fn cubic_or_exp(x: &Tensor) -> Result<Tensor> {
    cubic_or_exp_eager(x)
}

#[test]
fn second_derivatives_through_a_cond_call() -> Result<()> {
    for xv in [[1.5f64, -0.5, 0.25], [-1.5, 0.5, -0.25]] {
        let x = leaf64(&xv);
        let dy = tensor_core::grad(&[&cubic_or_exp(&x)?], &[&x], true)?.remove(0);
        assert!(dy.requires_grad(), "create_graph: the gradient is differentiable");
        let d2 = tensor_core::grad(&[&dy.sum()?], &[&x], false)?.remove(0);
        // 6x, or exp(x) (the kernel's exp: its bits are the eager ones).
        let expected: Vec<f64> = if xv.iter().sum::<f64>() > 0.0 { xv.iter().map(|v| 6.0 * v).collect() } else { x.detach().exp()?.to_vec()? };
        assert_eq!(d2.to_vec::<f64>()?, expected);
        // The same eagerly, bit for bit.
        let xe = twin(&x);
        let dye = tensor_core::grad(&[&cubic_or_exp_eager(&xe)?], &[&xe], true)?.remove(0);
        assert_eq!(dy.to_vec::<f64>()?, dye.to_vec::<f64>()?);
        let d2e = tensor_core::grad(&[&dye.sum()?], &[&xe], false)?.remove(0);
        assert_eq!(d2.to_vec::<f64>()?, d2e.to_vec::<f64>()?);
    }
    Ok(())
}

/// A second derivative through a loop: the backward reads the loop's saved iterations (a
/// residual), and the gradient of the backward flows into them, joining the loop variables'
/// gradients at each iteration.
#[test]
fn second_derivatives_through_a_while_loop_call() -> Result<()> {
    let (x, w) = (leaf64(&[0.5, -1.5, 2.0]), leaf64(&[0.8, 1.3, -0.6]));
    let (xe, we) = (twin(&x), twin(&w));
    let dy = tensor_core::grad(&[&three_steps(&x, &w)?], &[&x, &w], true)?;
    let dye = tensor_core::grad(&[&three_steps_eager(&xe, &we)?], &[&xe, &we], true)?;
    assert_eq!(dy[0].to_vec::<f64>()?, dye[0].to_vec::<f64>()?);
    assert_eq!(dy[1].to_vec::<f64>()?, dye[1].to_vec::<f64>()?);
    // d/dx and d/dw of sum(d y / d x): each element's loop is independent, so these are the
    // diagonal second derivatives, checked against the eager run and central differences of
    // the first derivative (in f64 plain Rust).
    let d2 = tensor_core::grad(&[&dy[0].sum()?], &[&x, &w], false)?;
    let d2e = tensor_core::grad(&[&dye[0].sum()?], &[&xe, &we], false)?;
    let first = |h: f64, w: f64| -> f64 {
        let (mut h, mut d) = (h, 1.0);
        for _ in 0..3 {
            let t = (h * w).tanh();
            d *= (1.0 - t * t) * w;
            h = t;
        }
        d
    };
    let (xv, wv) = (x.to_vec::<f64>()?, w.to_vec::<f64>()?);
    for (k, (got, eager)) in d2.iter().zip(&d2e).enumerate() {
        let (got, eager) = (got.to_vec::<f64>()?, eager.to_vec::<f64>()?);
        for i in 0..3 {
            // Not bit for bit: the loop adds the terms of a second derivative in another order.
            assert!((got[i] - eager[i]).abs() <= 1e-12 * eager[i].abs().max(1.0), "{k}/{i}: {got:?} vs eager {eager:?}");
            let eps = 1e-6;
            let fd = if k == 0 {
                (first(xv[i] + eps, wv[i]) - first(xv[i] - eps, wv[i])) / (2.0 * eps)
            } else {
                (first(xv[i], wv[i] + eps) - first(xv[i], wv[i] - eps)) / (2.0 * eps)
            };
            assert!((got[i] - fd).abs() < 1e-6 * fd.abs().max(1.0), "{k}/{i}: {} vs {fd}", got[i]);
        }
    }
    Ok(())
}

/// A loop whose variable changes shape has values of unknown shape, which a backward cannot
/// make zeros of or walk back: the call's `backward()` is an `Err` saying so.
#[graph_fn]
fn doubling(x: &Tensor) -> Result<Tensor> {
    let opts = WhileOptions { shape_invariants: Some(vec![Shape::new(&[tensor_core::shape::UNKNOWN])]), ..WhileOptions::default() };
    let y = while_loop_opts(&opts, |v: &Tensor| v.sum()?.lt(8.0), |v| Tensor::concat(&[&v, &v], 0), x.clone())?;
    y.mul(&y)?.sum()
}

#[test]
fn a_loop_whose_variables_change_shape_is_an_err_at_backward() -> Result<()> {
    let x = leaf(&[1.0, 1.0]);
    let y = doubling(&x)?;
    assert_eq!(y.item::<f32>()?, 8.0);
    let e = y.backward().unwrap_err();
    assert!(matches!(e, Error::NotDifferentiable { .. }) && e.to_string().contains("unknown"), "{e}");
    assert!(x.grad().is_none(), "a failed backward changes nothing");
    Ok(())
}

/// The same second derivative taken inside the traced function (the loop's own backward run
/// with `create_graph` in the trace): the backward of the loop's backward reads the saved
/// iterations, whose first dim (the trip count) is unknown while tracing, so it cannot make
/// their gradient's zeros (nor could `index_select` take a gradient along that dim). A clear
/// `Err`, where the saved iterations used to carry no gradient at all (the second derivative
/// missed their terms). From outside the call the backward is traced on the residuals'
/// actual shapes, so there it works (above).
#[test]
fn second_derivatives_through_a_loop_inside_the_function_are_a_clear_err() -> Result<()> {
    let body = |x: &Tensor, w: &Tensor| -> Result<Vec<Tensor>> {
        let dy = tensor_core::grad(&[&three_steps_eager(x, w)?], &[x], true)?.remove(0);
        let d2 = tensor_core::grad(&[&dy.sum()?], &[x], false)?.remove(0);
        Ok(vec![dy, d2])
    };
    let (x, w) = (leaf64(&[0.5, -1.5, 2.0]), Tensor::from_vec(vec![0.8f64, 1.3, -0.6], &[3])?);
    let e = ConcreteFunction::trace("second_in_loop", &[("x", &x)], || body(&x, &w)).unwrap_err();
    assert!(matches!(e, Error::NotDifferentiable { .. }) && e.to_string().contains("unknown"), "{e}");
    // Eagerly the loop is unrolled, and the second derivative is there.
    assert_eq!(body(&twin(&x), &w)?[1].dims(), vec![3]);
    Ok(())
}

/// A counter updated under the branch (state carried through the `Cond` node, written back
/// after the call) does not stop the gradient: the replay ignores the write-back.
fn counted_eager(x: &Tensor, count: &Tensor) -> Result<Tensor> {
    let p = x.sum()?.gt(0.0)?;
    let y = cond(
        &p,
        || {
            count.add_(1.0f32)?;
            x.mul(x)
        },
        || x.exp(),
    )?;
    y.sum()
}

#[graph_fn]
fn counted(x: &Tensor, count: &Tensor) -> Result<Tensor> {
    counted_eager(x, count)
}

#[test]
fn state_updated_under_a_branch_keeps_the_call_differentiable() -> Result<()> {
    let (count, count_eager) = (Tensor::scalar(0.0f32), Tensor::scalar(0.0f32));
    for xv in [[1.0f32, 2.0], [-1.0, -2.0], [0.5, 0.25]] {
        let x = leaf(&xv);
        let xe = twin(&x);
        counted(&x, &count)?.backward()?;
        counted_eager(&xe, &count_eager)?.backward()?;
        assert_bits_eq(&x.grad().unwrap(), &xe.grad().unwrap());
    }
    assert_eq!(count.item::<f32>()?, 2.0, "the branch updating the counter ran twice");
    assert_bits_eq(&count, &count_eager);
    Ok(())
}

/// A buffer scaled in place inside the branch, then read by it: the backward replays the
/// branch on the buffer as the call read it (kept as a residual), not as the call left it.
fn rescaled_eager(x: &Tensor, scale: &Tensor) -> Result<Tensor> {
    let p = x.sum()?.gt(0.0)?;
    let y = cond(
        &p,
        || {
            scale.mul_(0.5f32)?;
            x.mul(scale)?.mul(x)
        },
        || x.mul(scale),
    )?;
    y.sum()
}

#[graph_fn]
fn rescaled(x: &Tensor, scale: &Tensor) -> Result<Tensor> {
    rescaled_eager(x, scale)
}

#[test]
fn a_buffer_updated_and_read_in_a_branch_gives_the_eager_gradient() -> Result<()> {
    let (scale, scale_eager) = (Tensor::scalar(4.0f32), Tensor::scalar(4.0f32));
    // Scales 4 -> 2 (then-branch: d/dx = 2 * 2x), 2 (else: 2), 2 -> 1 (then: 1 * 2x).
    for (xv, expected) in [([1.0f32, 3.0], [4.0f32, 12.0]), ([-1.0, -3.0], [2.0, 2.0]), ([0.5, 0.25], [1.0, 0.5])] {
        let x = leaf(&xv);
        let xe = twin(&x);
        rescaled(&x, &scale)?.backward()?;
        rescaled_eager(&xe, &scale_eager)?.backward()?;
        assert_eq!(x.grad().unwrap().to_vec::<f32>()?, expected);
        assert_bits_eq(&x.grad().unwrap(), &xe.grad().unwrap());
    }
    assert_bits_eq(&scale, &scale_eager);
    Ok(())
}

/// A call's output captured by another trace, whose `backward()` runs there: the call's
/// backward graph (with its `while`) is replayed into that trace.
#[test]
fn the_backward_of_a_loop_call_replays_into_an_enclosing_trace() -> Result<()> {
    let (x, w) = (leaf(&[0.5, -1.5, 2.0]), leaf(&[0.8, 1.3, -0.6]));
    let y = three_steps(&x, &w)?;
    let f = ConcreteFunction::trace("backward_of_a_captured_call", &[], || {
        y.backward()?;
        Ok(Vec::<Tensor>::new())
    })?;
    assert!(x.grad().is_none(), "tracing ran nothing");
    f.call(&[])?;
    let (xe, we) = (twin(&x), twin(&w));
    three_steps_eager(&xe, &we)?.backward()?;
    assert_bits_eq(&x.grad().unwrap(), &xe.grad().unwrap());
    assert_bits_eq(&w.grad().unwrap(), &we.grad().unwrap());
    assert_eq!(f.traced_graph().count_op("while"), 1, "{}", f.traced_graph());
    Ok(())
}

/// A loop stopped by `max_iterations` (its condition still holds): the backward walks back the
/// iterations that ran.
fn bounded_eager(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let opts = WhileOptions { max_iterations: Some(4), ..WhileOptions::default() };
    let h = while_loop_opts(&opts, |h: &Tensor| h.sum()?.lt(1e9), |h| h.mul(w)?.add(1.0), x.clone())?;
    h.sum()
}

#[graph_fn]
fn bounded(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    bounded_eager(x, w)
}

#[test]
fn a_loop_stopped_by_max_iterations_differentiates_with_the_eager_bits() -> Result<()> {
    let (x, w) = (leaf(&[0.5, 2.0]), leaf(&[1.5, -0.5]));
    let (xe, we) = (twin(&x), twin(&w));
    bounded(&x, &w)?.backward()?;
    bounded_eager(&xe, &we)?.backward()?;
    // h4 = x w^4 + w^3 + w^2 + w + 1: d/dx = w^4.
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![1.5f32.powi(4), 0.0625]);
    assert_bits_eq(&x.grad().unwrap(), &xe.grad().unwrap());
    assert_bits_eq(&w.grad().unwrap(), &we.grad().unwrap());
    Ok(())
}

/// An input used in both branches (once, or twice in one branch), after the branch inside the
/// call, and outside the call: each use — a branch's uses too — is an edge of the call's node,
/// and the engine adds the contributions in the eager order, bit for bit.
fn shared_eager(x: &Tensor, w: &Tensor, twice: bool) -> Result<Tensor> {
    let p = x.sum()?.gt(0.0)?;
    let y = cond(&p, || x.mul(w)?.tanh(), || if twice { x.sigmoid()?.mul(x) } else { x.sigmoid()?.mul(w) })?;
    y.mul(x)?.sum()
}

#[graph_fn]
fn shared(x: &Tensor, w: &Tensor, twice: bool) -> Result<Tensor> {
    shared_eager(x, w, twice)
}

#[test]
fn an_input_used_in_the_branches_and_outside_the_call_gets_the_eager_sum() -> Result<()> {
    for twice in [false, true] {
        for xv in [[0.7f32, -0.2, 1.3], [-0.7, 0.2, -1.3]] {
            let (x, w) = (leaf(&xv), leaf(&[0.3, 1.7, -0.9]));
            let (xe, we) = (twin(&x), twin(&w));
            shared(&x, &w, twice)?.mul(&x.exp()?)?.sum()?.backward()?;
            shared_eager(&xe, &we, twice)?.mul(&xe.exp()?)?.sum()?.backward()?;
            match we.grad() {
                Some(we_grad) => assert_bits_eq(&w.grad().unwrap(), &we_grad),
                // Eagerly the branch that reads `w` did not run, so `w` has no gradient.
                None => assert!(w.grad().is_none(), "{:?}", w.grad()),
            }
            assert_bits_eq(&x.grad().unwrap(), &xe.grad().unwrap());
        }
    }
    Ok(())
}

/// A bool flag argument picks the branch; each branch reads its own input.
fn flagged_eager(flag: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    cond(flag, || a.exp()?.sum(), || b.mul(b)?.sum())
}

#[graph_fn]
fn flagged(flag: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    flagged_eager(flag, a, b)
}

#[test]
fn an_input_only_the_untaken_branch_reads_gets_no_gradient_as_eagerly() -> Result<()> {
    for taken in [true, false] {
        let flag = Tensor::scalar(taken);
        let (a, b) = (leaf(&[0.5, -1.0]), leaf(&[2.0, 3.0]));
        let (ae, be) = (twin(&a), twin(&b));
        flagged(&flag, &a, &b)?.backward()?;
        flagged_eager(&flag, &ae, &be)?.backward()?;
        let (read, unread, read_eager) = if taken { (&a, &b, &ae) } else { (&b, &a, &be) };
        assert_bits_eq(&read.grad().unwrap(), &read_eager.grad().unwrap());
        assert!(unread.grad().is_none(), "{:?}", unread.grad());
    }
    // d/da sum(exp(a)) = exp(a); d/db sum(b^2) = 2b.
    let (a, b) = (leaf(&[0.0, 1.0]), leaf(&[2.0, 3.0]));
    flagged(&Tensor::scalar(false), &a, &b)?.backward()?;
    assert_eq!(b.grad().unwrap().to_vec::<f32>()?, vec![4.0, 6.0]);
    flagged(&Tensor::scalar(true), &a, &b)?.backward()?;
    assert_eq!(a.grad().unwrap().to_vec::<f32>()?, vec![1.0, 1.0f32.exp()]);
    Ok(())
}

#[test]
fn a_flag_changed_in_place_after_the_call_leaves_its_backward_as_it_was() -> Result<()> {
    // Eagerly the flag is read once, to pick the branch; the call's backward reads the flag
    // as the call did, not the slot, so changing it is no version error.
    let flag = Tensor::scalar(true);
    let (a, b) = (leaf(&[0.5, -1.0]), leaf(&[2.0, 3.0]));
    let (ae, be) = (twin(&a), twin(&b));
    let y = flagged(&flag, &a, &b)?;
    let ye = flagged_eager(&flag, &ae, &be)?;
    flag.assign_(&Tensor::scalar(false))?;
    y.backward()?;
    ye.backward()?;
    assert_bits_eq(&a.grad().unwrap(), &ae.grad().unwrap());
    assert!(b.grad().is_none() && be.grad().is_none());
    // An input a formula saved is still checked, as eagerly: `mul` saved `b`.
    let (y, ye) = (flagged(&flag, &a, &b)?, flagged_eager(&flag, &ae, &be)?);
    for t in [&b, &be] {
        tensor_core::no_grad(|| t.assign_(&Tensor::ones(&[2], DType::F32)))?;
    }
    assert!(matches!(y.backward(), Err(Error::SavedTensorModified { .. })), "a saved input changed in place");
    assert!(matches!(ye.backward(), Err(Error::SavedTensorModified { .. })));
    Ok(())
}

/// A loop that runs `n` times: eagerly a body that never runs reads nothing.
fn powered_eager(n: &Tensor, x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (_, h) = while_loop(|(i, _): &(Tensor, Tensor)| i.lt(n), |(i, h)| Ok((&i + 1i64, h.mul(w)?)), (Tensor::scalar(0i64), x.clone()))?;
    h.sum()
}

#[graph_fn]
fn powered(n: &Tensor, x: &Tensor, w: &Tensor) -> Result<Tensor> {
    powered_eager(n, x, w)
}

#[test]
fn an_input_only_a_loop_body_reads_gets_no_gradient_when_the_body_never_runs() -> Result<()> {
    for n in [0i64, 2] {
        let (x, w) = (leaf(&[0.5, -1.5]), leaf(&[3.0, 0.25]));
        let (xe, we) = (twin(&x), twin(&w));
        powered(&Tensor::scalar(n), &x, &w)?.backward()?;
        powered_eager(&Tensor::scalar(n), &xe, &we)?.backward()?;
        assert_bits_eq(&x.grad().unwrap(), &xe.grad().unwrap());
        match we.grad() {
            // n = 2: d/dw sum(x w^2) = 2 x w.
            Some(g) => {
                assert_bits_eq(&w.grad().unwrap(), &g);
                assert_eq!(g.to_vec::<f32>()?, vec![3.0, -0.75]);
            }
            None => assert!(n == 0 && w.grad().is_none(), "{:?}", w.grad()),
        }
    }
    Ok(())
}
