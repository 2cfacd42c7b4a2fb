//! Traced graphs and external state: captures are read by reference at
//! each call, in-place updates and `.grad`s written inside the graph land on the caller's
//! tensors (arguments and captures alike), a whole training step traced once matches the
//! eager steps bit for bit; and the trace context itself: symbolic values that cannot be read
//! as Rust values, parameters that may not be created inside a trace, panics and errors that
//! leave nothing behind, traces on several threads at once, symbolic printing, leaked tracers.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Barrier;
use tensor_core::function::ConcreteFunction;
use tensor_core::graph::validate;
use tensor_core::optim::{Adam, Optimizer, Sgd, SgdConfig};
use tensor_core::prelude::*;
use tests::{assert_bits_eq, assert_values};

/// Traces `body` and checks that the traced graph (and the one that runs) is valid.
fn trace(name: &str, args: &[(&str, &Tensor)], body: impl FnOnce() -> Result<Vec<Tensor>>) -> Result<ConcreteFunction> {
    let f = ConcreteFunction::trace(name, args, body)?;
    assert_eq!(validate(f.traced_graph()), Ok(()), "{name}: invalid traced graph:\n{}", f.traced_graph());
    assert_eq!(validate(f.graph()), Ok(()), "{name}: invalid graph to run:\n{}", f.graph());
    Ok(f)
}

fn f32s(v: &[f32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), dims).expect("data fills its shape")
}

fn grad_of(t: &Tensor) -> f32 {
    t.grad().expect("a grad was written").item::<f32>().expect("a one-element grad")
}

// ------------------------------------------------------------------------------ seed example

#[test]
fn seed_example_traced_grads_accumulate_like_eager() -> Result<()> {
    let w = Tensor::scalar(1.0f32).requires_grad_(true)?; // captured
    let x = Tensor::scalar(2.0f32).requires_grad_(true)?; // the argument
    let f = trace("seed", &[("x", &x)], || {
        let y = (&w + &x) * (&w + 1.0);
        y.backward()?;
        Ok(vec![y])
    })?;
    assert!(w.grad().is_none() && x.grad().is_none(), "tracing must not write real grads");
    assert_eq!(f.captures().len(), 1);
    assert!(f.captures()[0].same_as(&w));

    let y = f.call(&[&x])?;
    assert_eq!(y[0].item::<f32>()?, 6.0);
    assert_eq!((grad_of(&w), grad_of(&x)), (5.0, 2.0));
    f.call(&[&x])?;
    assert_eq!((grad_of(&w), grad_of(&x)), (10.0, 4.0), "grads accumulate as they do eagerly");

    // The same code eagerly, twice, leaves the same grads.
    let (we, xe) = (Tensor::scalar(1.0f32).requires_grad_(true)?, Tensor::scalar(2.0f32).requires_grad_(true)?);
    for _ in 0..2 {
        ((&we + &xe) * (&we + 1.0)).backward()?;
    }
    assert_bits_eq(&we.grad().unwrap(), &w.grad().unwrap());
    assert_bits_eq(&xe.grad().unwrap(), &x.grad().unwrap());

    // Another argument tensor gets its own grad; the capture keeps accumulating.
    let x2 = Tensor::scalar(3.0f32).requires_grad_(true)?;
    let y = f.call(&[&x2])?;
    assert_eq!(y[0].item::<f32>()?, 8.0);
    assert_eq!(grad_of(&x2), 2.0);
    assert_eq!(grad_of(&x), 4.0);
    assert_eq!(grad_of(&w), 16.0); // 10 + (2w + x + 1) = 10 + 6
    Ok(())
}

// ------------------------------------------------------------------------------ training

/// The parameters of a 2-layer MLP (4 -> 8 -> 3), the same values on every call.
fn mlp_params(dtype: DType) -> Result<Vec<Tensor>> {
    let dims: [&[usize]; 4] = [&[4, 8], &[8], &[8, 3], &[3]];
    dims.iter().enumerate().map(|(i, d)| Tensor::randn(d, dtype, 10 + i as u64).mul(0.5)?.requires_grad_(true)).collect()
}

fn mlp_loss(p: &[Tensor], x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    let h = x.matmul(&p[0])?.add(&p[1])?.relu()?;
    h.matmul(&p[2])?.add(&p[3])?.cross_entropy(labels)
}

