//! `if` and `while` with tensor conditions in `#[graph_fn]` bodies: traced into one
//! `Cond`/`While` node carrying the assigned variables, plain Rust with `bool` conditions, the
//! same bits eagerly and from the graph, and the trace-time errors.

use std::sync::Mutex;
use tensor_core::function::{lookup, run_functions_eagerly};
use tensor_core::ops::CmpOp;
use tensor_core::prelude::*;
use tests::assert_bits_eq;

/// `run_functions_eagerly` is process-wide: the tests of this file take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` with every graph function running eagerly (the reference run).
fn eagerly<T>(f: impl FnOnce() -> T) -> T {
    run_functions_eagerly(true);
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    run_functions_eagerly(false);
    out.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn i32s(a: i32, b: i32) -> (Tensor, Tensor) {
    (Tensor::scalar(a), Tensor::scalar(b))
}

fn pair(t: &(Tensor, Tensor)) -> (i32, i32) {
    (t.0.item::<i32>().unwrap(), t.1.item::<i32>().unwrap())
}

/// The seed's counter, written as plain Rust.
#[graph_fn]
fn counter(first: &Tensor, second: &Tensor) -> (Tensor, Tensor) {
    let mut first = first.clone();
    let mut second = second.clone();
    while first.lt(&second).unwrap() {
        first = &first + 2;
        second = &second + 1;
    }
    (first, second)
}

/// The same body without the macro: the eager reference.
fn counter_eager(first: &Tensor, second: &Tensor) -> (Tensor, Tensor) {
    let mut first = first.clone();
    let mut second = second.clone();
    while first.lt(&second).unwrap().item::<bool>().unwrap() {
        first = &first + 2;
        second = &second + 1;
    }
    (first, second)
}

#[test]
fn the_seed_counter_is_one_while_node_and_reuses_its_trace() {
    let _serial = serial();
    let (a, b) = i32s(0, 10);
    assert_eq!(pair(&counter_eager(&a, &b)), (20, 20));
    assert_eq!(pair(&counter(&a, &b)), (20, 20));
    let f = lookup("counter").expect("registered");
    assert_eq!(f.trace_count(), 1);
    let concrete = &f.concrete_functions()[0];
    assert_eq!(concrete.traced_graph().count_op("while"), 1, "{}", concrete.to_text());
    // Other start values: same trace, right answer.
    let (a, b) = i32s(0, 3);
    assert_eq!(pair(&counter(&a, &b)), (6, 6));
    assert_eq!(pair(&counter(&Tensor::scalar(5), &Tensor::scalar(1))), (5, 1), "zero iterations");
    assert_eq!(f.trace_count(), 1);
}

#[test]
fn the_counter_runs_as_plain_rust_under_run_functions_eagerly() {
    let _serial = serial();
    let out = eagerly(|| {
        assert!(tensor_core::executing_eagerly());
        counter(&Tensor::scalar(0), &Tensor::scalar(10))
    });
    assert_eq!(pair(&out), (20, 20));
}

/// Halves `x` until its norm is under `limit`, counting the halvings; then, per step, a
/// nested tensor `if` adds a different amount when the count is odd.
#[graph_fn]
fn shrink(x: &Tensor, limit: &Tensor) -> (Tensor, Tensor) {
    let mut x = x.clone();
    let mut steps = Tensor::scalar(0i32);
    let mut total = Tensor::scalar(0.0f32);
    while (&x * &x).sum().unwrap().gt(limit).unwrap() {
        x = &x * 0.5;
        steps = &steps + 1;
        let odd = (&steps - (&steps / 2) * 2).eq(1).unwrap();
        if odd {
            total = &total + (&x * &x).sum().unwrap();
        } else {
            total = &total - 0.25;
        }
    }
    (x, Tensor::stack(&[&steps.cast(DType::F32).unwrap(), &total], 0).unwrap())
}

#[test]
fn a_value_dependent_trip_count_with_a_nested_if_is_one_trace_and_matches_eager() {
    let _serial = serial();
    let cases = [(vec![3.0f32, 4.0], 1.0f32), (vec![0.1, 0.2], 1.0), (vec![30.0, -40.0], 0.5), (vec![1.5, 2.5], 2.0)];
    for (x, limit) in &cases {
        let (x, limit) = (f32s(x, &[2]), Tensor::scalar(*limit));
        let graph = shrink(&x, &limit);
        let eager = eagerly(|| shrink(&x, &limit));
        assert_bits_eq(&graph.0, &eager.0);
        assert_bits_eq(&graph.1, &eager.1);
    }
    // Hand-computed: |(3,4)|^2 = 25 > 1 -> 6.25 -> 1.5625 -> 0.390625: three halvings.
    let (x, stats) = shrink(&f32s(&[3.0, 4.0], &[2]), &Tensor::scalar(1.0f32));
    assert_eq!(x.to_vec::<f32>().unwrap(), [0.375, 0.5]);
    // steps 1 (odd): +6.25; 2 (even): -0.25; 3 (odd): +0.390625.
    assert_eq!(stats.to_vec::<f32>().unwrap(), [3.0, 6.25 - 0.25 + 0.390625]);
    let f = lookup("shrink").unwrap();
    assert_eq!(f.trace_count(), 1, "{:?}", f.retrace_reasons());
    let graph = f.concrete_functions()[0].traced_graph().to_text();
    assert_eq!(f.concrete_functions()[0].traced_graph().count_op("while"), 1, "{graph}");
    assert!(graph.contains("cond"), "the nested if is a Cond inside the While's body:\n{graph}");
}

/// An `if` used as a value, an `else if` chain, and an `if` without `else`.
#[graph_fn]
fn piecewise(x: &Tensor) -> Tensor {
    let s = x.sum().unwrap();
    let mut y = x.clone();
    if s.lt(0.0).unwrap() {
        y = -&y;
    }
    let scale = if s.gt(10.0).unwrap() {
        Tensor::scalar(0.1f32)
    } else if s.gt(1.0).unwrap() {
        Tensor::scalar(1.0f32)
    } else {
        Tensor::scalar(10.0f32)
    };
    &y * &scale
}

#[test]
fn if_values_else_if_chains_and_if_without_else_pick_by_run_time_values() {
    let _serial = serial();
    let cases: [(&[f32], &[f32]); 4] =
        [(&[5.0, 6.0], &[0.5, 0.6]), (&[1.0, 2.0], &[1.0, 2.0]), (&[0.25, 0.5], &[2.5, 5.0]), (&[-1.0, -2.0], &[10.0, 20.0])];
    for (x, want) in cases {
        let x = f32s(x, &[2]);
        let graph = piecewise(&x);
        assert_eq!(graph.to_vec::<f32>().unwrap(), want);
        assert_bits_eq(&graph, &eagerly(|| piecewise(&x)));
    }
    let f = lookup("piecewise").unwrap();
    assert_eq!(f.trace_count(), 1);
    assert_eq!(f.concrete_functions()[0].traced_graph().count_op("cond"), 2, "{}", f.concrete_functions()[0].to_text());
}

/// `bool` conditions keep their plain meaning, and may carry any Rust type.
#[graph_fn]
fn repeat_add(x: &Tensor, times: usize, double: bool) -> Tensor {
    let mut y = x.clone();
    let mut n = 0;
    let mut again = n < times;
    while again {
        y = &y + 1.0;
        n += 1;
        again = n < times;
    }
    if double {
        y = &y * 2.0;
    }
    y
}

#[test]
fn bool_conditions_stay_plain_rust_and_unroll_into_the_trace() {
    let _serial = serial();
    let x = f32s(&[1.0, 2.0], &[2]);
    assert_eq!(repeat_add(&x, 3, false).to_vec::<f32>().unwrap(), [4.0, 5.0]);
    assert_eq!(repeat_add(&x, 2, true).to_vec::<f32>().unwrap(), [6.0, 8.0]);
    let f = lookup("repeat_add").unwrap();
    let text = f.concrete_functions()[0].traced_graph().to_text();
    assert_eq!(f.concrete_functions()[0].traced_graph().count_op("while"), 0, "{text}");
    assert_eq!(f.concrete_functions()[0].traced_graph().count_op("cond"), 0, "{text}");
}

/// A training step with a tensor `while` and a tensor `if`: gradients flow through both.
#[graph_fn]
fn loss_and_grad(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    w.zero_grad()?;
    let mut h = x * w;
    while (&h * &h).sum()?.lt(50.0)? {
        h = &h * &h * 0.5 + &h + w;
    }
    let mut loss = (&h * &h).sum()?;
    if loss.gt(100.0)? {
        loss = &loss * 0.01;
    }
    loss.backward()?;
    Ok(loss)
}

#[test]
fn gradients_through_a_tensor_while_and_if_match_eager_bits_and_finite_differences() -> Result<()> {
    let _serial = serial();
    for (wv, xv) in [([0.5f32, -0.25], [1.0f32, 2.0]), ([0.1, 0.2], [0.3, 0.4]), ([1.0, 1.0], [2.0, 1.5])] {
        let x = f32s(&xv, &[2]);
        let w = f32s(&wv, &[2]).requires_grad_(true)?;
        let loss = loss_and_grad(&w, &x)?;
        let grad = w.grad().expect("the traced backward writes w.grad");
        let w_eager = f32s(&wv, &[2]).requires_grad_(true)?;
        let loss_eager = eagerly(|| loss_and_grad(&w_eager, &x))?;
        assert_bits_eq(&loss, &loss_eager);
        assert_bits_eq(&grad, &w_eager.grad().unwrap());
        // Central differences in f64 on the same program (the trip count is locally constant).
        let g = grad.to_vec::<f32>()?;
        for i in 0..2 {
            let eps = 1e-3;
            let at = |d: f64| -> f64 {
                let mut wd: Vec<f64> = wv.iter().map(|&v| v as f64).collect();
                wd[i] += d;
                let xd: Vec<f64> = xv.iter().map(|&v| v as f64).collect();
                reference_loss(&wd, &xd)
            };
            let fd = (at(eps) - at(-eps)) / (2.0 * eps);
            assert!((fd - g[i] as f64).abs() <= 2e-3 * fd.abs().max(1.0), "d loss / d w[{i}]: {fd} vs {}", g[i]);
        }
    }
    assert_eq!(lookup("loss_and_grad").unwrap().trace_count(), 1);
    Ok(())
}

/// `loss_and_grad`'s loss, in f64 plain Rust.
fn reference_loss(w: &[f64], x: &[f64]) -> f64 {
    let mut h: Vec<f64> = x.iter().zip(w).map(|(a, b)| a * b).collect();
    let norm = |h: &[f64]| h.iter().map(|v| v * v).sum::<f64>();
    while norm(&h) < 50.0 {
        h = h.iter().zip(w).map(|(v, wi)| v * v * 0.5 + v + wi).collect();
    }
    let loss = norm(&h);
    if loss > 100.0 {
        loss * 0.01
    } else {
        loss
    }
}

/// A bool tensor made outside the function is a capture: the branch is chosen by its value at
/// each call, not frozen at trace time.
#[test]
fn a_captured_condition_is_read_at_every_call() -> Result<()> {
    let _serial = serial();
    let gate = Tensor::scalar(true);
    let x = f32s(&[1.0, 2.0], &[2]);
    let f = tensor_core::function::ConcreteFunction::trace("gated", &[("x", &x)], || {
        let mut y = x.clone();
        let y2 = tensor_core::control::cond(&gate, || Ok(&y * 2.0), || Ok(&y + 100.0))?;
        y = y2;
        Ok(vec![y])
    })?;
    assert_eq!(f.traced_graph().count_op("cond"), 1, "{}", f.to_text());
    assert_eq!(f.call(&[&x])?[0].to_vec::<f32>()?, [2.0, 4.0]);
    gate.assign_(&Tensor::scalar(false))?;
    assert_eq!(f.call(&[&x])?[0].to_vec::<f32>()?, [101.0, 102.0]);
    Ok(())
}

// ------------------------------------------------------------------- nested conditions

/// Three levels of tensor `if`s with `else if` chains, carrying two variables and giving a
/// value at every level.
#[graph_fn]
fn nested_ifs(x: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
    let mut a = x.clone();
    let mut b = y.clone();
    let c = if a.gt(0.0).unwrap() {
        a = &a * 2.0;
        if b.gt(&a).unwrap() {
            b = &b - &a;
            if b.gt(10.0).unwrap() {
                a = &a + 100.0;
                Tensor::scalar(1.0f32)
            } else if b.gt(5.0).unwrap() {
                Tensor::scalar(2.0f32)
            } else {
                b = -&b;
                Tensor::scalar(3.0f32)
            }
        } else if b.lt(-1.0).unwrap() {
            a = &a - &b;
            Tensor::scalar(4.0f32)
        } else {
            Tensor::scalar(5.0f32)
        }
    } else {
        b = &b * 0.5;
        Tensor::scalar(6.0f32)
    };
    (&a + &c, &b * &c)
}

/// `nested_ifs` in plain f32 Rust.
fn nested_ifs_reference(x: f32, y: f32) -> (f32, f32) {
    let (mut a, mut b) = (x, y);
    let c = if a > 0.0 {
        a *= 2.0;
        if b > a {
            b -= a;
            if b > 10.0 {
                a += 100.0;
                1.0
            } else if b > 5.0 {
                2.0
            } else {
                b = -b;
                3.0
            }
        } else if b < -1.0 {
            a -= b;
            4.0
        } else {
            5.0
        }
    } else {
        b *= 0.5;
        6.0
    };
    (a + c, b * c)
}

#[test]
fn nested_ifs_take_every_path_with_one_trace_and_match_eager_and_plain_rust() {
    let _serial = serial();
    // One case per path: 1, 2, 3, 4, 5, 6.
    let cases = [(1.0f32, 20.0f32), (1.0, 9.0), (1.0, 4.0), (3.0, -4.0), (3.0, 2.0), (-1.0, 3.0)];
    for (x, y) in cases {
        let (xt, yt) = (Tensor::scalar(x), Tensor::scalar(y));
        let graph = nested_ifs(&xt, &yt);
        let eager = eagerly(|| nested_ifs(&xt, &yt));
        assert_bits_eq(&graph.0, &eager.0);
        assert_bits_eq(&graph.1, &eager.1);
        let want = nested_ifs_reference(x, y);
        assert_eq!((graph.0.item::<f32>().unwrap(), graph.1.item::<f32>().unwrap()), want, "x = {x}, y = {y}");
    }
    let f = lookup("nested_ifs").unwrap();
    assert_eq!(f.trace_count(), 1, "{:?}", f.retrace_reasons());
    let concrete = &f.concrete_functions()[0];
    let graph = concrete.traced_graph();
    assert_eq!(graph.count_op("cond"), 1, "the outer if is one node, the others nest in it:\n{}", graph.to_text());
    assert_eq!(graph.to_text().matches("= cond(").count(), 5, "five ifs in all:\n{}", graph.to_text());
}

/// A `while` in a `while` in a tensor `if`, and a countdown in its `else`.
#[graph_fn]
fn nested_loops(n: &Tensor) -> Tensor {
    let mut total = Tensor::scalar(0i64);
    let mut i = Tensor::scalar(0i64);
    if n.gt(0).unwrap() {
        while i.lt(n).unwrap() {
            let mut j = Tensor::scalar(0i64);
            while j.lt(&i).unwrap() {
                total = &total + &(&i * &j);
                j = &j + 1;
            }
            i = &i + 1;
        }
    } else {
        let mut k = n.clone();
        while k.lt(0).unwrap() {
            total = &total - 1;
            k = &k + 1;
        }
    }
    total
}

#[test]
fn nested_loops_match_eager_and_plain_rust_with_one_trace() {
    let _serial = serial();
    for n in [-3i64, 0, 1, 2, 4, 7] {
        let nt = Tensor::scalar(n);
        let graph = nested_loops(&nt);
        assert_bits_eq(&graph, &eagerly(|| nested_loops(&nt)));
        let want: i64 = if n > 0 { (0..n).map(|i| (0..i).map(|j| i * j).sum::<i64>()).sum() } else { n };
        assert_eq!(graph.item::<i64>().unwrap(), want, "n = {n}");
    }
    let f = lookup("nested_loops").unwrap();
    assert_eq!(f.trace_count(), 1, "{:?}", f.retrace_reasons());
    let text = f.concrete_functions()[0].traced_graph().to_text();
    assert_eq!(text.matches("= while(").count(), 3, "three loops, nested in the cond:\n{text}");
}

// ------------------------------------------------------------ fallible conditions

/// A `Result` as a `while` condition, a `?` on an `if` condition, a variable holding a
/// `Result` as a condition. (`compare` returns `Result<Tensor>`, as the comparison methods
/// `lt`, `gt`, ... will.)
#[graph_fn]
fn fallible_conditions(x: &Tensor, limit: &Tensor) -> Result<Tensor> {
    let mut x = x.clone();
    let mut steps = Tensor::scalar(0.0f32);
    while x.compare(CmpOp::Lt, limit) {
        x = &x * 2.0;
        steps = &steps + 1.0;
    }
    if x.compare(CmpOp::Gt, &(limit * 1.5))? {
        x = &x - limit;
    }
    let over = x.compare(CmpOp::Gt, limit);
    if over {
        steps = -&steps;
    }
    Ok(&x + &steps)
}

/// The same failing comparison in a function that does not return `Result`.
#[graph_fn]
fn fallible_without_result(x: &Tensor, limit: &Tensor) -> Tensor {
    let mut y = x.clone();
    if y.compare(CmpOp::Gt, limit) {
        y = &y * 2.0;
    }
    y
}

#[test]
fn fallible_comparisons_are_conditions_and_their_errors_leave_the_body() {
    let _serial = serial();
    for (x, limit) in [(1.0f32, 10.0f32), (3.0, 10.0), (20.0, 10.0), (0.5, 0.75)] {
        let (xt, lt) = (Tensor::scalar(x), Tensor::scalar(limit));
        let graph = fallible_conditions(&xt, &lt).unwrap();
        assert_bits_eq(&graph, &eagerly(|| fallible_conditions(&xt, &lt)).unwrap());
        let (mut xr, mut steps) = (x, 0.0f32);
        while xr < limit {
            xr *= 2.0;
            steps += 1.0;
        }
        if xr > limit * 1.5 {
            xr -= limit;
        }
        if xr > limit {
            steps = -steps;
        }
        assert_eq!(graph.item::<f32>().unwrap(), xr + steps, "x = {x}, limit = {limit}");
    }
    assert_eq!(lookup("fallible_conditions").unwrap().trace_count(), 1);

    // A comparison of mismatched shapes fails, in the graph and eagerly alike.
    let (x, limit) = (f32s(&[1.0, 2.0], &[2]), f32s(&[1.0, 2.0, 3.0], &[3]));
    let graph = fallible_conditions(&x, &limit).unwrap_err();
    let eager = eagerly(|| fallible_conditions(&x, &limit)).unwrap_err();
    assert!(matches!(graph, Error::ShapeMismatch { .. } | Error::Broadcast { .. }), "{graph}");
    assert_eq!(graph.to_string(), eager.to_string());
    // Without a `Result` to return, the error is a panic with its message.
    let panic = std::panic::catch_unwind(|| fallible_without_result(&x, &limit)).unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert_eq!(msg, x.compare(CmpOp::Gt, &limit).unwrap_err().to_string());
    assert!(tensor_core::executing_eagerly(), "no trace is left behind");
}

/// `?` in tensor-conditioned code: plain Rust eagerly; while tracing, an error fails the call.
#[graph_fn]
fn settle(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let mut x = x.clone();
    while x.gt(1.0)? {
        x = x.mul(w)?;
    }
    if x.lt(0.7)? {
        x = x.add(w)?;
    }
    Ok(x)
}

#[test]
fn a_question_mark_in_tensor_conditioned_code_passes_its_error_to_the_caller() {
    let _serial = serial();
    let (x, w) = (Tensor::scalar(10.0f32), Tensor::scalar(0.5f32));
    let graph = settle(&x, &w).unwrap();
    // 10 -> 5 -> 2.5 -> 1.25 -> 0.625, then + 0.5.
    assert_eq!(graph.item::<f32>().unwrap(), 1.125);
    assert_bits_eq(&graph, &eagerly(|| settle(&x, &w)).unwrap());
    // A dtype mismatch in the loop body: the same Err from the graph call and eagerly.
    let w64 = Tensor::scalar(0.5f64);
    let graph = settle(&x, &w64).unwrap_err();
    let eager = eagerly(|| settle(&x, &w64)).unwrap_err();
    assert!(matches!(graph, Error::OperandDTypes { .. }), "{graph}");
    assert_eq!(graph.to_string(), eager.to_string());
    // The failed trace left nothing behind: the thread is eager, and the good signature still
    // runs from its one trace.
    assert!(tensor_core::executing_eagerly());
    assert_eq!(settle(&Tensor::scalar(3.0f32), &w).unwrap().item::<f32>().unwrap(), 0.75);
    assert_eq!(lookup("settle").unwrap().trace_count(), 1);
}

// ------------------------------------------------------------ arguments as conditions

#[graph_fn]
fn gated(x: &Tensor, flag: &Tensor, go: &Tensor) -> Result<Tensor> {
    let mut y = if flag { x * 2.0 } else { x - 1.0 };
    let mut go = go.clone();
    while go {
        y = &y * 0.5;
        go = y.compare(CmpOp::Gt, 1.0)?;
    }
    Ok(y)
}

#[derive(GraphArg)]
struct Gate {
    open: Tensor,
    limit: Tensor,
}

impl Gate {
    fn is_open(&self) -> Tensor {
        self.open.clone()
    }

    fn below(&self, x: &Tensor) -> Result<Tensor> {
        x.compare(CmpOp::Lt, &self.limit)
    }

    #[graph_fn]
    fn apply(&self, x: &Tensor) -> Tensor {
        let mut y = x.clone();
        if self.open {
            y = &y * 2.0;
        }
        while self.below(&y) {
            y = &y + 1.0;
        }
        if self.is_open() {
            y = &y + 0.5;
        }
        y
    }
}

#[test]
fn arguments_fields_and_methods_are_conditions_read_at_every_call() {
    let _serial = serial();
    let x = Tensor::scalar(4.0f32);
    // Distinct tensors for the two flags: one passed twice would be keyed as an alias.
    for (flag, go, want) in [(true, true, 1.0f32), (true, false, 8.0), (false, true, 0.75), (false, false, 3.0)] {
        let (flag, go) = (Tensor::scalar(flag), Tensor::scalar(go));
        let graph = gated(&x, &flag, &go).unwrap();
        assert_eq!(graph.item::<f32>().unwrap(), want);
        assert_bits_eq(&graph, &eagerly(|| gated(&x, &flag, &go)).unwrap());
    }
    let (yes, no) = (Tensor::scalar(true), Tensor::scalar(false));
    assert_eq!(lookup("gated").unwrap().trace_count(), 1);
    for (open, limit, want) in [(&yes, 10.0f32, 10.5f32), (&no, 10.0, 10.0), (&yes, 3.0, 8.5), (&no, 2.0, 4.0)] {
        let gate = Gate { open: open.clone(), limit: Tensor::scalar(limit) };
        let graph = gate.apply(&x);
        assert_eq!(graph.item::<f32>().unwrap(), want, "open = {open}, limit = {limit}");
        assert_bits_eq(&graph, &eagerly(|| gate.apply(&x)));
    }
    assert_eq!(lookup("Gate::apply").unwrap().trace_count(), 1);
}

// --------------------------------------------------------------------------- errors

#[graph_fn]
fn counts_in_a_rust_integer(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    let mut x = x.clone();
    let mut steps = 0;
    while x.lt(y)? {
        x = &x + 1;
        steps += 1;
    }
    Ok(&x * steps)
}

#[graph_fn]
fn grows_its_loop_variable(x: &Tensor) -> Result<Tensor> {
    let mut x = x.clone();
    while x.sum()?.lt(100.0)? {
        x = Tensor::concat(&[&x, &x], 0).unwrap();
    }
    Ok(x)
}

#[graph_fn]
fn branches_disagree(x: &Tensor) -> Result<Tensor> {
    let mut y = x.clone();
    if x.sum()?.gt(0.0)? {
        y = x.sum()?;
    }
    Ok(y)
}

#[graph_fn]
fn float_condition(x: &Tensor) -> Result<Tensor> {
    let mut y = x.clone();
    let c = x.sum()?;
    if c {
        y = &y + 1.0;
    }
    Ok(y)
}

#[test]
fn what_a_graph_cannot_carry_is_an_err_at_trace_time_naming_it() {
    let _serial = serial();
    let x = f32s(&[1.0, 2.0], &[2]);
    let e = counts_in_a_rust_integer(&Tensor::scalar(0i32), &Tensor::scalar(3i32)).unwrap_err().to_string();
    assert!(e.contains("`steps`") && e.contains("i32") && e.contains("not a Tensor"), "{e}");
    // The same code runs eagerly, where the Rust integer is fine.
    let eager = eagerly(|| counts_in_a_rust_integer(&Tensor::scalar(0i32), &Tensor::scalar(3i32))).unwrap();
    assert_eq!(eager.item::<i32>().unwrap(), 9);

    let e = grows_its_loop_variable(&x).unwrap_err();
    assert!(matches!(&e, Error::LoopVarChanged { var, old, new } if var == "`x`" && old == "f32[2]" && new == "f32[4]"), "{e}");

    let e = branches_disagree(&x).unwrap_err();
    assert!(matches!(&e, Error::BranchMismatch { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("`y`") && msg.contains("f32[]") && msg.contains("f32[2]"), "{msg}");

    let e = float_condition(&x).unwrap_err();
    assert!(matches!(&e, Error::UnsupportedDType { op: "if", .. }), "{e}");

    // Nothing half-made: the thread is eager again and traces the counter normally.
    assert!(tensor_core::executing_eagerly());
    assert_eq!(pair(&counter(&Tensor::scalar(0), &Tensor::scalar(10))), (20, 20));
}

// ------------------------------------------------- state changed under a tensor condition

/// A captured counter: a tensor made outside every function, read and updated by reference.
static HITS: std::sync::LazyLock<Tensor> = std::sync::LazyLock::new(|| Tensor::scalar(0.0f32));

/// Counts calls with a positive sum in a captured tensor, and the others in an argument.
#[graph_fn]
fn count_signs(x: &Tensor, misses: &Tensor) -> Result<Tensor> {
    if x.sum()?.gt(0.0)? {
        HITS.add_(1.0f32)?;
    } else {
        misses.add_(1.0f32)?;
    }
    Ok(x * 2.0)
}

#[test]
fn a_counter_updated_under_a_tensor_if_holds_what_eager_leaves_at_every_call() -> Result<()> {
    let _serial = serial();
    let misses = Tensor::scalar(0.0f32);
    let (pos, neg) = (f32s(&[1.0, 2.0], &[2]), f32s(&[-1.0, -2.0], &[2]));
    let calls = [&pos, &pos, &neg, &pos, &neg];
    HITS.assign_(&Tensor::scalar(0.0f32))?;
    for (n, x) in calls.iter().enumerate() {
        let (hits_before, misses_before) = (HITS.version(), misses.version());
        tests::assert_values(&count_signs(x, &misses)?, &tests::as_f64(&(*x * 2.0)));
        // Each call reads what the previous one wrote: the counts so far.
        let hits = calls[..=n].iter().filter(|x| x.sum().unwrap().item::<f32>().unwrap() > 0.0).count();
        assert_eq!((HITS.item::<f32>()?, misses.item::<f32>()?), (hits as f32, (n + 1 - hits) as f32), "after call {n}");
        // A graph call writes each updated tensor once; the branch not taken writes back the
        // value it passed through, as a state write does for any updated slot.
        assert!(HITS.version() > hits_before || misses.version() > misses_before);
    }
    let f = lookup("count_signs").unwrap();
    assert_eq!(f.trace_count(), 1);
    let concrete = &f.concrete_functions()[0];
    assert_eq!(concrete.traced_graph().count_op("cond"), 1, "{}", concrete.to_text());
    // Eagerly (run_functions_eagerly), from the same start: the same bits in both counters.
    let (graph_hits, graph_misses) = (HITS.detach(), misses.detach());
    HITS.assign_(&Tensor::scalar(0.0f32))?;
    let misses_eager = Tensor::scalar(0.0f32);
    for x in calls {
        eagerly(|| count_signs(x, &misses_eager))?;
    }
    assert_bits_eq(&HITS, &graph_hits);
    assert_bits_eq(&misses_eager, &graph_misses);
    Ok(())
}

/// A running statistic updated `n` times in a tensor `while` (an exponential moving average),
/// with a step counted under a nested tensor `if`.
#[graph_fn]
fn running_mean(x: &Tensor, n: &Tensor, stat: &Tensor, big_steps: &Tensor) -> Result<Tensor> {
    let mut i = Tensor::scalar(0i32);
    while i.lt(n)? {
        stat.mul_(0.9f32)?;
        stat.add_(&(x * 0.1))?;
        if stat.sum()?.gt(1.0f32)? {
            big_steps.add_(1i32)?;
        }
        i = &i + 1;
    }
    stat.sum()
}

#[test]
fn a_running_statistic_updated_in_a_tensor_while_matches_eager_bits_over_repeated_calls() -> Result<()> {
    let _serial = serial();
    let x = f32s(&[0.7, 1.3, 2.9], &[3]);
    let fresh = || (f32s(&[0.0, 0.5, 1.0], &[3]), Tensor::scalar(0i32));
    let (stat, big) = fresh();
    let (stat_eager, big_eager) = fresh();
    for n in [3, 0, 1, 5, 2] {
        let n = Tensor::scalar(n);
        let sum = running_mean(&x, &n, &stat, &big)?;
        let sum_eager = eagerly(|| running_mean(&x, &n, &stat_eager, &big_eager))?;
        assert_bits_eq(&sum, &sum_eager);
        assert_bits_eq(&stat, &stat_eager);
        assert_bits_eq(&big, &big_eager);
    }
    // Plain Rust on the same numbers: the statistic after 11 steps, and how many had a sum above 1.
    let mut s = [0.0f32, 0.5, 1.0];
    let mut steps = 0;
    for _ in 0..11 {
        for (v, xv) in s.iter_mut().zip([0.7f32, 1.3, 2.9]) {
            *v = *v * 0.9 + xv * 0.1;
        }
        steps += i32::from(s.iter().sum::<f32>() > 1.0);
    }
    tests::assert_close(&stat, &s.map(f64::from), 1e-6);
    assert_eq!(big.item::<i32>()?, steps);
    let f = lookup("running_mean").unwrap();
    assert_eq!(f.trace_count(), 1);
    let text = f.concrete_functions()[0].to_text();
    assert_eq!(f.concrete_functions()[0].traced_graph().count_op("while"), 1, "{text}");
    Ok(())
}

/// Updating a leaf that requires grad is refused under a tensor condition as everywhere else,
/// and a failed call changes nothing; under `no_grad` it is an update like any other.
#[graph_fn]
fn nudge(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    if x.sum()?.gt(0.0)? {
        w.sub_(&(x * 0.5))?;
    }
    x.mul(w)
}

#[test]
fn a_leaf_that_requires_grad_is_not_updated_under_a_tensor_condition() -> Result<()> {
    let _serial = serial();
    let x = f32s(&[1.0, 2.0], &[2]);
    let w = f32s(&[0.5, -0.5], &[2]).requires_grad_(true)?;
    let eager = eagerly(|| nudge(&x, &w)).unwrap_err();
    let graph = nudge(&x, &w).unwrap_err();
    assert!(matches!(graph, Error::InPlaceOnLeaf { op: "sub_" }), "{graph:?}");
    assert_eq!(graph.to_string(), eager.to_string());
    assert_eq!((w.to_vec::<f32>()?, w.version()), (vec![0.5, -0.5], 0), "the failed calls changed nothing");
    let y = tensor_core::no_grad(|| nudge(&x, &w))?;
    let w_eager = f32s(&[0.5, -0.5], &[2]).requires_grad_(true)?;
    let y_eager = tensor_core::no_grad(|| eagerly(|| nudge(&x, &w_eager)))?;
    assert_bits_eq(&y, &y_eager);
    assert_bits_eq(&w, &w_eager);
    tests::assert_values(&w, &[0.0, -1.5]);
    Ok(())
}

/// A graph whose `Cond` and `While` carry state has the structure of any other: it exports,
/// loads, and the loaded function updates its arguments and its own copy of the captured
/// counter exactly as the traced one does.
#[test]
fn a_graph_carrying_state_through_control_flow_survives_export() -> Result<()> {
    let _serial = serial();
    let x = f32s(&[0.7, 1.3, 2.9], &[3]);
    let (stat, big) = (f32s(&[0.0, 0.5, 1.0], &[3]), Tensor::scalar(0i32));
    running_mean(&x, &Tensor::scalar(1), &stat, &big)?;
    let concrete = lookup("running_mean").unwrap().concrete_functions()[0].clone();
    let loaded = tensor_core::export::load_bytes(&concrete.export_bytes()?)?;
    let fresh = || (f32s(&[0.0, 0.5, 1.0], &[3]), Tensor::scalar(0i32));
    let ((stat_a, big_a), (stat_b, big_b)) = (fresh(), fresh());
    for n in [2, 0, 4] {
        let n = Tensor::scalar(n);
        let traced = running_mean(&x, &n, &stat_a, &big_a)?;
        let out = loaded.call(&[&x, &n, &stat_b, &big_b])?;
        assert_bits_eq(&out[0], &traced);
        assert_bits_eq(&stat_b, &stat_a);
        assert_bits_eq(&big_b, &big_a);
    }
    assert_eq!(big_a.item::<i32>()?, 6);
    Ok(())
}
