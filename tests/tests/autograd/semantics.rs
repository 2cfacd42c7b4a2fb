//! Autograd with PyTorch's semantics: leaves and `.grad`, `grad_fn` and `next_functions`,
//! `retain_grad`, errors, accumulation, `detach` / `no_grad`, the in-place rules (version
//! counters), memory (released graphs, no reference cycles) and the functional `grad`.

use std::sync::Barrier;
use tensor_core::prelude::*;
use tensor_core::{grad, is_grad_enabled, BackwardOptions, GradFn, NextFunction};
use tests::assert_values;

fn leaf(v: f64) -> Tensor {
    Tensor::scalar(v).requires_grad_(true).unwrap()
}

fn leaf_vec(v: &[f64], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), dims).unwrap().requires_grad_(true).unwrap()
}

fn value(t: &Tensor) -> f64 {
    t.item::<f64>().unwrap()
}

fn grad_of(t: &Tensor) -> f64 {
    value(&t.grad().expect("a gradient"))
}

const RETAIN: BackwardOptions = BackwardOptions { retain_graph: Some(true), create_graph: false };

// ------------------------------------------------------------------------------ the seed example

#[test]
fn seed_example_gradients_and_leaves() {
    let (w, x) = (leaf(1.0), leaf(2.0));
    let a = &w + &x;
    let b = &w + 1.0;
    let y = &a * &b;
    assert_eq!(value(&y), 6.0);
    y.backward().unwrap();
    assert_eq!(grad_of(&w), 5.0);
    assert_eq!(grad_of(&x), 2.0);
    assert!(w.is_leaf() && x.is_leaf());
    assert!(!a.is_leaf() && !b.is_leaf() && !y.is_leaf());
    assert!(a.requires_grad() && b.requires_grad() && y.requires_grad());
    // Non-leaves keep no gradient unless they ask.
    assert!(a.grad().is_none() && b.grad().is_none() && y.grad().is_none());
}

#[test]
fn seed_example_with_retain_grad() {
    let (w, x) = (leaf(1.0), leaf(2.0));
    let a = &w + &x;
    a.retain_grad().unwrap();
    let b = &w + 1.0;
    let y = &a * &b;
    y.backward().unwrap();
    assert_eq!(grad_of(&a), 2.0); // dy/da = b
    assert!(b.grad().is_none());
    assert_eq!((grad_of(&w), grad_of(&x)), (5.0, 2.0));
    // retain_grad on a leaf is a no-op; on a tensor that needs no grad it is an error.
    w.retain_grad().unwrap();
    assert!(Tensor::scalar(1.0f64).retain_grad().is_err());
}

#[test]
fn seed_example_grad_fn_and_next_functions() {
    let (w, x) = (leaf(1.0), leaf(2.0));
    let a = &w + &x;
    let b = &w + 1.0;
    let y = &a * &b;
    let f = y.grad_fn().unwrap();
    assert_eq!(f.name(), "MulBackward");
    assert_eq!(f.to_string(), "<MulBackward>");
    assert_eq!(a.grad_fn().unwrap().name(), "AddBackward");
    assert_eq!(b.grad_fn().unwrap().name(), "AddBackward");
    assert!(w.grad_fn().is_none() && x.grad_fn().is_none());

    let next = f.next_functions();
    assert_eq!(next.iter().map(NextFunction::name).collect::<Vec<_>>(), ["AddBackward", "AddBackward"]);
    let NextFunction::Node(fa) = &next[0] else { panic!("a node") };
    assert!(fa.same_as(&a.grad_fn().unwrap()));
    assert_eq!(fa.next_functions().iter().map(NextFunction::name).collect::<Vec<_>>(), ["AccumulateGrad", "AccumulateGrad"]);

    // Walking the whole graph from y reaches AccumulateGrad for w and for x, and nothing else.
    let mut leaves: Vec<Tensor> = Vec::new();
    let mut stack: Vec<GradFn> = vec![f];
    while let Some(node) = stack.pop() {
        for n in node.next_functions() {
            match n {
                NextFunction::Node(g) => stack.push(g),
                NextFunction::AccumulateGrad(t) => leaves.push(t),
                NextFunction::None => {}
            }
        }
    }
    assert_eq!(leaves.len(), 3); // w through a and b, x through a
    assert!(leaves.iter().any(|t| t.same_as(&w)) && leaves.iter().any(|t| t.same_as(&x)));
    assert!(leaves.iter().all(|t| t.same_as(&w) || t.same_as(&x)));

    // An input that needs no gradient is a `None` entry.
    let c = Tensor::scalar(3.0f64);
    let z = &w * &c;
    assert_eq!(z.grad_fn().unwrap().next_functions().iter().map(NextFunction::name).collect::<Vec<_>>(), ["AccumulateGrad", "None"]);
}