/// One training step: zero the grads, forward, loss, backward, update.
fn train_step(p: &[Tensor], opt: &dyn Optimizer, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
    opt.zero_grad()?;
    let loss = mlp_loss(p, x, labels)?;
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

fn training_data(dtype: DType) -> Result<(Tensor, Tensor)> {
    let x = Tensor::randn(&[6, 4], dtype, 3);
    let labels = Tensor::from_vec(vec![0i64, 1, 2, 2, 1, 0], &[6])?;
    Ok((x, labels))
}

type MakeOptimizer = fn(Vec<Tensor>) -> Result<Box<dyn Optimizer>>;

/// A training step traced once and called 20 times leaves the parameters (and grads) that
/// 20 eager steps from the same initial values leave, bit for bit, with the same losses.
fn traced_training_matches_eager(dtype: DType, make_opt: MakeOptimizer, state_tensors: usize, hyperparameters: usize) -> Result<()> {
    let (x, labels) = training_data(dtype)?;
    let eager = mlp_params(dtype)?;
    let graph = mlp_params(dtype)?;
    let (eager_opt, graph_opt) = (make_opt(eager.clone())?, make_opt(graph.clone())?);
    let f = trace("train_step", &[("x", &x), ("labels", &labels)], || Ok(vec![train_step(&graph, graph_opt.as_ref(), &x, &labels)?]))?;
    // The parameters and the optimizer's state tensors are captured (the step writes them
    // back), and so are the hyperparameters the step reads (0-d tensors: a new rate does not
    // retrace).
    assert_eq!(f.captures().len(), 4 + state_tensors + hyperparameters);
    for (e, g) in eager.iter().zip(&graph) {
        assert_bits_eq(e, g);
        assert!(g.grad().is_none(), "tracing must not write real grads");
    }
    let mut losses = Vec::new();
    for step in 0..20 {
        let e = train_step(&eager, eager_opt.as_ref(), &x, &labels)?;
        let g = f.call(&[&x, &labels])?.remove(0);
        assert_bits_eq(&e, &g);
        losses.push(g.cast(DType::F64)?.item::<f64>()?);
        for (i, (pe, pg)) in eager.iter().zip(&graph).enumerate() {
            assert_bits_eq(pe, pg);
            assert_bits_eq(&pe.grad().unwrap(), &pg.grad().unwrap());
            assert!(pg.requires_grad() && pg.is_leaf(), "step {step}: parameter {i} must stay a leaf");
        }
    }
    assert!(losses[19] < losses[0] * 0.8, "{dtype}: training lowers the loss: {losses:?}");
    Ok(())
}

#[test]
fn traced_sgd_training_step_matches_eager_steps_bit_for_bit() -> Result<()> {
    let momentum: MakeOptimizer = |p| Ok(Box::new(Sgd::with_config(p, SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 0.01 })?));
    let plain: MakeOptimizer = |p| Ok(Box::new(Sgd::new(p, 0.2)?));
    for dtype in [DType::F32, DType::F64] {
        // + a momentum buffer each; lr, momentum and weight decay
        traced_training_matches_eager(dtype, momentum, 4, 3)?;
        // only lr: a momentum and weight decay of 0 have no term in the step
        traced_training_matches_eager(dtype, plain, 0, 1)?;
    }
    Ok(())
}

#[test]
fn traced_adam_training_step_matches_eager_steps_bit_for_bit() -> Result<()> {
    let adam: MakeOptimizer = |p| Ok(Box::new(Adam::new(p, 0.05)?));
    for dtype in [DType::F32, DType::F64] {
        // + step count, first and second moments for each parameter; lr and both betas
        traced_training_matches_eager(dtype, adam, 12, 3)?;
    }
    Ok(())
}

#[test]
fn traced_manual_update_under_no_grad_matches_eager() -> Result<()> {
    let (x, labels) = training_data(DType::F64)?;
    let eager = mlp_params(DType::F64)?;
    let graph = mlp_params(DType::F64)?;
    let step = |p: &[Tensor]| -> Result<Tensor> {
        for t in p {
            t.zero_grad()?;
        }
        let loss = mlp_loss(p, &x, &labels)?;
        loss.backward()?;
        no_grad(|| p.iter().try_for_each(|t| t.sub_(&t.grad().expect("backward set it").mul(0.05)?)))?;
        Ok(loss)
    };
    let f = trace("manual_step", &[], || Ok(vec![step(&graph)?]))?;
    assert!(f.traced_graph().writes.len() >= 8, "parameter data and grads are written back:\n{}", f.traced_graph());
    for _ in 0..20 {
        let e = step(&eager)?;
        let g = f.call(&[])?;
        assert_bits_eq(&e, &g[0]);
    }
    for (pe, pg) in eager.iter().zip(&graph) {
        assert_bits_eq(pe, pg);
        assert_bits_eq(&pe.grad().unwrap(), &pg.grad().unwrap());
    }
    Ok(())
}

