//! Grad mode is part of a call's key: a call made in the other mode traces again (reason
//! `grad mode: enabled -> disabled`), so each mode runs the graph its own trace made and a
//! call does what the eager body does in that mode — a training step under `no_grad` is the
//! eager `Err`, an in-place update of a parameter with grad on is `InPlaceOnLeaf`, and a body
//! that reads `is_grad_enabled()` keeps one trace per mode.

use std::sync::atomic::{AtomicUsize, Ordering};
use tensor_core::function::{lookup, GraphFunction};
use tensor_core::prelude::*;

fn function(name: &str) -> &'static GraphFunction {
    lookup(name).unwrap_or_else(|| panic!("`{name}` is registered once called"))
}

fn param(values: &[f32]) -> Tensor {
    Tensor::from_vec(values.to_vec(), &[values.len()]).unwrap().requires_grad_(true).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn grad_of(t: &Tensor) -> Option<Vec<f32>> {
    t.grad().map(|g| values(&g))
}

// ------------------------------------------------------------------ a training step

fn train_step_eager(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let loss = x.mul(w)?.tanh()?.sum()?;
    loss.backward()?;
    Ok(loss)
}

#[graph_fn]
fn grad_mode_train_step(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    train_step_eager(w, x)
}

/// Traced with grad on, then called under `no_grad`: the call traces again and fails as the
/// eager body does, accumulating nothing; with grad on again the first trace serves.
#[test]
fn a_training_step_traced_with_grad_on_fails_under_no_grad_as_eager() -> Result<()> {
    let (w, w_eager) = (param(&[0.5, -1.0, 2.0]), param(&[0.5, -1.0, 2.0]));
    let x = Tensor::from_vec(vec![1.0f32, 0.5, -0.25], &[3])?;
    let loss = grad_mode_train_step(&w, &x)?;
    assert_eq!(values(&loss), values(&train_step_eager(&w_eager, &x)?));
    let once = grad_of(&w).unwrap();
    assert_eq!(Some(once.clone()), grad_of(&w_eager));

    let graph = no_grad(|| grad_mode_train_step(&w, &x)).unwrap_err();
    let eager = no_grad(|| train_step_eager(&w_eager, &x)).unwrap_err();
    assert!(matches!(graph, Error::NoGradFn { .. }), "{graph:?}");
    assert_eq!(graph.to_string(), eager.to_string());
    assert_eq!(grad_of(&w), grad_of(&w_eager), "no call accumulated anything");

    grad_mode_train_step(&w, &x)?;
    train_step_eager(&w_eager, &x)?;
    assert_eq!(grad_of(&w), grad_of(&w_eager));
    assert_eq!(grad_of(&w), Some(once.iter().map(|g| 2.0 * g).collect()), "two steps accumulated, the no_grad call none");
    let f = function("grad_mode_train_step");
    assert_eq!(f.trace_count(), 1, "the trace under no_grad failed, so it is not counted, and grad on hits the cache");
    Ok(())
}

/// The other order: the step under `no_grad` first (the eager `Err`, nothing cached), then with
/// grad on it traces and gradients flow as eagerly.
#[graph_fn]
fn grad_mode_train_step_later(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    train_step_eager(w, x)
}

#[test]
fn a_training_step_called_under_no_grad_first_then_with_grad_runs_as_eager() -> Result<()> {
    let (w, w_eager) = (param(&[1.5, 0.25]), param(&[1.5, 0.25]));
    let x = Tensor::from_vec(vec![-0.5f32, 2.0], &[2])?;
    let graph = no_grad(|| grad_mode_train_step_later(&w, &x)).unwrap_err();
    assert_eq!(graph.to_string(), no_grad(|| train_step_eager(&w_eager, &x)).unwrap_err().to_string());
    assert_eq!(grad_of(&w), None);
    for _ in 0..2 {
        let loss = grad_mode_train_step_later(&w, &x)?;
        assert_eq!(values(&loss), values(&train_step_eager(&w_eager, &x)?));
        assert_eq!(grad_of(&w), grad_of(&w_eager));
    }
    assert!(grad_of(&w).is_some());
    let f = function("grad_mode_train_step_later");
    assert_eq!(f.retrace_reasons(), ["first call"]);
    Ok(())
}

// ------------------------------------------------- what only one mode allows, both orders

fn nudge_eager(w: &Tensor) -> Result<Tensor> {
    w.sub_(0.5)?;
    w.mul(2.0)
}

#[graph_fn]
fn grad_mode_nudge(w: &Tensor) -> Result<Tensor> {
    nudge_eager(w)
}

/// An in-place update of a parameter is fine under `no_grad` and `InPlaceOnLeaf` with grad
/// on, eagerly. Traced under `no_grad` first, a call with grad on traces again and gets the
/// error (replaying the no_grad graph would have updated the parameter), and the reverse.
#[test]
fn an_update_of_a_parameter_runs_under_no_grad_only_in_either_order() -> Result<()> {
    let (w, w_eager) = (param(&[1.0, 2.0]), param(&[1.0, 2.0]));
    let y = no_grad(|| grad_mode_nudge(&w))?;
    assert_eq!(values(&y), values(&no_grad(|| nudge_eager(&w_eager))?));
    assert_eq!(values(&w.detach()), [0.5, 1.5]);
    assert!(!y.requires_grad());

    let graph = grad_mode_nudge(&w).unwrap_err();
    let eager = nudge_eager(&w_eager).unwrap_err();
    assert!(matches!(graph, Error::InPlaceOnLeaf { .. }), "{graph:?}");
    assert_eq!(graph.to_string(), eager.to_string());
    assert_eq!(values(&w.detach()), [0.5, 1.5], "the failed call changed nothing");

    assert_eq!(values(&no_grad(|| grad_mode_nudge(&w))?), [0.0, 2.0]);
    assert_eq!(values(&w.detach()), values(&w_eager.detach()).iter().map(|v| v - 0.5).collect::<Vec<_>>());
    assert_eq!(function("grad_mode_nudge").trace_count(), 1, "only the no_grad trace finished");
    Ok(())
}

// ---------------------------------------------------------- a body reading the grad mode

static BRANCH_TRACES: AtomicUsize = AtomicUsize::new(0);

fn branch_eager(x: &Tensor) -> Result<Tensor> {
    let factor = if tensor_core::is_grad_enabled() { 2.0 } else { 3.0 };
    x.mul(factor)
}

#[graph_fn]
fn grad_mode_branch(x: &Tensor) -> Result<Tensor> {
    BRANCH_TRACES.fetch_add(1, Ordering::SeqCst);
    branch_eager(x)
}

/// Six calls alternating between the modes: two traces, one per mode, and every result is
/// the eager one of its mode.
#[test]
fn a_body_reading_the_grad_mode_traces_once_per_mode() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, -2.0, 0.5], &[3])?;
    for k in 0..6 {
        let on = k % 2 == 0;
        let (graph, eager) = match on {
            true => (grad_mode_branch(&x)?, branch_eager(&x)?),
            false => no_grad(|| Ok::<_, Error>((grad_mode_branch(&x)?, branch_eager(&x)?)))?,
        };
        assert_eq!(values(&graph), values(&eager), "call {k}, grad mode {on}");
        assert_eq!(values(&graph), values(&x.mul(if on { 2.0 } else { 3.0 })?));
    }
    assert_eq!(BRANCH_TRACES.load(Ordering::SeqCst), 2);
    let f = function("grad_mode_branch");
    assert_eq!(f.trace_count(), 2);
    assert_eq!(f.retrace_reasons(), ["first call", "grad mode: enabled -> disabled"]);
    assert_eq!(f.cached_signatures(), ["x: f32[3]", "x: f32[3] (grad mode disabled)"]);
    Ok(())
}