#[test]
fn grad_fn_names() {
    let x = leaf_vec(&[0.5, 1.5, 2.5, 3.5], &[2, 2]);
    let name = |t: Tensor| t.grad_fn().unwrap().name();
    assert_eq!(name(&x - 1.0), "SubBackward");
    assert_eq!(name(&x / 2.0), "DivBackward");
    assert_eq!(name(-&x), "NegBackward");
    assert_eq!(name(x.exp().unwrap()), "ExpBackward");
    assert_eq!(name(x.log().unwrap()), "LogBackward");
    assert_eq!(name(x.tanh().unwrap()), "TanhBackward");
    assert_eq!(name(x.relu().unwrap()), "ReluBackward");
    assert_eq!(name(x.powf(2.0).unwrap()), "PowBackward");
    assert_eq!(name(x.sum().unwrap()), "SumBackward");
    assert_eq!(name(x.mean().unwrap()), "MeanBackward");
    assert_eq!(name(x.max().unwrap()), "MaxBackward");
    assert_eq!(name(x.matmul(&x).unwrap()), "MatmulBackward");
    assert_eq!(name(x.reshape([4]).unwrap()), "ReshapeBackward");
    assert_eq!(name(x.t().unwrap()), "PermuteBackward");
    assert_eq!(name(x.softmax(1).unwrap()), "SoftmaxBackward");
    assert_eq!(name(x.cast(DType::F32).unwrap()), "CastBackward");
}

// ------------------------------------------------------------------------------ errors

#[test]
fn requires_grad_needs_a_float_tensor() {
    for t in [Tensor::scalar(1i32), Tensor::scalar(1i64), Tensor::scalar(true)] {
        let err = t.requires_grad_(true).unwrap_err();
        assert!(matches!(err, Error::UnsupportedDType { op: "requires_grad_", .. }), "{err}");
        assert!(!t.requires_grad());
    }
    assert!(Tensor::scalar(1.0f32).requires_grad_(true).unwrap().requires_grad());
    // Only a leaf can stop requiring grad.
    let w = leaf(1.0);
    assert!((&w * 2.0).requires_grad_(false).is_err());
    w.requires_grad_(false).unwrap();
    assert!(!w.requires_grad());
    // Integer and bool results never require grad.
    let x = leaf_vec(&[1.0, -2.0], &[2]);
    assert!(!x.gt(0.0).unwrap().requires_grad());
    assert!(!x.argmax(0, false).unwrap().requires_grad());
    assert!(!x.cast(DType::I64).unwrap().requires_grad());
}