// ------------------------------------------------------------------------------ captures by reference

#[test]
fn a_graph_reads_the_current_value_of_a_capture() -> Result<()> {
    let c = f32s(&[1.0, 2.0, 3.0], &[3]);
    let x = f32s(&[1.0, 1.0, 1.0], &[3]);
    let f = trace("read_capture", &[("x", &x)], || Ok(vec![&x * &c]))?;
    let ones = f32s(&[1.0, 1.0, 1.0], &[3]);
    assert_values(&f.call(&[&ones])?[0], &[1.0, 2.0, 3.0]);
    c.add_(10.0)?;
    assert_values(&f.call(&[&ones])?[0], &[11.0, 12.0, 13.0]);
    c.assign_(&f32s(&[-1.0, 0.0, 1.0], &[3]))?;
    assert_values(&f.call(&[&f32s(&[2.0, 2.0, 2.0], &[3])])?[0], &[-2.0, 0.0, 2.0]);
    // A clone is a handle to the same tensor: updating it is updating the capture.
    let alias = c.clone();
    alias.mul_(3.0)?;
    assert_values(&f.call(&[&ones])?[0], &[-3.0, 0.0, 3.0]);
    Ok(())
}

#[test]
fn a_graph_reads_the_current_value_of_a_parameter_capture() -> Result<()> {
    let w = f32s(&[1.0, 2.0], &[2]).requires_grad_(true)?;
    let x = f32s(&[0.0, 0.0], &[2]);
    let f = trace("read_param", &[("x", &x)], || {
        let y = (&x + &w).sum()?;
        y.backward()?;
        Ok(vec![y])
    })?;
    let x1 = f32s(&[1.0, 1.0], &[2]);
    assert_eq!(f.call(&[&x1])?[0].item::<f32>()?, 5.0);
    assert!(matches!(w.add_(1.0), Err(Error::InPlaceOnLeaf { .. })), "a leaf that requires grad changes only under no_grad");
    no_grad(|| w.add_(1.0))?;
    assert_eq!(f.call(&[&x1])?[0].item::<f32>()?, 7.0);
    no_grad(|| w.assign_(&f32s(&[10.0, 20.0], &[2])))?;
    assert_eq!(f.call(&[&x1])?[0].item::<f32>()?, 32.0);
    assert_values(&w.grad().unwrap(), &[3.0, 3.0]);
    // The graph's own update is visible to another graph that captured the same tensor.
    let bump = trace("bump", &[], || {
        no_grad(|| w.add_(100.0))?;
        Ok(vec![])
    })?;
    bump.call(&[])?;
    assert_values(&w, &[110.0, 120.0]);
    assert_eq!(f.call(&[&x1])?[0].item::<f32>()?, 232.0);
    Ok(())
}

#[test]
fn in_place_updates_of_captures_inside_a_graph_are_written_back() -> Result<()> {
    let counter = Tensor::scalar(0i64);
    let total = Tensor::zeros(&[2], DType::F32);
    let x = f32s(&[0.0, 0.0], &[2]);
    let f = trace("accumulate", &[("x", &x)], || {
        counter.add_(1)?;
        total.add_(&x)?;
        let seen = total.mul(1.0)?; // read after the update, inside the graph
        total.mul_(2.0)?;
        Ok(vec![seen])
    })?;
    assert_eq!(counter.item::<i64>()?, 0, "tracing does not run the update");
    assert_values(&total, &[0.0, 0.0]);
    for (i, v) in [1.0f32, 2.0, 3.0].into_iter().enumerate() {
        let seen = f.call(&[&f32s(&[v, -v], &[2])])?;
        assert_eq!(counter.item::<i64>()?, i as i64 + 1);
        // Eagerly: total = 2 * (total + x).
        let expect_seen = match i {
            0 => [1.0, -1.0],
            1 => [4.0, -4.0],
            _ => [11.0, -11.0],
        };
        assert_values(&seen[0], &expect_seen);
        assert_values(&total, &expect_seen.map(|s| 2.0 * s));
    }
    Ok(())
}

