//! cond and while_loop: eager and traced, the seed's counter, nesting, value-dependent trip
//! counts, gradients (against finite differences and the eager run), and every error.

use std::cell::Cell;
use std::sync::Arc;
use tensor_core::control::{cond, while_loop, while_loop_opts, WhileOptions};
use tensor_core::function::ConcreteFunction;
use tensor_core::graph::{validate, Graph, NodeKind};
use tensor_core::optim::{Optimizer, Sgd};
use tensor_core::prelude::*;
use tensor_core::shape::UNKNOWN;
use tests::{as_f64, assert_bits_eq, assert_close};

/// A body to trace: a closure giving the traced function's outputs.
type Body<'a> = Box<dyn Fn() -> Result<Vec<Tensor>> + 'a>;

fn counter(first: &Tensor, second: &Tensor) -> Result<Vec<Tensor>> {
    let (a, b) = while_loop(|(a, b): &(Tensor, Tensor)| a.lt(b), |(a, b)| Ok((&a + 2, &b + 1)), (first.clone(), second.clone()))?;
    Ok(vec![a, b])
}

#[test]
fn the_seed_counter_is_one_while_node_and_reuses_its_trace() -> Result<()> {
    let (first, second) = (Tensor::scalar(0i32), Tensor::scalar(10i32));
    let eager = counter(&first, &second)?;
    assert_eq!((eager[0].item::<i32>()?, eager[1].item::<i32>()?), (20, 20));
    let f = ConcreteFunction::trace("counter", &[("first", &first), ("second", &second)], || counter(&first, &second))?;
    assert_eq!(f.traced_graph().count_op("while"), 1, "{}", f.traced_graph().to_text());
    let out = f.call(&[&first, &second])?;
    assert_eq!((out[0].item::<i32>()?, out[1].item::<i32>()?), (20, 20));
    let out = f.call(&[&Tensor::scalar(0i32), &Tensor::scalar(3i32)])?;
    assert_eq!((out[0].item::<i32>()?, out[1].item::<i32>()?), (6, 6));
    Ok(())
}

// ------------------------------------------------------------------------------- helpers

fn f32s(v: &[f32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), dims).expect("data fills the shape")
}

fn f64s(v: &[f64], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), dims).expect("data fills the shape")
}