#[test]
fn backward_on_a_non_scalar_needs_a_gradient() {
    let x = leaf_vec(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let y = &x * &x;
    let err = y.backward().unwrap_err();
    assert_eq!(err, Error::BackwardNonScalar { shape: Shape::new(&[2, 3]) });
    assert!(x.grad().is_none(), "a failed backward changes nothing");
    // Any shape works with an explicit gradient.
    let g = Tensor::from_vec(vec![1.0, 0.0, -1.0, 2.0, 0.5, 1.0], &[2, 3]).unwrap();
    y.backward_from(&g).unwrap();
    assert_values(&x.grad().unwrap(), &[2.0, 0.0, -6.0, 16.0, 5.0, 12.0]);
    // One element in any rank is a scalar.
    let s = x.sum_axes(&[0, 1], true).unwrap();
    assert_eq!(s.dims(), vec![1, 1]);
    x.zero_grad().unwrap();
    s.backward().unwrap();
    assert_values(&x.grad().unwrap(), &[1.0; 6]);
}

#[test]
fn backward_from_checks_the_gradient() {
    let x = leaf_vec(&[1.0, 2.0, 3.0], &[3]);
    let y = x.exp().unwrap();
    let err = y.backward_from(&Tensor::ones(&[2], DType::F64)).unwrap_err();
    assert!(matches!(err, Error::GradientShape { .. }), "{err}");
    let err = y.backward_from(&Tensor::ones(&[3], DType::F32)).unwrap_err();
    assert!(matches!(err, Error::GradientShape { .. }), "{err}");
    let err = y.backward_from(&Tensor::ones(&[1, 3], DType::F64)).unwrap_err();
    assert!(matches!(err, Error::GradientShape { .. }), "{err}");
    assert!(x.grad().is_none());
    // The graph is still intact after the rejected calls.
    y.backward_from(&Tensor::ones(&[3], DType::F64)).unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), y.to_vec::<f64>().unwrap());
}

#[test]
fn backward_on_a_tensor_that_needs_no_grad() {
    let t = Tensor::scalar(1.0f64);
    assert_eq!(t.backward().unwrap_err(), Error::NoGradFn { op: "backward" });
    let u = (&t * 2.0).exp().unwrap();
    assert_eq!(u.backward().unwrap_err(), Error::NoGradFn { op: "backward" });
    // A leaf that requires grad is its own root: its gradient is 1.
    let w = leaf(3.0);
    w.backward().unwrap();
    assert_eq!(grad_of(&w), 1.0);
}

// ------------------------------------------------------------------------------ accumulation and recording

#[test]
fn grads_accumulate_until_zeroed() {
    let (w, x) = (leaf(1.0), leaf(2.0));
    let step = || ((&w + &x) * (&w + 1.0)).backward().unwrap();
    step();
    step();
    assert_eq!((grad_of(&w), grad_of(&x)), (10.0, 4.0));
    w.zero_grad().unwrap();
    assert!(w.grad().is_none());
    assert_eq!(grad_of(&x), 4.0);
    step();
    assert_eq!((grad_of(&w), grad_of(&x)), (5.0, 6.0));
    // Contributions through several paths add up within one backward too.
    let z = leaf(3.0);
    (&z * &z + &z * 2.0 + z.exp().unwrap()).backward().unwrap();
    assert!((grad_of(&z) - (6.0 + 2.0 + 3f64.exp())).abs() < 1e-12);
}

#[test]
fn detach_stops_recording() {
    let w = leaf(2.0);
    let y = &w * 3.0;
    let d = y.detach();
    assert!(!d.requires_grad() && d.is_leaf() && d.grad_fn().is_none());
    assert_eq!(value(&d), 6.0);
    // Gradient flows through y but not through its detached copy.
    let z = &y * &d;
    z.backward().unwrap();
    assert_eq!(grad_of(&w), 18.0); // d(3w * 6)/dw
    assert!(d.grad().is_none());
    // The copy is independent: an in-place op on it leaves y alone.
    d.add_(1.0).unwrap();
    assert_eq!((value(&d), value(&y)), (7.0, 6.0));
}

#[test]
fn no_grad_and_the_guard_stop_recording() {
    let w = leaf(2.0);
    let y = no_grad(|| &w * 3.0);
    assert!(!y.requires_grad() && y.is_leaf() && y.grad_fn().is_none());
    assert!(is_grad_enabled());
    {
        let _g = NoGradGuard::new();
        assert!(!is_grad_enabled());
        let z = w.exp().unwrap();
        assert!(!z.requires_grad());
        {
            let _inner = NoGradGuard::new();
        }
        assert!(!is_grad_enabled(), "an inner guard restores the outer mode, not the default");
        assert_eq!(z.backward().unwrap_err(), Error::NoGradFn { op: "backward" });
    }
    assert!(is_grad_enabled());
    assert!((&w * 3.0).requires_grad());
    // The mode is restored after a panic inside no_grad.
    let r = std::panic::catch_unwind(|| no_grad(|| panic!("inside no_grad")));
    assert!(r.is_err());
    assert!(is_grad_enabled());
}