static THREAD_TRACES: AtomicUsize = AtomicUsize::new(0);

#[graph_fn]
fn grad_mode_per_thread(x: &Tensor) -> Result<Tensor> {
    THREAD_TRACES.fetch_add(1, Ordering::SeqCst);
    branch_eager(x)
}

/// Grad mode is per thread: two threads calling at once, one under `no_grad`, each get their
/// mode's graph — two traces in all.
#[test]
fn each_thread_keys_its_own_grad_mode() {
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for on in [true, false] {
            let barrier = &barrier;
            s.spawn(move || {
                let _off = (!on).then(NoGradGuard::new);
                barrier.wait();
                for i in 0..200 {
                    let x = Tensor::from_vec(vec![i as f32, 1.0], &[2]).unwrap();
                    let factor = if on { 2.0 } else { 3.0 };
                    assert_eq!(values(&grad_mode_per_thread(&x).unwrap()), [i as f32 * factor, factor]);
                }
            });
        }
    });
    assert_eq!(THREAD_TRACES.load(Ordering::SeqCst), 2);
    assert_eq!(function("grad_mode_per_thread").trace_count(), 2);
}

// ------------------------------------------------------------------- reduce_retracing

#[graph_fn(reduce_retracing)]
fn grad_mode_relaxed(x: &Tensor) -> Result<Tensor> {
    branch_eager(x)
}

/// A relaxed trace serves the grad mode it was traced in only: the other mode traces its own
/// shapes, then relaxes against its own earlier trace.
#[test]
fn a_relaxed_trace_serves_its_own_grad_mode() -> Result<()> {
    let x = |n: usize| Tensor::ones(&[n], DType::F32);
    grad_mode_relaxed(&x(2))?;
    grad_mode_relaxed(&x(3))?;
    assert_eq!(values(&no_grad(|| grad_mode_relaxed(&x(4)))?), [3.0; 4]);
    assert_eq!(values(&no_grad(|| grad_mode_relaxed(&x(5)))?), [3.0; 5]);
    assert_eq!(values(&grad_mode_relaxed(&x(6))?), [2.0; 6], "the first relaxed trace");
    assert_eq!(values(&no_grad(|| grad_mode_relaxed(&x(7)))?), [3.0; 7], "the second one");
    let f = function("grad_mode_relaxed");
    assert_eq!(f.cached_signatures(), ["x: f32[2]", "x: f32[?]", "x: f32[4] (grad mode disabled)", "x: f32[?] (grad mode disabled)"]);
    assert_eq!(
        f.retrace_reasons(),
        ["first call", "arg x: shape [2] -> [3]", "arg x: shape [3] -> [4]; grad mode: enabled -> disabled", "arg x: shape [4] -> [5]"]
    );
    Ok(())
}