/// The `While` node's condition and body of a graph with one.
fn while_parts(g: &Graph) -> (&Graph, &Graph) {
    g.nodes
        .iter()
        .find_map(|n| match &n.kind {
            NodeKind::While { cond, body, .. } => Some((&**cond, &**body)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no while node in\n{}", g.to_text()))
}

/// The branches of the `Cond` node of a graph with one.
fn cond_parts(g: &Graph) -> (&Graph, &Graph) {
    g.nodes
        .iter()
        .find_map(|n| match &n.kind {
            NodeKind::Cond { then, other } => Some((&**then, &**other)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no cond node in\n{}", g.to_text()))
}

/// The error a trace of `body` fails with.
fn trace_err(args: &[(&str, &Tensor)], body: impl FnOnce() -> Result<Vec<Tensor>>) -> Error {
    match ConcreteFunction::trace("failing", args, body) {
        Ok(f) => panic!("the trace should fail, but gave\n{}", f.traced_graph().to_text()),
        Err(e) => e,
    }
}

/// After a failed trace: no trace is active on this thread and a new one works.
#[track_caller]
fn assert_clean_after_error() {
    assert!(executing_eagerly(), "a failed trace left a trace active");
    let x = Tensor::scalar(2.0f32);
    let f = ConcreteFunction::trace("again", &[("x", &x)], || {
        assert!(!executing_eagerly());
        let y = cond(&x.gt(0.0)?, || x.mul(3.0), || x.neg())?;
        Ok(vec![y])
    })
    .expect("the thread traces again");
    assert!(executing_eagerly());
    assert_eq!(f.call(&[&Tensor::scalar(5.0f32)]).expect("runs")[0].item::<f32>().expect("a scalar"), 15.0);
    assert_eq!(f.call(&[&Tensor::scalar(-5.0f32)]).expect("runs")[0].item::<f32>().expect("a scalar"), 5.0);
}

/// Central finite differences of scalar `f` at `x` (f64), one entry per element.
fn finite_diff(x: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Vec<f64>> {
    let base = x.to_vec::<f64>()?;
    let h = 1e-6;
    let mut out = Vec::with_capacity(base.len());
    for i in 0..base.len() {
        let at = |d: f64| -> Result<f64> {
            let mut v = base.clone();
            v[i] += d;
            no_grad(|| f(&Tensor::from_vec(v, x.dims().as_slice())?))?.item::<f64>()
        };
        out.push((at(h)? - at(-h)?) / (2.0 * h));
    }
    Ok(out)
}

// ------------------------------------------------------------------------------- 1. cond

/// Two branches with non-trivial float work (matmul, tanh, exp) picked by the data's sign.
fn branchy(x: &Tensor, w: &Tensor, then_runs: &Cell<u32>, else_runs: &Cell<u32>) -> Result<Tensor> {
    let p = x.sum()?.gt(0.0)?;
    cond(
        &p,
        || {
            then_runs.set(then_runs.get() + 1);
            x.matmul(w)?.tanh()?.mul(1.5)
        },
        || {
            else_runs.set(else_runs.get() + 1);
            x.exp()?.matmul(w)?.sub(0.25)
        },
    )
}

#[test]
fn cond_picks_its_branch_eagerly_and_at_run_time_in_one_node() -> Result<()> {
    let w = Tensor::randn(&[3, 4], DType::F32, 7);
    let pos = f32s(&[0.3, -0.1, 0.9, 0.25, 0.5, -0.7], &[2, 3]);
    let neg = f32s(&[-0.3, -0.1, 0.9, -0.25, -0.5, -0.7], &[2, 3]);
    let (t, e) = (Cell::new(0), Cell::new(0));

    // Eagerly only the chosen branch runs, and gives what the branch's ops give.
    let eager_pos = branchy(&pos, &w, &t, &e)?;
    assert_eq!((t.get(), e.get()), (1, 0));
    assert_bits_eq(&eager_pos, &pos.matmul(&w)?.tanh()?.mul(1.5)?);
    let eager_neg = branchy(&neg, &w, &t, &e)?;
    assert_eq!((t.get(), e.get()), (1, 1));
    assert_bits_eq(&eager_neg, &neg.exp()?.matmul(&w)?.sub(0.25)?);
    assert_close(&eager_pos, &as_f64(&pos.matmul(&w)?).iter().map(|v| v.tanh() * 1.5).collect::<Vec<_>>(), 1e-5);

    // Traced: both branches trace once, into one cond node; no branch op is at top level.
    let f = ConcreteFunction::trace("branchy", &[("x", &pos)], || Ok(vec![branchy(&pos, &w, &t, &e)?]))?;
    assert_eq!((t.get(), e.get()), (2, 2));
    let g = f.traced_graph();
    assert_eq!(g.count_op("cond"), 1, "{}", g.to_text());
    assert_eq!((g.count_op("tanh"), g.count_op("exp"), g.count_op("matmul")), (0, 0, 0), "{}", g.to_text());
    let (then_g, else_g) = cond_parts(g);
    assert_eq!((then_g.count_op("tanh"), then_g.count_op("exp"), then_g.count_op("matmul")), (1, 0, 1));
    assert_eq!((else_g.count_op("tanh"), else_g.count_op("exp"), else_g.count_op("matmul")), (0, 1, 1));

    // One trace serves both predicate values, each the eager run's bits; no retrace (host
    // side effects do not run again).
    assert_bits_eq(&f.call(&[&pos])?[0], &eager_pos);
    assert_bits_eq(&f.call(&[&neg])?[0], &eager_neg);
    assert_bits_eq(&f.call(&[&pos])?[0], &eager_pos);
    assert_eq!((t.get(), e.get()), (2, 2));
    Ok(())
}

#[test]
fn cond_on_a_bool_argument_with_tuple_outputs_and_a_trace_time_constant_predicate() -> Result<()> {
    let x = f32s(&[1.0, 2.0, 3.0], &[3]);
    let flag = Tensor::scalar(true);
    let body = |flag: &Tensor, x: &Tensor| -> Result<Vec<Tensor>> {
        let (a, b) = cond(flag, || Ok((x.add(1.0)?, x.sum()?)), || Ok((x.mul(x)?, x.max()?)))?;
        // A predicate made while tracing, as data (not by an op), is decided now: no node.
        let c = cond(&Tensor::scalar(true), || x.sigmoid(), || x.relu())?;
        Ok(vec![a, b, c])
    };
    let eager_t = body(&flag, &x)?;
    let eager_f = body(&Tensor::scalar(false), &x)?;
    tests::assert_values(&eager_t[0], &[2.0, 3.0, 4.0]);
    tests::assert_values(&eager_t[1], &[6.0]);
    tests::assert_values(&eager_f[0], &[1.0, 4.0, 9.0]);
    tests::assert_values(&eager_f[1], &[3.0]);
    let f = ConcreteFunction::trace("flagged", &[("flag", &flag), ("x", &x)], || body(&flag, &x))?;
    let g = f.traced_graph();
    assert_eq!((g.count_op("cond"), g.count_op("sigmoid"), g.count_op("relu")), (1, 1, 0), "{}", g.to_text());
    for (p, eager) in [(true, &eager_t), (false, &eager_f)] {
        let out = f.call(&[&Tensor::scalar(p), &x])?;
        assert_eq!(out.len(), 3);
        for (o, e) in out.iter().zip(eager.iter()) {
            assert_bits_eq(o, e);
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ 2. cond inside a loop

/// Iterates `y <- cond(sum(y) > 0, tanh(y) * 2 - 0.5, exp(y) * 0.3 + y)` `n` times.
fn nested(x: &Tensor, n: &Tensor) -> Result<Vec<Tensor>> {
    let (i, y) = while_loop(
        |(i, _): &(Tensor, Tensor)| i.lt(n),
        |(i, y)| {
            let y = cond(&y.sum()?.gt(0.0)?, || y.tanh()?.mul(2.0)?.sub(0.5), || y.exp()?.mul(0.3)?.add(&y))?;
            Ok((&i + 1, y))
        },
        (Tensor::scalar(0i32), x.clone()),
    )?;
    Ok(vec![i, y])
}

#[test]
fn a_cond_nested_in_a_while_body_matches_eager_bit_for_bit() -> Result<()> {
    let x = f32s(&[0.2, -0.9, 0.4, -0.3], &[4]);
    let n = Tensor::scalar(5i32);
    let f = ConcreteFunction::trace("nested", &[("x", &x), ("n", &n)], || nested(&x, &n))?;
    let g = f.traced_graph();
    assert_eq!((g.count_op("while"), g.count_op("cond")), (1, 0), "{}", g.to_text());
    let (_, body) = while_parts(g);
    assert_eq!(body.count_op("cond"), 1, "{}", g.to_text());
    let (then_g, else_g) = cond_parts(body);
    assert_eq!((then_g.count_op("tanh"), else_g.count_op("exp")), (1, 1));

    let inputs = [
        (x.clone(), 5),
        (f32s(&[-2.0, -1.0, 0.5, 0.1], &[4]), 7),
        (f32s(&[3.0, 1.0, -0.5, 0.25], &[4]), 1),
        (f32s(&[0.1, 0.1, -0.3, 0.05], &[4]), 0),
        (f32s(&[-0.1, 0.2, -0.3, 0.05], &[4]), 12),
    ];
    for (xv, k) in inputs {
        let nk = Tensor::scalar(k);
        let eager = nested(&xv, &nk)?;
        // The eager loop by hand: the branch each iteration takes follows the data.
        let mut y = xv.clone();
        for _ in 0..k {
            y = if y.sum()?.item::<f32>()? > 0.0 { y.tanh()?.mul(2.0)?.sub(0.5)? } else { y.exp()?.mul(0.3)?.add(&y)? };
        }
        assert_eq!(eager[0].item::<i32>()?, k);
        assert_bits_eq(&eager[1], &y);
        let out = f.call(&[&xv, &nk])?;
        assert_bits_eq(&out[0], &eager[0]);
        assert_bits_eq(&out[1], &eager[1]);
    }
    Ok(())
}

// ------------------------------------------------------------ 3. value-dependent trip counts

/// Collatz: the number of steps from `n` to 1 (a cond inside the loop picks n/2 or 3n+1).
fn collatz(n: &Tensor) -> Result<Vec<Tensor>> {
    let (steps, last) = while_loop(
        |(_, n): &(Tensor, Tensor)| n.ne(1i64),
        |(steps, n)| {
            let half = n.div(2i64)?;
            let next = cond(&half.mul(2i64)?.eq(&n)?, || Ok(half.clone()), || n.mul(3i64)?.add(1i64))?;
            Ok((&steps + 1, next))
        },
        (Tensor::scalar(0i64), n.clone()),
    )?;
    Ok(vec![steps, last])
}

/// Halves `x` until it is below 1, counting the halvings.
fn halvings(x: &Tensor) -> Result<Vec<Tensor>> {
    let (k, y) = while_loop(|(_, y): &(Tensor, Tensor)| y.ge(1.0f32), |(k, y)| Ok((&k + 1, y.mul(0.5f32)?)), (Tensor::scalar(0i32), x.clone()))?;
    Ok(vec![k, y])
}

#[test]
fn trip_counts_follow_the_input_values_through_one_trace() -> Result<()> {
    let n = Tensor::scalar(6i64);
    let f = ConcreteFunction::trace("collatz", &[("n", &n)], || collatz(&n))?;
    assert_eq!(f.traced_graph().count_op("while"), 1);
    for (start, steps) in [(1i64, 0i64), (6, 8), (7, 16), (27, 111), (97, 118)] {
        let eager = collatz(&Tensor::scalar(start))?;
        let out = f.call(&[&Tensor::scalar(start)])?;
        assert_eq!((eager[0].item::<i64>()?, eager[1].item::<i64>()?), (steps, 1), "collatz({start}) eagerly");
        assert_eq!((out[0].item::<i64>()?, out[1].item::<i64>()?), (steps, 1), "collatz({start}) in the graph");
    }

    let x = Tensor::scalar(100.0f32);
    let f = ConcreteFunction::trace("halvings", &[("x", &x)], || halvings(&x))?;
    for (start, count, last) in [(100.0f32, 7, 0.78125f32), (0.5, 0, 0.5), (1.0, 1, 0.5), (1e6, 20, 1e6 / 1048576.0), (3.0, 2, 0.75)] {
        let eager = halvings(&Tensor::scalar(start))?;
        let out = f.call(&[&Tensor::scalar(start)])?;
        assert_eq!((eager[0].item::<i32>()?, eager[1].item::<f32>()?), (count, last), "halvings({start}) eagerly");
        assert_bits_eq(&out[0], &eager[0]);
        assert_bits_eq(&out[1], &eager[1]);
    }
    Ok(())
}

#[test]
fn a_loop_variable_with_an_unknown_dim_grows_through_the_loop() -> Result<()> {
    // Appends the running sum to a vector while it is below a limit: the vector's length is
    // the trip count plus one, known only when the graph runs.
    let opts = WhileOptions { shape_invariants: Some(vec![Shape::new(&[UNKNOWN]), Shape::scalar()]), ..WhileOptions::default() };
    let grow = |start: &Tensor, limit: &Tensor| -> Result<Vec<Tensor>> {
        let (v, s) = while_loop_opts(
            &opts,
            |(_, s): &(Tensor, Tensor)| s.lt(limit),
            |(v, s)| {
                let s = s.mul(1.5f64)?.add(1.0f64)?;
                Ok((Tensor::concat(&[&v, &s.reshape([1])?], 0)?, s))
            },
            (start.reshape([1])?, start.clone()),
        )?;
        Ok(vec![v, s])
    };
    let (start, limit) = (Tensor::scalar(1.0f64), Tensor::scalar(20.0f64));
    let f = ConcreteFunction::trace("grow", &[("start", &start), ("limit", &limit)], || grow(&start, &limit))?;
    for (s0, lim, expected) in [(1.0, 20.0, vec![1.0, 2.5, 4.75, 8.125, 13.1875, 20.78125]), (1.0, 0.5, vec![1.0]), (0.0, 2.0, vec![0.0, 1.0, 2.5])] {
        let (s0, lim) = (Tensor::scalar(s0), Tensor::scalar(lim));
        let eager = grow(&s0, &lim)?;
        tests::assert_values(&eager[0], &expected);
        let out = f.call(&[&s0, &lim])?;
        assert_bits_eq(&out[0], &eager[0]);
        assert_bits_eq(&out[1], &eager[1]);
    }
    Ok(())
}

// --------------------------------------------------------------------- 4. max_iterations

#[test]
fn max_iterations_stops_the_loop_eagerly_and_in_the_graph() -> Result<()> {
    let run = |limit: Option<usize>, n: &Tensor| -> Result<Vec<Tensor>> {
        let opts = WhileOptions { max_iterations: limit, ..WhileOptions::default() };
        let (i, acc) = while_loop_opts(
            &opts,
            |(i, _): &(Tensor, Tensor)| i.lt(n),
            |(i, acc)| Ok((&i + 1, acc.mul(1.25f32)?.add(0.5f32)?)),
            (Tensor::scalar(0i32), Tensor::scalar(1.0f32)),
        )?;
        Ok(vec![i, acc])
    };
    let n = Tensor::scalar(1000i32);
    for limit in [0usize, 1, 5] {
        let f = ConcreteFunction::trace("capped", &[("n", &n)], || run(Some(limit), &n))?;
        assert!(f.traced_graph().to_text().contains(&format!("while[max_iterations={limit}]")), "{}", f.traced_graph().to_text());
        for (nv, trips) in [(1000, limit as i32), (3, limit.min(3) as i32)] {
            let nv = Tensor::scalar(nv);
            let eager = run(Some(limit), &nv)?;
            let mut acc = 1.0f32;
            for _ in 0..trips {
                acc = acc * 1.25 + 0.5;
            }
            assert_eq!((eager[0].item::<i32>()?, eager[1].item::<f32>()?), (trips, acc), "limit {limit}");
            let out = f.call(&[&nv])?;
            assert_bits_eq(&out[0], &eager[0]);
            assert_bits_eq(&out[1], &eager[1]);
        }
    }
    // Without a limit the condition alone decides.
    assert_eq!(run(None, &Tensor::scalar(40i32))?[0].item::<i32>()?, 40);
    Ok(())
}

// ------------------------------------------------------------------------ 5. gradients

/// `sum(cond(sum(x) > 0, tanh(x @ w), exp(x) @ w * 0.5)^2)`.
fn cond_loss(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let y = cond(&x.sum()?.gt(0.0)?, || x.matmul(w)?.tanh(), || x.exp()?.matmul(w)?.mul(0.5))?;
    y.mul(&y)?.sum()
}

#[test]
fn gradients_through_both_branches_of_cond_match_finite_differences_and_eager() -> Result<()> {
    let w0 = f64s(&[0.3, -0.2, 0.5, 0.1, -0.4, 0.25], &[3, 2]);
    let xs = [f64s(&[0.2, -0.1, 0.4, 0.3, 0.1, -0.2], &[2, 3]), f64s(&[-0.2, -0.1, 0.4, -0.3, 0.1, -0.2], &[2, 3])];
    let x0 = xs[0].requires_grad_(true)?;
    let w = w0.requires_grad_(true)?;
    let f = ConcreteFunction::trace("cond_grads", &[("x", &x0), ("w", &w)], || {
        let loss = cond_loss(&x0, &w)?;
        let g = tensor_core::grad(&[&loss], &[&x0, &w], false)?;
        Ok(vec![loss, g[0].clone(), g[1].clone()])
    })?;
    assert_eq!(f.traced_graph().count_op("cond"), 2, "forward and backward: {}", f.traced_graph().to_text());
    for x in &xs {
        let xe = x.detach().requires_grad_(true)?;
        let we = w0.detach().requires_grad_(true)?;
        let loss = cond_loss(&xe, &we)?;
        loss.backward()?;
        let (gx, gw) = (xe.grad().expect("x.grad"), we.grad().expect("w.grad"));
        assert_close(&gx, &finite_diff(x, |x| cond_loss(x, &w0))?, 1e-7);
        assert_close(&gw, &finite_diff(&w0, |w| cond_loss(x, w))?, 1e-7);
        let out = f.call(&[x, &w0])?;
        assert_bits_eq(&out[0], &loss);
        assert_bits_eq(&out[1], &gx);
        assert_bits_eq(&out[2], &gw);
    }
    Ok(())
}

/// Grows `y` by `y * 1.1 + tanh(y * w)` until `sum(|y|)` reaches 4: the trip count depends
/// on `x` and `w`. Returns the loss `sum(y^2)` and the trip count.
fn loop_loss(x: &Tensor, w: &Tensor) -> Result<(Tensor, Tensor)> {
    let (trips, y) = while_loop(
        |(_, y): &(Tensor, Tensor)| y.abs()?.sum()?.lt(4.0),
        |(k, y)| Ok((&k + 1, y.mul(1.1)?.add(&y.mul(w)?.tanh()?)?)),
        (Tensor::scalar(0i64), x.clone()),
    )?;
    Ok((y.mul(&y)?.sum()?, trips))
}

#[test]
fn gradients_through_a_value_dependent_while_loop_match_finite_differences_and_eager() -> Result<()> {
    let w0 = f64s(&[0.8, 1.2, -0.5], &[3]);
    let xs = [f64s(&[0.3, -0.2, 0.5], &[3]), f64s(&[0.6, -0.5, 0.4], &[3]), f64s(&[0.05, 0.1, -0.02], &[3])];
    let x0 = xs[0].requires_grad_(true)?;
    let w = w0.requires_grad_(true)?;
    // The traced step calls backward(), which writes x.grad and w.grad of the arguments.
    let f = ConcreteFunction::trace("loop_grads", &[("x", &x0), ("w", &w)], || {
        let (loss, trips) = loop_loss(&x0, &w)?;
        loss.backward()?;
        Ok(vec![loss, trips])
    })?;
    assert_eq!(f.traced_graph().count_op("while"), 2, "forward and backward loops: {}", f.traced_graph().to_text());
    assert!(f.traced_graph().to_text().contains("while[history]"), "{}", f.traced_graph().to_text());
    let mut trip_counts = Vec::new();
    for x in &xs {
        let xe = x.detach().requires_grad_(true)?;
        let we = w0.detach().requires_grad_(true)?;
        let (loss, trips) = loop_loss(&xe, &we)?;
        loss.backward()?;
        trip_counts.push(trips.item::<i64>()?);
        let (gx, gw) = (xe.grad().expect("x.grad"), we.grad().expect("w.grad"));
        assert_close(&gx, &finite_diff(x, |x| Ok(loop_loss(x, &w0)?.0))?, 1e-6);
        assert_close(&gw, &finite_diff(&w0, |w| Ok(loop_loss(x, w)?.0))?, 1e-6);

        let (xg, wg) = (x.detach().requires_grad_(true)?, w0.detach().requires_grad_(true)?);
        let out = f.call(&[&xg, &wg])?;
        assert_bits_eq(&out[0], &loss);
        assert_bits_eq(&out[1], &trips);
        assert_bits_eq(&xg.grad().expect("x.grad written by the graph"), &gx);
        assert_bits_eq(&wg.grad().expect("w.grad written by the graph"), &gw);
    }
    // The inputs really take different numbers of iterations.
    trip_counts.dedup();
    assert_eq!(trip_counts.len(), 3, "trip counts {trip_counts:?}");
    assert!(trip_counts.iter().all(|&t| t >= 2), "trip counts {trip_counts:?}");
    Ok(())
}

#[test]
fn a_loop_that_never_runs_passes_the_gradient_straight_through() -> Result<()> {
    let w = f64s(&[0.8, 1.2, -0.5], &[3]).requires_grad_(true)?;
    let x = f64s(&[3.0, -2.0, 1.5], &[3]).requires_grad_(true)?;
    let f = ConcreteFunction::trace("no_trips", &[("x", &x), ("w", &w)], || {
        let (loss, trips) = loop_loss(&x, &w)?;
        let g = tensor_core::grad(&[&loss], &[&x, &w], false)?;
        Ok(vec![trips, g[0].clone(), g[1].clone()])
    })?;
    let out = f.call(&[&x, &w])?;
    assert_eq!(out[0].item::<i64>()?, 0);
    tests::assert_values(&out[1], &[6.0, -4.0, 3.0]);
    tests::assert_values(&out[2], &[0.0, 0.0, 0.0]);
    let xe = x.detach().requires_grad_(true)?;
    loop_loss(&xe, &w)?.0.backward()?;
    assert_bits_eq(&xe.grad().expect("x.grad"), &out[1]);
    Ok(())
}

/// A model `loss(x, w)` whose gradients are checked.
type LossFn = fn(&Tensor, &Tensor) -> Result<Tensor>;

/// Checks `model`'s gradients at each `x` (and `w0`): eagerly against central finite
/// differences, and a traced `backward()` (one trace for all `xs`) against the eager bits.
fn check_grads(name: &str, model: LossFn, xs: &[Tensor], w0: &Tensor) -> Result<()> {
    let (x0, w) = (xs[0].detach().requires_grad_(true)?, w0.detach().requires_grad_(true)?);
    let f = ConcreteFunction::trace(name, &[("x", &x0), ("w", &w)], || {
        let loss = model(&x0, &w)?;
        loss.backward()?;
        Ok(vec![loss])
    })?;
    for x in xs {
        let (xe, we) = (x.detach().requires_grad_(true)?, w0.detach().requires_grad_(true)?);
        let loss = model(&xe, &we)?;
        loss.backward()?;
        let (gx, gw) = (xe.grad().expect("x.grad"), we.grad().expect("w.grad"));
        assert_close(&gx, &finite_diff(x, |x| model(x, w0))?, 1e-6);
        assert_close(&gw, &finite_diff(w0, |w| model(x, w))?, 1e-6);
        let (xg, wg) = (x.detach().requires_grad_(true)?, w0.detach().requires_grad_(true)?);
        let out = f.call(&[&xg, &wg])?;
        assert_bits_eq(&out[0], &loss);
        assert_bits_eq(&xg.grad().expect("x.grad written by the graph"), &gx);
        assert_bits_eq(&wg.grad().expect("w.grad written by the graph"), &gw);
    }
    Ok(())
}

/// `w` used twice in every iteration: its gradient sums many terms, which the graph must
/// add in the eager backward's order.
fn reuse_loss(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (_, y) = while_loop(
        |(_, y): &(Tensor, Tensor)| y.abs()?.sum()?.lt(4.0),
        |(k, y)| Ok((&k + 1, y.mul(w)?.add(&y.mul(w)?.tanh()?)?.add(&y.mul(0.2)?)?)),
        (Tensor::scalar(0i64), x.clone()),
    )?;
    y.mul(&y)?.sum()
}

/// A cond inside the loop body, whose branches use `w` (captured two levels down).
fn nested_loss(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (_, y) = while_loop(
        |(i, _): &(Tensor, Tensor)| i.lt(4),
        |(i, y)| {
            let y = cond(&y.sum()?.gt(0.0)?, || y.mul(w)?.tanh()?.mul(2.0), || y.exp()?.mul(w)?.sub(0.3))?;
            Ok((&i + 1, y))
        },
        (Tensor::scalar(0i32), x.clone()),
    )?;
    y.mul(&y)?.sum()
}

/// A while loop in a while body; the inner trip count is the outer loop's counter, and `w`
/// is used once per outer iteration, after the inner loop.
fn loop_in_loop_loss(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let scale = Tensor::full(&[3], 0.9, DType::F64);
    let (_, y) = while_loop(
        |(i, _): &(Tensor, Tensor)| i.lt(3),
        |(i, y)| {
            let (_, z) = while_loop(
                |(j, _): &(Tensor, Tensor)| j.le(&i),
                |(j, z)| Ok((&j + 1, z.mul(&scale)?.tanh()?.add(&z.mul(0.5)?)?)),
                (Tensor::scalar(0i32), y),
            )?;
            Ok((&i + 1, z.mul(w)?))
        },
        (Tensor::scalar(0i32), x.clone()),
    )?;
    y.sum()
}

#[test]
fn gradients_through_nested_control_flow_and_reused_captures_match_eager_bit_for_bit() -> Result<()> {
    let w = f64s(&[0.8, 1.2, -0.5], &[3]);
    let xs = [f64s(&[0.3, -0.2, 0.5], &[3]), f64s(&[0.6, -0.5, 0.4], &[3]), f64s(&[0.1, -0.05, 0.2], &[3]), f64s(&[0.01, -0.1, 0.02], &[3])];
    check_grads("reuse", reuse_loss, &xs, &w)?;
    let xs = [f64s(&[0.3, -0.2, 0.5], &[3]), f64s(&[-0.6, -0.5, 0.4], &[3])];
    check_grads("cond_in_while", nested_loss, &xs, &w)?;
    check_grads("while_in_while", loop_in_loop_loss, &xs, &w)?;
    Ok(())
}

#[test]
fn second_order_gradients_through_cond() -> Result<()> {
    // y = x^3 for x > 0, else -x^2: y' = 3x^2 or -2x, y'' = 6x or -2.
    let body = |x: &Tensor| -> Result<Vec<Tensor>> {
        let y = cond(&x.gt(0.0)?, || x.mul(x)?.mul(x), || x.mul(x)?.neg())?;
        let g = tensor_core::grad(&[&y], &[x], true)?;
        let gg = tensor_core::grad(&[&g[0]], &[x], false)?;
        Ok(vec![y, g[0].clone(), gg[0].clone()])
    };
    let x = Tensor::scalar(2.0f64).requires_grad_(true)?;
    let f = ConcreteFunction::trace("second", &[("x", &x)], || body(&x))?;
    for (v, expected) in [(2.0, [8.0, 12.0, 12.0]), (-3.0, [-9.0, 6.0, -2.0]), (0.5, [0.125, 0.75, 3.0])] {
        let xe = Tensor::scalar(v).requires_grad_(true)?;
        let eager = body(&xe)?;
        let out = f.call(&[&xe])?;
        for ((e, o), want) in eager.iter().zip(&out).zip(expected) {
            tests::assert_values(e, &[want]);
            assert_bits_eq(o, e);
        }
    }
    Ok(())
}

// Known gaps (ignored until the backward engine supports them; see the notes).

/// `w` used in an inner loop's body (so an inner `WhileBackward` sums its terms) and after
/// the outer loop.
fn capture_everywhere_loss(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (_, y) = while_loop(
        |(i, _): &(Tensor, Tensor)| i.lt(3),
        |(i, y)| {
            let (_, z) = while_loop(
                |(j, _): &(Tensor, Tensor)| j.le(&i),
                |(j, z)| Ok((&j + 1, z.mul(w)?.tanh()?.add(&z.mul(0.5)?)?)),
                (Tensor::scalar(0i32), y),
            )?;
            Ok((&i + 1, z))
        },
        (Tensor::scalar(0i32), x.clone()),
    )?;
    y.mul(w)?.sum()
}

/// A custom backward node (`WhileBackward`, `CondBackward`) returns one summed gradient for
/// a value it captured, and the engine adds that sum to the value's other contributions:
/// `acc + (a + b + ...)`, where the eager backward computes `((acc + a) + b) + ...`. Within
/// one loop the terms are seeded with the running sum (bit-identical, tested above), but a
/// sum that started outside the node (a use after the loop, an enclosing loop) is not
/// available to it. Fix: let the engine hand a custom node the current partial sum of each
/// input it accumulates into, and take the node's result as the new sum.
#[test]
#[ignore = "needs the engine to pass partial gradient sums into custom backward nodes"]
fn known_gap_gradient_sums_of_a_capture_used_outside_its_loop_match_eager_bits() -> Result<()> {
    let w = f64s(&[0.8, 1.2, -0.5], &[3]);
    check_grads("capture_everywhere", capture_everywhere_loss, &[f64s(&[0.3, -0.2, 0.5], &[3]), f64s(&[-0.6, -0.5, 0.4], &[3])], &w)
}

/// A branch that is not taken (or a loop that never runs) gives zeros for what it captured,
/// where the eager backward never reaches it and leaves its `.grad` empty; optimizers treat
/// the two differently (Adam moves a parameter with a zero gradient). Fix: an optional
/// (`None`-able) gradient value through `Cond`/`While` nodes and `.grad` writes.
#[test]
#[ignore = "needs optional gradient values through graph control flow"]
fn known_gap_an_untaken_branch_leaves_the_grad_of_its_captures_empty() -> Result<()> {
    let x = f32s(&[1.0, 2.0], &[2]);
    let (w1, w2) = (f32s(&[0.5, 0.5], &[2]).requires_grad_(true)?, f32s(&[2.0, 2.0], &[2]).requires_grad_(true)?);
    let model = |x: &Tensor| -> Result<Tensor> { cond(&x.sum()?.gt(0.0)?, || x.mul(&w1), || x.mul(&w2))?.sum() };
    model(&x)?.backward()?;
    assert!(w2.grad().is_none(), "eagerly the else branch never ran");
    w1.zero_grad()?;
    let f = ConcreteFunction::trace("untaken", &[("x", &x)], || {
        let loss = model(&x)?;
        loss.backward()?;
        Ok(vec![loss])
    })?;
    f.call(&[&x])?;
    tests::assert_values(&w1.grad().expect("w1.grad"), &[1.0, 2.0]);
    assert!(w2.grad().is_none(), "the graph gave w2.grad = {:?}", w2.grad().map(|g| as_f64(&g)));
    Ok(())
}

/// The parameters of the small model trained below.
struct Model {
    w: Tensor,
    v: Tensor,
    b: Tensor,
}

impl Model {
    fn new() -> Result<Model> {
        Ok(Model {
            w: Tensor::randn(&[3, 4], DType::F32, 11).mul(0.5)?.requires_grad_(true)?,
            v: Tensor::randn(&[4, 4], DType::F32, 12).mul(0.4)?.requires_grad_(true)?,
            b: Tensor::randn(&[4], DType::F32, 13).mul(0.1)?.requires_grad_(true)?,
        })
    }

    fn params(&self) -> Vec<Tensor> {
        vec![self.w.clone(), self.v.clone(), self.b.clone()]
    }

    /// A forward pass with a data-dependent branch and a data-dependent loop (which uses a
    /// parameter), then the loss, backward and one SGD step.
    fn step(&self, opt: &Sgd, x: &Tensor, target: &Tensor) -> Result<Tensor> {
        opt.zero_grad()?;
        let h = x.matmul(&self.w)?.add(&self.b)?;
        let h = cond(&h.sum()?.gt(0.0)?, || h.tanh(), || h.mul(0.5)?.sigmoid())?;
        let (_, h) = while_loop_opts(
            &WhileOptions { max_iterations: Some(6), ..WhileOptions::default() },
            |(_, h): &(Tensor, Tensor)| h.abs()?.sum()?.gt(1.0f32),
            |(k, h)| Ok((&k + 1, h.matmul(&self.v)?.tanh()?.mul(0.8f32)?)),
            (Tensor::scalar(0i32), h),
        )?;
        let d = h.sub(target)?;
        let loss = d.mul(&d)?.mean()?;
        loss.backward()?;
        opt.step()?;
        Ok(loss)
    }
}

#[test]
fn a_training_step_with_cond_and_while_is_the_same_eagerly_and_as_a_graph() -> Result<()> {
    let x = Tensor::randn(&[2, 3], DType::F32, 21);
    let target = Tensor::randn(&[2, 4], DType::F32, 22).mul(0.3)?;
    let (eager, graph) = (Model::new()?, Model::new()?);
    let (opt_e, opt_g) = (Sgd::new(eager.params(), 0.2)?, Sgd::new(graph.params(), 0.2)?);
    let f = ConcreteFunction::trace("train_step", &[("x", &x), ("target", &target)], || Ok(vec![graph.step(&opt_g, &x, &target)?]))?;
    let g = f.traced_graph();
    assert_eq!((g.count_op("cond"), g.count_op("while")), (2, 2), "{}", g.to_text());
    let mut losses = Vec::new();
    for _ in 0..4 {
        let le = eager.step(&opt_e, &x, &target)?;
        let lg = f.call(&[&x, &target])?;
        assert_bits_eq(&lg[0], &le);
        for (pe, pg) in eager.params().iter().zip(graph.params()) {
            assert_bits_eq(&pg, pe);
            assert_bits_eq(&pg.grad().expect("grad written by the graph"), &pe.grad().expect("eager grad"));
        }
        losses.push(le.item::<f32>()?);
    }
    assert!(losses[3] < losses[0], "training lowers the loss: {losses:?}");
    Ok(())
}

// ---------------------------------------------------------------------------- 6. errors

#[test]
fn a_loop_variable_that_changes_shape_or_dtype_is_an_error_naming_it() -> Result<()> {
    let x = f32s(&[1.0, 2.0, 3.0], &[3]);
    let shrink = |x: &Tensor| while_loop(|(i, _): &(Tensor, Tensor)| i.lt(3), |(i, y)| Ok((&i + 1, y.sum()?)), (Tensor::scalar(0i32), x.clone()));
    let expect = |e: Error, var: &str, old: &str, new: &str| match &e {
        Error::LoopVarChanged { var: v, old: o, new: n } => {
            assert_eq!((v.as_str(), o.as_str(), n.as_str()), (var, old, new), "{e}");
            assert!(e.to_string().contains(var) && e.to_string().contains(old) && e.to_string().contains(new), "{e}");
        }
        other => panic!("expected LoopVarChanged, got {other:?}"),
    };
    // Eagerly and while tracing.
    expect(shrink(&x).expect_err("eager error"), "loop_vars[1]", "f32[3]", "f32[]");
    expect(trace_err(&[("x", &x)], || Ok(vec![shrink(&x)?.1])), "loop_vars[1]", "f32[3]", "f32[]");
    assert_clean_after_error();

    // A dtype change, with the variable named by the options.
    let opts = WhileOptions { names: Some(vec!["count".into(), "y".into()]), ..WhileOptions::default() };
    let widen = |x: &Tensor| {
        while_loop_opts(&opts, |(i, _): &(Tensor, Tensor)| i.lt(3), |(i, y)| Ok(((&i + 1).cast(DType::I64)?, y)), (Tensor::scalar(0i32), x.clone()))
    };
    expect(widen(&x).expect_err("eager error"), "count", "i32[]", "i64[]");
    expect(trace_err(&[("x", &x)], || Ok(vec![widen(&x)?.1])), "count", "i32[]", "i64[]");
    assert_clean_after_error();

    // A changed number of loop variables.
    let more = |x: &Tensor| {
        while_loop(
            |v: &Vec<Tensor>| v[0].sum()?.lt(10.0),
            |v| {
                let mut v = v;
                v.push(v[0].clone());
                Ok(v)
            },
            vec![x.clone()],
        )
    };
    expect(more(&x).expect_err("eager error"), "the loop variables", "1 tensors", "2 tensors");
    expect(trace_err(&[("x", &x)], || more(&x)), "the loop variables", "1 tensors", "2 tensors");
    assert_clean_after_error();

    // A shape invariant that does not admit the initial value.
    let opts = WhileOptions { shape_invariants: Some(vec![Shape::new(&[4])]), ..WhileOptions::default() };
    let e = while_loop_opts(&opts, |y: &Tensor| y.sum()?.lt(0.0), Ok, x.clone()).expect_err("an error");
    expect(e, "loop_vars[0]", "f32[4]", "f32[3]");
    let opts = WhileOptions { shape_invariants: Some(vec![Shape::new(&[3]), Shape::new(&[3])]), ..WhileOptions::default() };
    let e = while_loop_opts(&opts, |y: &Tensor| y.sum()?.lt(0.0), Ok, x.clone()).expect_err("an error");
    assert!(matches!(e, Error::InvalidArgument { arg: "shape_invariants", .. }), "{e:?}");
    Ok(())
}

#[test]
fn cond_branches_that_disagree_are_an_error_saying_which_output_differs() -> Result<()> {
    let x = f32s(&[1.0, -2.0, 3.0], &[3]);
    let cases: Vec<(Body, usize, &str, &str)> = vec![
        (Box::new(|| cond(&x.sum()?.gt(0.0)?, || Ok(vec![x.clone()]), || Ok(vec![x.cast(DType::F64)?]))), 0, "f32[3]", "f64[3]"),
        (
            Box::new(|| cond(&x.sum()?.gt(0.0)?, || Ok(vec![x.sum()?, x.clone()]), || Ok(vec![x.sum()?, x.reshape([3, 1])?]))),
            1,
            "f32[3]",
            "f32[3, 1]",
        ),
        (Box::new(|| cond(&x.sum()?.gt(0.0)?, || Ok(vec![x.clone(), x.sum()?]), || Ok(vec![x.clone()]))), 1, "2 tensors in all", "1 tensors in all"),
        (
            Box::new(|| Ok(cond(&x.sum()?.gt(0.0)?, || Ok(Some(x.clone())), || Ok(None))?.into_iter().collect())),
            0,
            "1 tensors in all",
            "0 tensors in all",
        ),
    ];
    for (body, index, then_desc, else_desc) in cases {
        // Eagerly only one branch runs, so nothing can disagree.
        body()?;
        let e = trace_err(&[("x", &x)], &body);
        match &e {
            Error::BranchMismatch { index: i, then_desc: t, else_desc: el } => {
                assert_eq!((*i, t.as_str(), el.as_str()), (index, then_desc, else_desc), "{e}");
                assert!(e.to_string().contains(&format!("output {index}")), "{e}");
            }
            other => panic!("expected BranchMismatch, got {other:?}"),
        }
        assert_clean_after_error();
    }
    Ok(())
}

#[test]
fn a_predicate_that_is_not_one_bool_is_an_error() -> Result<()> {
    let x = f32s(&[1.0, -2.0, 3.0], &[3]);
    let check = |e: Error, what: &str| {
        let ok = match what {
            "dtype" => matches!(e, Error::UnsupportedDType { dtype: DType::F32, .. }),
            _ => matches!(e, Error::NotOneElement { numel: 3, .. }),
        };
        assert!(ok, "{what}: {e:?}");
    };
    let float_cond = || cond(&x.sum()?, || x.exp(), || x.tanh());
    let vector_cond = || cond(&x.gt(0.0)?, || x.exp(), || x.tanh());
    let float_loop = || while_loop(|y: &Tensor| y.sum(), |y| y.mul(0.5), x.clone());
    let vector_loop = || while_loop(|y: &Tensor| y.gt(0.1), |y| y.mul(0.5), x.clone());
    check(float_cond().expect_err("eager"), "dtype");
    check(vector_cond().expect_err("eager"), "numel");
    check(float_loop().expect_err("eager"), "dtype");
    check(vector_loop().expect_err("eager"), "numel");
    check(trace_err(&[("x", &x)], || Ok(vec![float_cond()?])), "dtype");
    check(trace_err(&[("x", &x)], || Ok(vec![vector_cond()?])), "numel");
    check(trace_err(&[("x", &x)], || Ok(vec![float_loop()?])), "dtype");
    check(trace_err(&[("x", &x)], || Ok(vec![vector_loop()?])), "numel");
    assert_clean_after_error();
    Ok(())
}

#[test]
fn a_predicate_whose_size_is_known_only_at_run_time_is_checked_when_the_graph_runs() -> Result<()> {
    let x = f32s(&[2.0], &[1]);
    let unknown = [Shape::new(&[UNKNOWN])];
    let f =
        ConcreteFunction::trace_with_shapes("relaxed", &[("x", &x)], &unknown, true, || Ok(vec![cond(&x.gt(0.0)?, || x.mul(3.0f32), || x.neg())?]))?;
    tests::assert_values(&f.call(&[&x])?[0], &[6.0]);
    tests::assert_values(&f.call(&[&f32s(&[-2.0], &[1])])?[0], &[2.0]);
    let e = f.call(&[&f32s(&[1.0, 2.0], &[2])]).expect_err("two predicate values");
    assert!(e.to_string().contains("one bool value") && e.to_string().contains("bool[2]"), "{e}");
    let g = ConcreteFunction::trace_with_shapes("relaxed_loop", &[("x", &x)], &unknown, true, || {
        Ok(vec![while_loop(|y: &Tensor| y.gt(1.0f32), |y| y.mul(0.5f32), x.clone())?])
    })?;
    tests::assert_values(&g.call(&[&f32s(&[5.0], &[1])])?[0], &[0.625]);
    let e = g.call(&[&f32s(&[5.0, 6.0], &[2])]).expect_err("two predicate values");
    assert!(e.to_string().contains("one bool value"), "{e}");
    assert_clean_after_error();
    Ok(())
}

/// A loop whose variable changes shape cannot stack its iterations for a gradient; with an
/// input that requires grad, the forward pass still runs (nothing is saved) and matches eager.
#[test]
fn a_growing_loop_over_an_input_that_requires_grad_runs_forward() -> Result<()> {
    let x = f64s(&[1.0, 2.0], &[2]).requires_grad_(true)?;
    let opts = WhileOptions { shape_invariants: Some(vec![Shape::new(&[UNKNOWN])]), ..WhileOptions::default() };
    let grow = |x: &Tensor| while_loop_opts(&opts, |v: &Tensor| v.sum()?.lt(20.0), |v| Tensor::concat(&[&v, &v.mul(1.5)?], 0), x.clone());
    let f = ConcreteFunction::trace("grow_forward", &[("x", &x)], || Ok(vec![grow(&x)?]))?;
    let out = f.call(&[&x])?;
    assert_bits_eq(&out[0], &grow(&x)?.detach());
    assert_eq!(out[0].dims(), vec![16]);
    Ok(())
}

#[test]
fn a_gradient_through_a_loop_variable_of_unknown_shape_is_an_error() -> Result<()> {
    let x = f64s(&[1.0, 2.0], &[2]).requires_grad_(true)?;
    let opts = WhileOptions { shape_invariants: Some(vec![Shape::new(&[UNKNOWN])]), ..WhileOptions::default() };
    let grow = |x: &Tensor| while_loop_opts(&opts, |v: &Tensor| v.sum()?.lt(20.0), |v| Tensor::concat(&[&v, &v.mul(1.5)?], 0), x.clone());
    // Eagerly this is an ordinary chain of ops.
    let y = grow(&x)?;
    assert_eq!(y.dims(), vec![16]);
    y.sum()?.backward()?;
    tests::assert_values(&x.grad().expect("x.grad"), &[15.625, 15.625]);
    x.zero_grad()?;
    let e = trace_err(&[("x", &x)], || {
        let y = grow(&x)?;
        y.sum()?.backward()?;
        Ok(vec![y])
    });
    assert!(matches!(e, Error::NotDifferentiable { .. }) && e.to_string().contains("unknown"), "{e:?}");
    assert_clean_after_error();
    assert!(x.grad().is_none());
    Ok(())
}

#[track_caller]
fn assert_control_flow_error(e: &Error, mentions: &str) {
    match e {
        Error::ControlFlow { construct } => assert!(construct.contains(mentions), "{construct}"),
        other => panic!("expected ControlFlow, got {other:?}"),
    }
}

/// Runs `body` eagerly twice on fresh tensors from `fresh`, and as a traced function (whose
/// argument is the first tensor) called twice on other fresh ones: the outputs and every
/// tensor must end with the same bits. Returns the traced function.
fn matches_eager_twice(name: &str, fresh: impl Fn() -> Vec<Tensor>, body: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>) -> Result<ConcreteFunction> {
    let eager_state = fresh();
    // Copies of each run's outputs: an output may be a handle the next run updates.
    let copies = |out: Vec<Tensor>| out.iter().map(Tensor::detach).collect::<Vec<_>>();
    let eager: Vec<Vec<Tensor>> = (0..2).map(|_| body(&eager_state).map(copies)).collect::<Result<_>>()?;
    let state = fresh();
    let f = ConcreteFunction::trace(name, &[("x", &state[0])], || body(&state))?;
    for eager_out in &eager {
        let out = f.call(&[&state[0]])?;
        assert_eq!(out.len(), eager_out.len());
        for (a, b) in out.iter().zip(eager_out) {
            assert_bits_eq(a, b);
        }
    }
    for (a, b) in state.iter().zip(&eager_state) {
        assert_bits_eq(a, b);
    }
    Ok(f)
}

#[test]
fn an_outer_tensor_updated_in_place_inside_a_traced_branch_or_body_ends_as_eager_leaves_it() -> Result<()> {
    let fresh = || vec![f32s(&[1.0, 2.0], &[2]), f32s(&[10.0, 20.0], &[2])];
    // A captured tensor in a loop body: an implicit loop variable.
    let f = matches_eager_twice("loop_capture", fresh, |s| {
        let (x, outer) = (&s[0], &s[1]);
        let (_, y) = while_loop(
            |(i, _): &(Tensor, Tensor)| i.lt(3),
            |(i, y)| {
                outer.add_(1.0f32)?;
                Ok((&i + 1, y.add(outer)?))
            },
            (Tensor::scalar(0i32), x.clone()),
        )?;
        Ok(vec![y])
    })?;
    let (cond_graph, body) = while_parts(f.traced_graph());
    assert_eq!((cond_graph.num_params, body.outputs.len()), (3, 3), "i, y and the carried tensor\n{}", f.to_text());
    // A captured tensor in a branch: an implicit output, passed through by the other branch.
    let f = matches_eager_twice("cond_capture", fresh, |s| {
        let (x, outer) = (&s[0], &s[1]);
        Ok(vec![cond(&x.sum()?.gt(0.0)?, || outer.mul_(2.0f32).map(|_| x.clone()), || x.neg())?])
    })?;
    let (then, other) = cond_parts(f.traced_graph());
    assert_eq!((then.outputs.len(), other.outputs.len()), (2, 2), "{}", f.to_text());
    // The function's argument, both ways of the branch.
    for sign in [1.0f32, -1.0] {
        matches_eager_twice("cond_argument", fresh, |s| {
            let x = &s[0];
            let z = cond(&x.sum()?.mul(sign)?.gt(0.0)?, || x.sub_(1.0f32).map(|_| x.clone()), || x.mul(2.0))?;
            Ok(vec![z, x.clone()])
        })?;
    }
    // A value computed in the function outside the branch, and a tensor made there.
    matches_eager_twice("cond_value", fresh, |s| {
        let x = &s[0];
        let y = x.exp()?;
        let made = Tensor::zeros(&[2], DType::F32);
        let z = cond(&x.sum()?.gt(0.0)?, || y.add_(1.0f32).and_then(|_| made.add_(x)).map(|_| x.clone()), || Ok(x.clone()))?;
        Ok(vec![y, z, made])
    })?;
    // A cond inside a while body updating a captured tensor and the loop's own variable.
    matches_eager_twice("nested", fresh, |s| {
        let (x, outer) = (&s[0], &s[1]);
        let (i, y) = while_loop(
            |(i, _): &(Tensor, Tensor)| i.lt(4),
            |(i, y)| {
                cond(&i.lt(2)?, || outer.add_(&y), || outer.sub_(1.0f32))?;
                y.mul_(1.5f32)?;
                Ok((&i + 1, y))
            },
            (Tensor::scalar(0i32), x.mul(1.0)?),
        )?;
        Ok(vec![i, y])
    })?;
    // Updating data made inside the branch itself was always fine.
    matches_eager_twice("local", fresh, |s| {
        let x = &s[0];
        let z = cond(
            &x.sum()?.gt(0.0)?,
            || {
                let t = x.mul(2.0f32)?;
                t.add_(1.0f32)?;
                Ok(t)
            },
            || Ok(x.clone()),
        )?;
        Ok(vec![z])
    })?;
    Ok(())
}

#[test]
fn gradients_reach_through_an_outer_tensor_updated_in_a_branch() -> Result<()> {
    let x = f64s(&[1.0, -2.0], &[2]);
    let run = |w: &Tensor| -> Result<Vec<Tensor>> {
        let y = x.mul(w)?;
        cond(&w.sum()?.gt(0.0)?, || y.mul_(&y).map(|_| x.clone()), || y.add_(1.0).map(|_| x.clone()))?;
        y.sum()?.backward()?;
        Ok(vec![y])
    };
    for wv in [[0.5, 0.25], [-0.5, 0.25]] {
        let w_eager = f64s(&wv, &[2]).requires_grad_(true)?;
        let y_eager = run(&w_eager)?;
        let w = f64s(&wv, &[2]).requires_grad_(true)?;
        let f = ConcreteFunction::trace("grad_through_update", &[("w", &w)], || run(&w))?;
        let y = f.call(&[&w])?;
        assert_bits_eq(&y[0], &y_eager[0].detach());
        assert_bits_eq(&w.grad().expect("traced backward"), &w_eager.grad().expect("eager backward"));
        // d/dw sum((x w)^2) = 2 x^2 w; d/dw sum(x w + 1) = x.
        let want: Vec<f64> = if wv[0] + wv[1] > 0.0 { vec![2.0 * wv[0], 8.0 * wv[1]] } else { vec![1.0, -2.0] };
        tests::assert_values(&w.grad().unwrap(), &want);
    }
    Ok(())
}

#[test]
fn an_in_place_update_in_a_loop_condition_is_an_error() -> Result<()> {
    let x = f32s(&[1.0, 2.0], &[2]);
    let outer = f32s(&[10.0, 20.0], &[2]);
    let e = trace_err(&[("x", &x)], || {
        let y = while_loop(
            |y: &Tensor| {
                outer.add_(1.0f32)?;
                y.sum()?.lt(100.0f32)
            },
            |y| y.mul(2.0f32),
            x.clone(),
        )?;
        Ok(vec![y])
    });
    assert_control_flow_error(&e, "while_loop condition");
    assert_clean_after_error();
    assert_eq!((outer.to_vec::<f32>()?, outer.version()), (vec![10.0, 20.0], 0));
    Ok(())
}

#[test]
fn changing_gradient_state_inside_a_traced_branch_is_an_error() -> Result<()> {
    let x = f32s(&[1.0, 2.0], &[2]);
    let w = f32s(&[0.5, -0.5], &[2]).requires_grad_(true)?;
    // backward() from a branch-local loss into a captured parameter's .grad.
    let e = trace_err(&[("x", &x)], || {
        let z = cond(
            &x.sum()?.gt(0.0)?,
            || {
                x.mul(&w)?.sum()?.backward()?;
                Ok(x.clone())
            },
            || Ok(x.clone()),
        )?;
        Ok(vec![z])
    });
    // Inside the branch the captured parameter is a plain value (gradients reach it through
    // the cond node's own backward), so there is nothing for backward() to start from.
    assert!(matches!(e, Error::NoGradFn { op: "backward" }), "{e:?}");
    assert_clean_after_error();
    assert!(w.grad().is_none());
    // zero_grad() on it inside a branch: eagerly it happens only if the branch is taken.
    w.mul(&x)?.sum()?.backward()?;
    let e = trace_err(&[("x", &x)], || {
        let z = cond(
            &x.sum()?.gt(0.0)?,
            || {
                w.zero_grad()?;
                Ok(x.clone())
            },
            || Ok(x.clone()),
        )?;
        Ok(vec![z])
    });
    assert_control_flow_error(&e, "zero_grad");
    assert_clean_after_error();
    tests::assert_values(&w.grad().expect("grad kept"), &[1.0, 2.0]);
    Ok(())
}

#[test]
fn an_error_inside_a_nested_body_leaves_no_trace_behind() -> Result<()> {
    let x = f32s(&[1.0, 2.0], &[2]);
    // An error deep inside: a mismatched op in a cond inside a while body.
    let e = trace_err(&[("x", &x)], || {
        let (_, y) = while_loop(
            |(i, _): &(Tensor, Tensor)| i.lt(3),
            |(i, y)| {
                let y = cond(&y.sum()?.gt(0.0)?, || y.add(&Tensor::zeros(&[3], DType::F32)), || Ok(y.clone()))?;
                Ok((&i + 1, y))
            },
            (Tensor::scalar(0i32), x.clone()),
        )?;
        Ok(vec![y])
    });
    assert!(matches!(e, Error::Broadcast { .. }), "{e:?}");
    assert_clean_after_error();
    // A symbolic tensor kept from a branch's trace and used after it ended.
    let kept = std::cell::RefCell::new(None);
    let e = trace_err(&[("x", &x)], || {
        let y = cond(
            &x.sum()?.gt(0.0)?,
            || {
                let t = x.exp()?;
                *kept.borrow_mut() = Some(t.clone());
                Ok(t)
            },
            || Ok(x.clone()),
        )?;
        let leaked = kept.borrow().clone().expect("kept");
        Ok(vec![y.add(&leaked)?])
    });
    assert!(matches!(e, Error::LeakedTracer { .. }), "{e:?}");
    assert_clean_after_error();
    // A panic deep inside unwinds every nested trace.
    let panicked = std::panic::catch_unwind(|| {
        let _ = ConcreteFunction::trace("panics", &[("x", &x)], || {
            let (_, y) = while_loop(
                |(i, _): &(Tensor, Tensor)| i.lt(3),
                |(i, y)| {
                    let y = cond(&y.sum()?.gt(0.0)?, || -> Result<Tensor> { panic!("inside a branch") }, || Ok(y.clone()))?;
                    Ok((&i + 1, y))
                },
                (Tensor::scalar(0i32), x.clone()),
            )?;
            Ok(vec![y])
        });
    });
    assert!(panicked.is_err());
    assert_clean_after_error();
    Ok(())
}

// ------------------------------------------------------------------ 7. text and DOT forms

#[test]
fn the_text_and_dot_forms_show_control_flow_with_its_subgraphs() -> Result<()> {
    let x = f32s(&[0.2, -0.9, 0.4, -0.3], &[4]);
    let n = Tensor::scalar(3i32);
    let f = ConcreteFunction::trace("nested", &[("x", &x), ("n", &n)], || nested(&x, &n))?;
    let text = f.traced_graph().to_text();
    for part in [
        "graph nested(x: f32[4], n: i32[])",
        "= while(",
        "cond: graph while_cond(",
        "body: graph while_body(",
        "= cond(",
        "then: graph then(",
        "else: graph else(",
        "= tanh(",
        "= exp(",
    ] {
        assert!(text.contains(part), "missing {part:?} in\n{text}");
    }
    // Nesting indents: the branches sit deeper than the loop body.
    let indent = |needle: &str| text.lines().find(|l| l.contains(needle)).map(|l| l.len() - l.trim_start().len()).expect("line");
    assert!(indent("then: graph then(") > indent("body: graph while_body("), "\n{text}");
    assert!(f.to_text().contains("while("), "{}", f.to_text());

    let dot = f.traced_graph().to_dot();
    for part in [
        "digraph \"nested\"",
        "label=\"while",
        "label=\"cond",
        "subgraph cluster_n",
        "label=\"body\"",
        "label=\"then\"",
        "label=\"else\"",
        "tanh",
        "exp",
    ] {
        assert!(dot.contains(part), "missing {part:?} in\n{dot}");
    }
    assert_eq!(dot.matches('{').count(), dot.matches('}').count(), "balanced braces in\n{dot}");
    assert_eq!(dot.matches("subgraph cluster_").count(), 4, "{dot}");
    Ok(())
}

// --------------------------------------------------------------------------- 8. validation

/// A traced graph with a cond inside a while, and a copy with `break_it` applied to the
/// while body's cond.
fn broken_nested(break_it: impl Fn(&mut Graph, &mut Graph)) -> Result<(Graph, Graph)> {
    let x = f32s(&[0.2, -0.9, 0.4, -0.3], &[4]);
    let n = Tensor::scalar(3i32);
    let f = ConcreteFunction::trace("nested", &[("x", &x), ("n", &n)], || nested(&x, &n))?;
    let good = f.traced_graph().clone();
    let mut bad = good.clone();
    for node in &mut bad.nodes {
        if let NodeKind::While { body, .. } = &mut node.kind {
            let mut b = (**body).clone();
            for inner in &mut b.nodes {
                if let NodeKind::Cond { then, other } = &mut inner.kind {
                    let (mut t, mut o) = ((**then).clone(), (**other).clone());
                    break_it(&mut t, &mut o);
                    *then = Arc::new(t);
                    *other = Arc::new(o);
                }
            }
            *body = Arc::new(b);
        }
    }
    Ok((good, bad))
}

#[test]
fn the_validator_checks_subgraphs_recursively() -> Result<()> {
    let (good, bad) = broken_nested(|_, _| {})?;
    assert_eq!(validate(&good), Ok(()));
    assert_eq!(validate(&bad), Ok(()));

    // An op inside the innermost branch that says it gives the wrong type.
    let (_, bad) = broken_nested(|t, _| {
        let node = t.nodes.iter().find(|n| n.kind_name() == "tanh").expect("tanh in then").clone();
        t.values[node.outputs[0]].dtype = DType::F64;
    })?;
    let e = validate(&bad).expect_err("a wrong type deep inside").to_string();
    assert!(e.contains("tanh") && e.contains("then"), "{e}");

    // A branch reading a parameter its node does not pass.
    let (_, bad) = broken_nested(|_, o| o.num_params += 1)?;
    let e = validate(&bad).expect_err("a parameter count mismatch").to_string();
    assert!(e.contains("parameter"), "{e}");

    // A branch whose output type differs from the node's.
    let (_, bad) = broken_nested(|_, o| {
        let out = o.outputs[0];
        o.values[out].shape = Shape::new(&[5]);
    })?;
    assert!(validate(&bad).is_err());

    // A branch using a value it never defines.
    let (_, bad) = broken_nested(|t, _| t.outputs[0] = t.values.len() + 3)?;
    let e = validate(&bad).expect_err("an undefined output").to_string();
    assert!(e.contains("never defined") || e.contains("does not exist"), "{e}");

    // A loop body whose outputs do not match the loop variables.
    let x = f32s(&[1.0, 2.0], &[2]);
    let f = ConcreteFunction::trace("loop", &[("x", &x)], || Ok(vec![while_loop(|y: &Tensor| y.sum()?.lt(10.0), |y| y.mul(2.0f32), x.clone())?]))?;
    let mut bad = f.traced_graph().clone();
    assert_eq!(validate(&bad), Ok(()));
    for node in &mut bad.nodes {
        if let NodeKind::While { body, .. } = &mut node.kind {
            let mut b = (**body).clone();
            b.outputs.push(b.outputs[0]);
            *body = Arc::new(b);
        }
    }
    assert!(validate(&bad).is_err(), "{}", bad.to_text());
    Ok(())
}