#[test]
fn grad_mode_is_per_thread() {
    let w = leaf(2.0);
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        // Another thread turns grad off and keeps it off while this one records.
        s.spawn(|| {
            let _g = NoGradGuard::new();
            barrier.wait();
            assert!(!(&w * 2.0).requires_grad());
            barrier.wait();
        });
        barrier.wait();
        assert!(is_grad_enabled());
        assert!((&w * 2.0).requires_grad());
        barrier.wait();
    });
    // And the other way round.
    std::thread::scope(|s| {
        let _g = NoGradGuard::new();
        s.spawn(|| {
            barrier.wait();
            assert!(is_grad_enabled());
            let y = &w * 2.0;
            assert!(y.requires_grad());
            barrier.wait();
        });
        barrier.wait();
        assert!(!(&w * 2.0).requires_grad());
        barrier.wait();
    });
    assert!(is_grad_enabled());
}

// ------------------------------------------------------------------------------ in-place rules

#[test]
fn in_place_on_a_leaf_that_requires_grad_is_an_error() {
    let w = leaf_vec(&[1.0, 2.0], &[2]);
    let other = Tensor::from_vec(vec![5.0, 6.0], &[2]).unwrap();
    let attempt = |op: &str| match op {
        "add_" => w.add_(1.0),
        "sub_" => w.sub_(&other),
        "mul_" => w.mul_(&other),
        "div_" => w.div_(2.0),
        _ => w.assign_(&other),
    };
    for op in ["add_", "sub_", "mul_", "div_", "assign_"] {
        assert_eq!(attempt(op).unwrap_err(), Error::InPlaceOnLeaf { op }, "{op}");
        assert_eq!(w.to_vec::<f64>().unwrap(), vec![1.0, 2.0], "{op} changed nothing");
        assert_eq!(w.version(), 0);
        assert!(w.is_leaf() && w.requires_grad() && w.grad().is_none());
    }
    assert!(matches!(w.zero_().unwrap_err(), Error::InPlaceOnLeaf { .. }));
    // Allowed under no_grad (as optimizers do), and the tensor stays a leaf.
    no_grad(|| w.add_(1.0)).unwrap();
    {
        let _g = NoGradGuard::new();
        w.mul_(&other).unwrap();
    }
    assert_eq!(w.to_vec::<f64>().unwrap(), vec![10.0, 18.0]);
    assert_eq!(w.version(), 2);
    assert!(w.is_leaf() && w.requires_grad() && w.grad_fn().is_none());
    (&w * 2.0).sum().unwrap().backward().unwrap();
    assert_values(&w.grad().unwrap(), &[2.0, 2.0]);
}

#[test]
fn backward_through_a_saved_tensor_modified_in_place() {
    // A saved input that needs no grad.
    let x = leaf_vec(&[1.0, 2.0], &[2]);
    let c = Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap();
    let y = (&x * &c).sum().unwrap();
    c.add_(1.0).unwrap();
    let err = y.backward().unwrap_err();
    assert_eq!(err, Error::SavedTensorModified { node: "MulBackward", expected: 0, found: 1 });
    let msg = err.to_string();
    assert!(msg.contains("MulBackward") && msg.contains("version 0") && msg.contains("version 1"), "{msg}");
    assert!(x.grad().is_none(), "nothing was accumulated");

    // A saved non-leaf, modified twice.
    let a = &x * 2.0;
    let y = (&a * &a).sum().unwrap();
    a.add_(1.0).unwrap();
    a.mul_(3.0).unwrap();
    assert_eq!(y.backward().unwrap_err(), Error::SavedTensorModified { node: "MulBackward", expected: 0, found: 2 });

    // Modified after the op saved it, though the in-place op came through another handle.
    let a = &x * 2.0;
    let alias = a.clone();
    let y = a.log().unwrap().sum().unwrap();
    alias.sub_(0.5).unwrap();
    assert!(matches!(y.backward().unwrap_err(), Error::SavedTensorModified { node: "LogBackward", .. }));

    // An op that saves nothing does not care.
    let a = &x * 2.0;
    let y = (&a + 1.0).sum().unwrap();
    a.add_(1.0).unwrap();
    y.backward().unwrap();
    assert_values(&x.grad().unwrap(), &[2.0, 2.0]);
}