#[test]
fn in_place_updates_of_arguments_land_on_the_callers_tensor() -> Result<()> {
    let c = f32s(&[2.0, 3.0], &[2]);
    let x = f32s(&[1.0, 1.0], &[2]);
    let f = trace("update_arg", &[("x", &x)], || {
        x.add_(1.0)?;
        x.mul_(&c)?;
        Ok(vec![x.sum()?])
    })?;
    assert_values(&x, &[1.0, 1.0]);
    assert_eq!(x.version(), 0, "tracing does not change the argument");
    let a = f32s(&[1.0, 2.0], &[2]);
    let b = f32s(&[-1.0, 0.0], &[2]);
    let alias = a.clone();
    assert_eq!(f.call(&[&a])?[0].item::<f32>()?, 13.0);
    assert_values(&a, &[4.0, 9.0]);
    assert_values(&alias, &[4.0, 9.0]);
    assert!(a.version() > 0, "the write bumps the version");
    assert_eq!(f.call(&[&b])?[0].item::<f32>()?, 3.0);
    assert_values(&b, &[0.0, 3.0]);
    assert_eq!(f.call(&[&a])?[0].item::<f32>()?, 40.0);
    assert_values(&a, &[10.0, 30.0]);
    assert_values(&x, &[1.0, 1.0]);

    // assign_ on an argument, and a .grad written to an argument that requires grad.
    let p = f32s(&[1.0, 2.0], &[2]).requires_grad_(true)?;
    let out = f32s(&[0.0, 0.0], &[2]);
    let g = trace("assign_and_grad", &[("p", &p), ("out", &out)], || {
        let y = (&p * &p).sum()?;
        y.backward()?;
        out.assign_(&(&p * 10.0))?;
        Ok(vec![y])
    })?;
    let (p1, o1) = (f32s(&[3.0, 4.0], &[2]).requires_grad_(true)?, f32s(&[0.0, 0.0], &[2]));
    assert_eq!(g.call(&[&p1, &o1])?[0].item::<f32>()?, 25.0);
    assert_values(&p1.grad().unwrap(), &[6.0, 8.0]);
    assert_values(&o1, &[30.0, 40.0]);
    assert!(p.grad().is_none() && out.to_vec::<f32>()? == [0.0, 0.0]);
    Ok(())
}

// ------------------------------------------------------------------------------ the trace context

fn assert_symbolic_value_error(e: &Error, op: &str) {
    assert!(matches!(e, Error::SymbolicValue { .. }), "{op}: expected SymbolicValue, got {e:?}");
    let msg = e.to_string();
    for hint in ["tprint!", "`cast`", "`where_`", "`cond`/`while_loop`", "run_functions_eagerly"] {
        assert!(msg.contains(hint), "{op}: the message should mention {hint}: {msg}");
    }
    assert!(msg.starts_with(op), "the message names the op: {msg}");
}

#[test]
fn reading_a_symbolic_value_is_an_error_that_explains_why() -> Result<()> {
    let c = f32s(&[1.0, 2.0], &[2]);
    let x = f32s(&[1.0, 2.0], &[2]);
    let errors = RefCell::new(Vec::new());
    let f = trace("reads", &[("x", &x)], || {
        let y = (&x * 2.0).sum()?;
        let z = &x + &c;
        let mut errs = errors.borrow_mut();
        errs.push(("item", y.item::<f32>().unwrap_err()));
        errs.push(("to_vec", z.to_vec::<f32>().unwrap_err()));
        errs.push(("to_array", z.to_array::<f32>().unwrap_err()));
        errs.push(("item", x.sum()?.item::<f32>().unwrap_err()));
        // Arguments and captures are symbolic inside the body too.
        errs.push(("to_vec", x.to_vec::<f32>().unwrap_err()));
        errs.push(("to_vec", c.to_vec::<f32>().unwrap_err()));
        // A constant made inside the body has its value now.
        assert_eq!(Tensor::scalar(4.0f32).item::<f32>()?, 4.0);
        Ok(vec![y])
    })?;
    let errors = errors.into_inner();
    assert_eq!(errors.len(), 6);
    for (op, e) in &errors {
        assert_symbolic_value_error(e, op);
    }
    match &errors[4].1 {
        Error::SymbolicValue { name, .. } => assert_eq!(name, "x", "an argument is named by its argument name"),
        e => panic!("unexpected {e:?}"),
    }
    assert_eq!(f.call(&[&x])?[0].item::<f32>()?, 6.0, "the trace itself succeeded");
    Ok(())
}

#[test]
fn parameters_cannot_be_created_inside_a_trace() -> Result<()> {
    let x = f32s(&[1.0], &[1]);
    let r = ConcreteFunction::trace("param", &[("x", &x)], || {
        let w = Tensor::zeros(&[1], DType::F32).requires_grad_(true)?;
        Ok(vec![&x * &w])
    });
    assert!(matches!(r, Err(Error::ParameterInTrace)), "{:?}", r.err());
    let r = ConcreteFunction::trace("layer", &[("x", &x)], || {
        let layer = tensor_core::nn::Linear::new(1, 1, DType::F32, &Generator::new(0))?;
        Ok(vec![layer.weight().clone()])
    });
    assert!(matches!(r, Err(Error::ParameterInTrace)), "{:?}", r.err());
    assert!(Error::ParameterInTrace.to_string().contains("outside"));
    assert!(executing_eagerly());
    // Outside the trace the same is fine.
    assert!(Tensor::zeros(&[1], DType::F32).requires_grad_(true)?.requires_grad());
    Ok(())
}

#[test]
fn a_panic_inside_a_trace_leaves_no_trace_behind() -> Result<()> {
    let w = f32s(&[1.0, 2.0], &[2]).requires_grad_(true)?;
    let x = f32s(&[3.0, 4.0], &[2]);
    let r = catch_unwind(AssertUnwindSafe(|| {
        ConcreteFunction::trace("panics", &[("x", &x)], || {
            assert!(!executing_eagerly());
            let y = (&x * &w).sum()?;
            y.backward()?;
            x.add_(1.0)?;
            panic!("boom inside the trace");
        })
    }));
    assert!(r.is_err(), "the panic propagates");
    assert!(executing_eagerly(), "no trace is left active");
    assert!(w.grad().is_none());
    assert_values(&x, &[3.0, 4.0]);
    assert_values(&(&x * 2.0), &[6.0, 8.0]);
    assert_eq!(Tensor::scalar(1.5f32).item::<f32>()?, 1.5, "new tensors are not constants of the dead trace");

    let f = trace("after_panic", &[("x", &x)], || {
        assert!(!executing_eagerly());
        let y = (&x * &w).sum()?;
        y.backward()?;
        Ok(vec![y])
    })?;
    assert!(executing_eagerly());
    assert_eq!(f.call(&[&x])?[0].item::<f32>()?, 11.0);
    assert_values(&w.grad().unwrap(), &[3.0, 4.0]);
    assert_eq!(f.captures().len(), 1);
    assert_eq!(f.traced_graph().num_slots(), 2);
    Ok(())
}

#[test]
fn an_error_returned_by_the_body_leaves_nothing_behind() -> Result<()> {
    let w = f32s(&[1.0, 2.0], &[2]).requires_grad_(true)?;
    let x = f32s(&[3.0, 4.0], &[2]);
    let r = ConcreteFunction::trace("fails", &[("x", &x)], || {
        let y = (&x * &w).sum()?;
        y.backward()?;
        x.mul_(0.0)?;
        let bad = x.matmul(&Tensor::zeros(&[5, 5], DType::F32))?;
        Ok(vec![bad])
    });
    assert!(matches!(r, Err(Error::ShapeMismatch { op: "matmul", .. })), "{:?}", r.err());
    assert!(executing_eagerly());
    assert!(w.grad().is_none());
    assert_values(&x, &[3.0, 4.0]);
    // The body's own Err comes back unchanged, too.
    let r = ConcreteFunction::trace("own_error", &[], || Err(Error::NoGradFn { op: "mine" }));
    assert_eq!(r.err(), Some(Error::NoGradFn { op: "mine" }));
    assert!(executing_eagerly());

    let f = trace("after_error", &[("x", &x)], || Ok(vec![(&x * &w).sum()?]))?;
    assert_eq!(f.call(&[&x])?[0].item::<f32>()?, 11.0);
    assert_eq!(f.traced_graph().num_slots(), 2, "only this trace's slots");
    Ok(())
}