#[test]
fn in_place_on_a_saved_output_errors_on_backward() {
    let x = leaf_vec(&[0.5, 1.0], &[2]);
    let y = x.exp().unwrap();
    y.add_(1.0).unwrap();
    assert_eq!(y.grad_fn().unwrap().name(), "AddBackward", "the in-place op is y's grad_fn now");
    let err = y.sum().unwrap().backward().unwrap_err();
    assert_eq!(err, Error::SavedTensorModified { node: "ExpBackward", expected: 0, found: 1 });
    // Same for the other ops that save their output.
    for f in [Tensor::tanh, Tensor::sigmoid, Tensor::sqrt] {
        let y = f(&x).unwrap();
        y.mul_(2.0).unwrap();
        assert!(matches!(y.sum().unwrap().backward().unwrap_err(), Error::SavedTensorModified { .. }));
    }
    let y = x.softmax(0).unwrap();
    y.sub_(0.1).unwrap();
    assert!(matches!(y.sum().unwrap().backward().unwrap_err(), Error::SavedTensorModified { node: "SoftmaxBackward", .. }));
}

#[test]
fn in_place_on_a_non_leaf_rebases_its_history() {
    let x = leaf_vec(&[1.0, 2.0], &[2]);
    let z = leaf_vec(&[3.0, 5.0], &[2]);
    let y = &x * 2.0;
    y.add_(&z).unwrap();
    assert_eq!(y.version(), 1);
    assert_eq!(y.grad_fn().unwrap().name(), "AddBackward");
    y.mul_(&y).unwrap(); // y = (2x + z)^2
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![25.0, 81.0]);
    y.sum().unwrap().backward().unwrap();
    assert_values(&x.grad().unwrap(), &[20.0, 36.0]); // 2 (2x + z) * 2
    assert_values(&z.grad().unwrap(), &[10.0, 18.0]);
}

// ------------------------------------------------------------------------------ memory

// That grad nodes free what they saved (the data's reference counts) is tested inside the
// crate, where the data is visible: `tensor-core/src/autograd/tests.rs`.

#[test]
fn non_leaf_grads_are_dropped_after_backward() {
    let x = leaf_vec(&[1.0, 2.0], &[2]);
    let h = x.tanh().unwrap();
    let kept = &h * 3.0;
    kept.retain_grad().unwrap();
    kept.sum().unwrap().backward().unwrap();
    assert!(h.grad().is_none());
    assert_values(&kept.grad().unwrap(), &[1.0, 1.0]);
    assert!(h.grad_fn().is_some(), "the history stays, as in PyTorch");
}

#[test]
fn a_second_backward_through_a_released_graph_is_an_error() {
    let (w, x) = (leaf(1.0), leaf(2.0));
    let y = (&w + &x) * (&w + 1.0);
    y.backward().unwrap();
    assert_eq!(y.backward().unwrap_err(), Error::GraphReleased { node: "MulBackward" });
    assert!(y.backward().unwrap_err().to_string().contains("retain_graph"));
    assert_eq!((grad_of(&w), grad_of(&x)), (5.0, 2.0), "the failed backward added nothing");

    // retain_graph keeps the saved tensors for another pass.
    let (w, x) = (leaf(1.0), leaf(2.0));
    let y = (&w + &x) * (&w + 1.0);
    y.backward_opts(None, RETAIN).unwrap();
    y.backward_opts(None, RETAIN).unwrap();
    y.backward().unwrap();
    assert_eq!((grad_of(&w), grad_of(&x)), (15.0, 6.0));
    assert!(matches!(y.backward().unwrap_err(), Error::GraphReleased { .. }));

    // A graph whose nodes save nothing can be walked again (as in PyTorch).
    let w = leaf(1.0);
    let y = (&w + 1.0) * 2.0;
    y.backward().unwrap();
    y.backward().unwrap();
    assert_eq!(grad_of(&w), 4.0);
}