#[test]
fn traces_on_four_threads_at_once_do_not_interfere() -> Result<()> {
    let barrier = Barrier::new(5);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || -> Result<()> {
                    let k = i as f64 + 1.0;
                    let c = Tensor::full(&[3], k, DType::F64); // this thread's capture
                    let x = Tensor::zeros(&[3], DType::F64);
                    let f = trace(&format!("thread_{i}"), &[("x", &x)], || {
                        assert!(!executing_eagerly());
                        barrier.wait(); // every thread is inside its trace now
                        let offset = Tensor::scalar(100.0 * k); // a constant
                        let y = (&x * &c + &offset).sum()?;
                        tprint!("thread {} traced", i);
                        barrier.wait();
                        assert!(!executing_eagerly());
                        Ok(vec![y])
                    })?;
                    assert!(executing_eagerly());
                    assert_eq!(f.captures().len(), 1);
                    assert!(f.captures()[0].same_as(&c));
                    assert_eq!(f.traced_graph().constants.len(), 1);
                    for v in [1.0, 2.0, 5.0] {
                        let y = f.call(&[&Tensor::full(&[3], v, DType::F64)])?[0].item::<f64>()?;
                        assert_eq!(y, 3.0 * v * k + 300.0 * k, "thread {i}");
                    }
                    Ok(())
                })
            })
            .collect();
        // The main thread is not tracing while the others are.
        barrier.wait();
        assert!(executing_eagerly());
        assert_eq!((Tensor::scalar(2.0f64) * 3.0).item::<f64>().unwrap(), 6.0);
        barrier.wait();
        for h in handles {
            h.join().expect("no thread panicked")?;
        }
        Ok(())
    })
}

#[test]
fn symbolic_tensors_print_their_name_shape_and_dtype() -> Result<()> {
    let x = Tensor::zeros(&[2, 3], DType::F32);
    let c = Tensor::ones(&[3], DType::F64);
    let printed = RefCell::new(Vec::new());
    trace("prints", &[("x", &x)], || {
        let y = x.sum_axes(&[0], false)?;
        let z = &c * 2.0;
        let mut p = printed.borrow_mut();
        p.push(x.to_string());
        p.push(format!("{x:?}"));
        p.push(y.to_string());
        p.push(z.to_string());
        p.push(c.to_string());
        p.push(format!("{:?}", x.shape()));
        Ok(vec![y])
    })?;
    let p = printed.into_inner();
    assert_eq!(p[0], "Tensor(symbolic, name=x, shape=[2, 3], dtype=f32)");
    assert_eq!(p[1], p[0]);
    assert!(p[2].starts_with("Tensor(symbolic, name=v") && p[2].ends_with(", shape=[3], dtype=f32)"), "{}", p[2]);
    assert!(p[3].starts_with("Tensor(symbolic, name=v") && p[3].ends_with(", shape=[3], dtype=f64)"), "{}", p[3]);
    assert_eq!(p[4], "Tensor(symbolic, name=capture_0, shape=[3], dtype=f64)");
    assert_eq!(p[5], "[2, 3]");
    assert_eq!(x.to_string(), Tensor::zeros(&[2, 3], DType::F32).to_string(), "concrete again after the trace");
    Ok(())
}

#[test]
fn executing_eagerly_is_false_only_inside_the_body() -> Result<()> {
    assert!(executing_eagerly());
    let inside = RefCell::new(None);
    let x = Tensor::scalar(1.0f32);
    let f = trace("mode", &[("x", &x)], || {
        *inside.borrow_mut() = Some(executing_eagerly());
        Ok(vec![&x + 1.0])
    })?;
    assert_eq!(*inside.borrow(), Some(false));
    assert!(executing_eagerly());
    f.call(&[&x])?;
    assert!(executing_eagerly(), "running a graph does not enter a trace");
    Ok(())
}

#[test]
fn a_leaked_symbolic_tensor_is_an_error_when_used_later() -> Result<()> {
    let x = f32s(&[1.0, 2.0], &[2]);
    let leaked = RefCell::new(None);
    let f = trace("leaks", &[("x", &x)], || {
        let y = x.exp()?;
        *leaked.borrow_mut() = Some(y.clone());
        Ok(vec![y])
    })?;
    let leaked = leaked.into_inner().unwrap();
    assert!(leaked.is_symbolic());
    assert!(matches!(leaked.add(1.0), Err(Error::LeakedTracer { .. })));
    assert!(matches!(leaked.item::<f32>(), Err(Error::LeakedTracer { .. })));
    assert!(matches!(leaked.to_vec::<f32>(), Err(Error::LeakedTracer { .. })));
    let e = leaked.reshape([1, 2]).unwrap_err();
    assert!(matches!(e, Error::LeakedTracer { .. }), "{e:?}");
    assert!(e.to_string().contains("return it from the function"), "{e}");
    // Inside another trace it is an error too.
    let r = ConcreteFunction::trace("uses_leak", &[("x", &x)], || Ok(vec![x.add(&leaked)?]));
    assert!(matches!(r, Err(Error::LeakedTracer { .. })), "{:?}", r.err());
    assert!(executing_eagerly());
    // The function that leaked it still works.
    assert_bits_eq(&f.call(&[&x])?[0], &x.exp()?);
    Ok(())
}

// ------------------------------------------------------------------------------ .grad as state

#[test]
fn a_grad_read_before_it_is_written_is_read_at_each_call_and_guarded() -> Result<()> {
    let w = f32s(&[2.0], &[1]).requires_grad_(true)?;
    (&w * 3.0).sum()?.backward()?; // w.grad = [3]
    let f = trace("reads_grad", &[], || {
        let g = w.grad().expect("present when traced");
        Ok(vec![&g * 2.0])
    })?;
    assert_values(&f.call(&[])?[0], &[6.0]);
    (&w * 4.0).sum()?.backward()?; // w.grad = [7]: the graph reads the current .grad
    assert_values(&f.call(&[])?[0], &[14.0]);
    w.zero_grad()?;
    let e = f.call(&[]).unwrap_err();
    assert!(matches!(e, Error::GradPresence { .. }), "{e:?}");
    assert!(e.to_string().contains("zero_grad()"), "{e}");
    assert!(w.grad().is_none(), "a failed call changes nothing");

    // Clearing first, then backward: no guard, any presence works, and grads do not pile up.
    let g = trace("zero_then_backward", &[], || {
        w.zero_grad()?;
        (&w * &w).sum()?.backward()?;
        Ok(vec![w.grad().expect("set by backward")])
    })?;
    for _ in 0..2 {
        assert_values(&g.call(&[])?[0], &[4.0]);
        assert_values(&w.grad().unwrap(), &[4.0]);
    }
    w.zero_grad()?;
    assert_values(&g.call(&[])?[0], &[4.0]);
    Ok(())
}

#[test]
fn retain_grad_and_grad_of_intermediates_inside_a_graph_match_eager() -> Result<()> {
    let run = |w: &Tensor, x: &Tensor| -> Result<Vec<Tensor>> {
        let a = w * x;
        a.retain_grad()?;
        let y = (&a * &a).sum()?;
        y.backward()?;
        Ok(vec![y, a.grad().expect("retained")])
    };
    let (we, wg) = (f32s(&[1.5, -2.0], &[2]).requires_grad_(true)?, f32s(&[1.5, -2.0], &[2]).requires_grad_(true)?);
    let x = f32s(&[3.0, 0.5], &[2]);
    let f = trace("retain", &[("x", &x)], || run(&wg, &x))?;
    for _ in 0..2 {
        let e = run(&we, &x)?;
        let g = f.call(&[&x])?;
        assert_bits_eq(&e[0], &g[0]);
        assert_bits_eq(&e[1], &g[1]);
        assert_bits_eq(&we.grad().unwrap(), &wg.grad().unwrap());
    }
    // As eagerly, y depends on w, so it requires grad; the graph ran backward() inside, so a
    // backward from outside is an error (eagerly: the released graph).
    let y = f.call(&[&x])?.remove(0);
    assert!(y.requires_grad());
    assert!(matches!(y.backward(), Err(Error::NotDifferentiable { op: "retainBackward", .. })));
    Ok(())
}

// ------------------------------------------------------------------------------ calls