#[test]
fn grad_is_a_tensor_of_its_own() {
    // The gradient passed to backward_from is not aliased by .grad: an in-place op on one
    // does not change the other.
    let x = leaf_vec(&[1.0, 2.0], &[2]);
    let g = Tensor::from_vec(vec![1.0, 3.0], &[2]).unwrap();
    x.backward_from(&g).unwrap();
    g.add_(10.0).unwrap();
    assert_values(&x.grad().unwrap(), &[1.0, 3.0]);
    // Two leaves that receive the same gradient get separate tensors, with or without
    // create_graph.
    for create_graph in [false, true] {
        let (w, x) = (leaf(1.0), leaf(2.0));
        (&w + &x).backward_opts(None, BackwardOptions { retain_graph: None, create_graph }).unwrap();
        let gw = w.grad().unwrap();
        assert!(!gw.same_as(&x.grad().unwrap()));
        no_grad(|| gw.add_(1.0)).unwrap();
        assert_eq!((grad_of(&w), grad_of(&x)), (2.0, 1.0));
    }
}

// ------------------------------------------------------------------------------ functional grad

#[test]
fn functional_grad_leaves_dot_grad_untouched() {
    let (w, x) = (leaf(1.0), leaf(2.0));
    let a = &w + &x;
    let y = &a * (&w + 1.0);
    let g = grad(&[&y], &[&w, &x], false).unwrap();
    assert_eq!((value(&g[0]), value(&g[1])), (5.0, 2.0));
    assert!(w.grad().is_none() && x.grad().is_none());
    assert!(!g[0].requires_grad(), "without create_graph the results are plain tensors");

    // A non-leaf input, and existing .grad values stay as they were.
    let (w, x) = (leaf(1.0), leaf(2.0));
    (&w * 7.0).backward().unwrap();
    let a = &w + &x;
    let y = &a * (&w + 1.0);
    let g = grad(&[&y], &[&a, &x], false).unwrap();
    assert_eq!((value(&g[0]), value(&g[1])), (2.0, 2.0));
    assert_eq!(grad_of(&w), 7.0);
    assert!(x.grad().is_none() && a.grad().is_none());

    // Several outputs: the gradient of their sum.
    let w = leaf(3.0);
    let g = grad(&[&(&w * &w), &(&w * 4.0)], &[&w], false).unwrap();
    assert_eq!(value(&g[0]), 10.0);
}

#[test]
fn functional_grad_with_create_graph_is_differentiable() {
    let x = leaf(0.5);
    let y = x.tanh().unwrap();
    let dy = grad(&[&y], &[&x], true).unwrap().remove(0);
    assert!(dy.requires_grad() && dy.grad_fn().is_some());
    let d2 = grad(&[&dy], &[&x], false).unwrap().remove(0);
    let t = 0.5f64.tanh();
    assert!((value(&dy) - (1.0 - t * t)).abs() < 1e-15);
    assert!((value(&d2) - (-2.0 * t * (1.0 - t * t))).abs() < 1e-15);
    assert!(x.grad().is_none());
}

#[test]
fn functional_grad_of_an_unused_input_is_an_error() {
    let (w, x, unused) = (leaf(1.0), leaf(2.0), leaf(3.0));
    let y = &w * &x;
    assert_eq!(grad(&[&y], &[&w, &unused], false).unwrap_err(), Error::UnusedInput { index: 1 });
    let y = &w * &x;
    let no_grad_input = Tensor::scalar(1.0f64);
    assert_eq!(grad(&[&y], &[&no_grad_input, &x], false).unwrap_err(), Error::UnusedInput { index: 0 });
    // An output that needs no grad.
    assert_eq!(grad(&[&Tensor::scalar(1.0f64)], &[&w], false).unwrap_err(), Error::NoGradFn { op: "backward" });
    // A non-scalar output.
    let v = leaf_vec(&[1.0, 2.0], &[2]);
    assert!(matches!(grad(&[&(&v * 2.0)], &[&v], false).unwrap_err(), Error::BackwardNonScalar { .. }));
    assert!(w.grad().is_none() && x.grad().is_none() && unused.grad().is_none());
}