#[test]
fn calls_check_arguments_and_traces_check_in_place_rules() -> Result<()> {
    let x = f32s(&[1.0, 2.0], &[2]);
    let f = trace("double", &[("x", &x)], || Ok(vec![&x * 2.0]))?;
    let wrong_shape = f.call(&[&f32s(&[1.0, 2.0, 3.0], &[3])]).unwrap_err();
    assert!(matches!(&wrong_shape, Error::SignatureMismatch { arg, .. } if arg == "x"), "{wrong_shape:?}");
    let wrong_dtype = f.call(&[&Tensor::zeros(&[2], DType::F64)]).unwrap_err();
    assert!(matches!(wrong_dtype, Error::SignatureMismatch { .. }), "{wrong_dtype:?}");
    assert!(matches!(f.call(&[]), Err(Error::ArgumentCount { expected: 1, found: 0, .. })));
    // In-place on a leaf that requires grad is an error while tracing too (outside no_grad).
    let w = f32s(&[1.0, 2.0], &[2]).requires_grad_(true)?;
    let r = ConcreteFunction::trace("bad_update", &[("w", &w)], || {
        w.add_(1.0)?;
        Ok(vec![])
    });
    assert!(matches!(r, Err(Error::InPlaceOnLeaf { op: "add_" })), "{:?}", r.err());
    assert_values(&w, &[1.0, 2.0]);
    Ok(())
}

#[test]
fn one_graph_called_from_four_threads_at_once_gives_each_its_own_results() -> Result<()> {
    let c = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3])?;
    let x = Tensor::zeros(&[3], DType::F64);
    let f = trace("shared", &[("x", &x)], || Ok(vec![(&x * &c).exp()?.sum()?, &x + 1.0]))?;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let (f, c) = (&f, &c);
                s.spawn(move || -> Result<()> {
                    for k in 0..50 {
                        let v = Tensor::full(&[3], (i * 100 + k) as f64 * 0.01, DType::F64);
                        let out = f.call(&[&v])?;
                        assert_bits_eq(&out[0], &(&v * c).exp()?.sum()?);
                        assert_bits_eq(&out[1], &(&v + 1.0));
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().expect("no thread panicked"))
    })
}

// ------------------------------------------------------------------------------ detach

#[test]
fn detach_of_a_capture_inside_a_graph_reads_its_current_value_and_is_a_new_tensor() -> Result<()> {
    let w = f32s(&[1.0, 2.0], &[2]).requires_grad_(true)?;
    (&w * 3.0).sum()?.backward()?; // w.grad = [3, 3]
    let x = f32s(&[1.0, 1.0], &[2]).requires_grad_(true)?;
    let checks = RefCell::new(Vec::new());
    let f = trace("detach", &[("x", &x)], || {
        let d = w.detach(); // the first use of w in the body
        let dx = x.detach();
        checks.borrow_mut().extend([d.grad().is_none(), !d.requires_grad(), d.is_leaf(), dx.grad().is_none(), !dx.requires_grad()]);
        d.zero_grad()?; // d's own grad, not w's
        dx.zero_grad()?;
        Ok(vec![&d * &dx])
    })?;
    assert_eq!(checks.into_inner(), [true; 5], "a detached tensor is a new leaf with no grad, inside a trace as eagerly");
    (&x * 2.0).sum()?.backward()?; // x.grad = [2, 2]
    assert_values(&f.call(&[&x])?[0], &[1.0, 2.0]);
    no_grad(|| w.add_(10.0))?;
    assert_values(&f.call(&[&x])?[0], &[11.0, 12.0]);
    assert_values(&w.grad().unwrap(), &[3.0, 3.0]);
    assert_values(&x.grad().unwrap(), &[2.0, 2.0]);
    Ok(())
}

#[test]
fn requires_grad_on_an_argument_or_capture_inside_the_body_takes_effect_in_the_graph() -> Result<()> {
    let run = |x: &Tensor, c: &Tensor| -> Result<Vec<Tensor>> {
        x.requires_grad_(true)?;
        c.requires_grad_(true)?;
        let y = (x * x * c).sum()?;
        y.backward()?;
        Ok(vec![y, x.grad().expect("x.grad"), c.grad().expect("c.grad")])
    };
    let fresh = || (f32s(&[1.0, -2.0], &[2]), f32s(&[0.5, 3.0], &[2]));
    let ((xe, ce), (xg, cg)) = (fresh(), fresh());
    let eager = run(&xe, &ce)?;
    let f = trace("watch", &[("x", &xg)], || run(&xg, &cg))?;
    let graph = f.call(&[&xg])?;
    for (e, g) in eager.iter().zip(&graph) {
        assert_bits_eq(e, g);
    }
    assert_bits_eq(&xe.grad().unwrap(), &xg.grad().unwrap());
    assert_bits_eq(&ce.grad().unwrap(), &cg.grad().unwrap());
    Ok(())
}
