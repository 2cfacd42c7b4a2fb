//! What `#[graph_fn]` accepts and returns: every kind of `GraphArg` (tensors and collections
//! of them as leaves, Rust scalars and strings by value), `#[derive(GraphArg)]` structs and
//! enums with static and skipped fields, generic functions and methods, every `GraphOutput`,
//! `Result` with the caller's error type, and a signature callers cannot tell from the
//! original.

use tensor_core::function::{lookup, GraphFunction};
use tensor_core::optim::Optimizer;
use tensor_core::prelude::*;
use tensor_core::Scalar;

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).expect("data matches shape")
}

fn function(name: &str) -> &'static GraphFunction {
    lookup(name).unwrap_or_else(|| panic!("`{name}` is registered once called"))
}

// ----------------------------------------------------------------- Rust scalars and strings

#[graph_fn]
fn probe<T: GraphArg>(x: T) -> Tensor {
    let _ = x;
    Tensor::scalar(0i32)
}

/// Calls `probe` with `a`, `a` again and `b`: the first and third trace, the second does not.
macro_rules! keyed_by_value {
    ($($a:expr, $b:expr;)*) => {{
        let mut traces = function_traces();
        $(
            probe($a);
            assert_eq!(function_traces(), traces + 1, "{} traces", stringify!($a));
            probe($a);
            assert_eq!(function_traces(), traces + 1, "{} again is cached", stringify!($a));
            probe($b);
            traces += 2;
            assert_eq!(function_traces(), traces, "{} traces", stringify!($b));
        )*
    }};
}

fn function_traces() -> usize {
    lookup("probe").map_or(0, |f| f.trace_count())
}

/// Every Rust scalar type keys by value (f32 and f64 by their bits), as do `&str` and
/// `String`; each type is also part of a generic function's key.
#[test]
fn rust_scalars_and_strings_key_by_value() {
    keyed_by_value! {
        true, false;
        1i8, 2i8; 1i16, 2i16; 1i32, 2i32; 1i64, 2i64; 1i128, -1i128; 1isize, 2isize;
        1u8, 2u8; 1u16, 2u16; 1u32, 2u32; 1u64, 2u64; 1u128, u128::MAX; 1usize, 2usize;
        0.0f32, -0.0f32; 0.1f64, 0.30000000000000004f64;
        'a', 'é';
        "relu", "tanh";
        String::from("relu"), String::from("tanh");
        f32::NAN, f32::INFINITY;
    }
    let reasons = function("probe").retrace_reasons();
    assert!(reasons.contains(&"arg x: 0.0 -> -0.0".to_string()), "{reasons:?}");
    assert!(reasons.contains(&"arg x: 'a' -> 'é'".to_string()), "{reasons:?}");
    assert!(reasons.contains(&"arg x: type &str -> String".to_string()), "{reasons:?}");
}

// ---------------------------------------------------------------- collections of tensors

#[graph_fn]
fn weighted(xs: &[Tensor], ws: Vec<f32>, pair: (&Tensor, i32), maybe: Option<&Tensor>, fixed: [Tensor; 2]) -> Result<Tensor> {
    let mut total = fixed[0].add(&fixed[1])?;
    for (x, w) in xs.iter().zip(&ws) {
        total = total.add(&x.mul(*w)?)?;
    }
    total = total.add(&pair.0.mul(pair.1 as f32)?)?;
    match maybe {
        Some(m) => total.sub(m),
        None => Ok(total),
    }
}

/// Slices, Vecs, arrays, tuples and Options of tensors: the tensors are leaves (their values
/// are read at each call, not baked in), the rest keys the signature.
#[test]
fn collections_flatten_into_leaves_and_structure() -> Result<()> {
    let v = |x: f32| f32s(&[x, 2.0 * x], &[2]);
    let call = |a: f32, ws: Vec<f32>, k: i32, m: Option<f32>| {
        let xs = [v(a), v(a + 1.0)];
        let m = m.map(v);
        weighted(&xs, ws, (&v(100.0), k), m.as_ref(), [v(1000.0), v(1.0)])?.to_vec::<f32>()
    };
    // 1001 + a + 2(a+1) + 100k - m, and twice that in the second element
    assert_eq!(call(1.0, vec![1.0, 2.0], 1, None)?, [1106.0, 2212.0]);
    assert_eq!(call(2.0, vec![1.0, 2.0], 1, None)?, [1109.0, 2218.0], "new values, same signature");
    assert_eq!(function("weighted").trace_count(), 1);
    assert_eq!(call(2.0, vec![1.0, 3.0], 1, None)?, [1112.0, 2224.0], "a Vec<f32> element keys by value");
    assert_eq!(call(2.0, vec![1.0, 3.0], 2, None)?, [1212.0, 2424.0]);
    assert_eq!(call(2.0, vec![1.0, 3.0], 2, Some(12.0))?, [1200.0, 2400.0]);
    assert_eq!(call(3.0, vec![1.0, 3.0], 2, Some(0.0))?, [1216.0, 2432.0]);
    let f = function("weighted");
    assert_eq!(f.trace_count(), 4);
    assert_eq!(f.retrace_reasons()[1..], ["arg ws.1: 2.0 -> 3.0", "arg pair.1: 1 -> 2", "arg maybe: structure (None) -> (Some, f32[2])"]);
    assert_eq!(
        f.traces()[0].signature,
        "xs: (length 2, f32[2], f32[2]), ws: (length 2, 1.0, 2.0), pair: (f32[2], 1), maybe: None, fixed: (length 2, f32[2], f32[2])"
    );
    Ok(())
}

// -------------------------------------------------------------------- #[derive(GraphArg)]

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Mode {
    Train,
    Eval,
}

#[derive(GraphArg)]
struct Batch {
    x: Tensor,
    y: Tensor,
    step: i32,
    #[graph_arg(static)]
    mode: Mode,
    #[graph_arg(skip)]
    note: String,
}

#[derive(GraphArg)]
struct Scaled(Tensor, f32);

#[derive(GraphArg)]
enum Input {
    Dense(Tensor),
    Pair { a: Tensor, b: Tensor },
    Empty,
}

#[graph_fn]
fn score(batch: &Batch, scaled: &Scaled, input: &Input) -> Result<Tensor> {
    let base = batch.x.mul(&batch.y)?.add(batch.step as f32)?;
    let base = if batch.mode == Mode::Train { base.mul(2.0)? } else { base };
    let base = base.add(&scaled.0.mul(scaled.1)?)?;
    match input {
        Input::Dense(t) => base.add(t),
        Input::Pair { a, b } => base.add(&a.sub(b)?),
        Input::Empty => Ok(base),
    }
}

/// Derived structs and enums: tensor fields are leaves, GraphArg fields key by value,
/// `#[graph_arg(static)]` fields key by value too (shown by `Debug`), `#[graph_arg(skip)]`
/// fields are ignored, and an enum keys by its variant.
#[test]
fn derived_structs_and_enums() -> Result<()> {
    let batch = |x: f32, step: i32, mode: Mode, note: &str| Batch { x: f32s(&[x], &[1]), y: f32s(&[3.0], &[1]), step, mode, note: note.into() };
    let scaled = Scaled(f32s(&[10.0], &[1]), 0.5);
    let run = |b: &Batch, i: &Input| -> Result<f32> { score(b, &scaled, i)?.item::<f32>() };
    let dense = Input::Dense(f32s(&[100.0], &[1]));
    assert_eq!(batch(0.0, 0, Mode::Eval, "kept").note, "kept");
    assert_eq!(run(&batch(1.0, 1, Mode::Eval, "a"), &dense)?, 3.0 + 1.0 + 5.0 + 100.0);
    assert_eq!(run(&batch(2.0, 1, Mode::Eval, "b"), &dense)?, 6.0 + 1.0 + 5.0 + 100.0, "a skipped field does not retrace");
    let f = function("score");
    assert_eq!(f.trace_count(), 1);
    assert_eq!(run(&batch(2.0, 1, Mode::Train, "b"), &dense)?, 14.0 + 5.0 + 100.0, "a static field retraces");
    assert_eq!(run(&batch(2.0, 2, Mode::Train, "b"), &dense)?, 16.0 + 5.0 + 100.0);
    let pair = Input::Pair { a: f32s(&[7.0], &[1]), b: f32s(&[2.0], &[1]) };
    assert_eq!(run(&batch(2.0, 2, Mode::Train, "c"), &pair)?, 16.0 + 5.0 + 5.0);
    assert_eq!(run(&batch(2.0, 2, Mode::Train, "c"), &Input::Empty)?, 16.0 + 5.0);
    assert_eq!(run(&batch(2.0, 2, Mode::Train, "d"), &Input::Empty)?, 16.0 + 5.0);
    assert_eq!(f.trace_count(), 5);
    let reasons = f.retrace_reasons();
    assert_eq!(reasons[1], "arg batch.mode: Eval -> Train");
    assert_eq!(reasons[2], "arg batch.step: 1 -> 2");
    assert_eq!(reasons[3], "arg input: structure (Dense, Dense: f32[1]) -> (Pair, Pair.a: f32[1], Pair.b: f32[1])");
    assert_eq!(reasons[4], "arg input: structure (Pair, Pair.a: f32[1], Pair.b: f32[1]) -> (Empty)");
    let text = f.concrete_functions()[0].to_text();
    assert!(text.starts_with("graph score(batch.x: f32[1], batch.y: f32[1], scaled.0: f32[1], input.Dense: f32[1]) {"), "{text}");
    assert_eq!(f.traces()[0].signature, "batch: (x: f32[1], y: f32[1], step: 1, mode: Eval), scaled: (f32[1], 0.5), input: (Dense, Dense: f32[1])");
    Ok(())
}

/// A model whose optimizer is a skipped field: the step reads the optimizer's state as
/// captures.
#[derive(GraphArg)]
struct Regressor {
    w: Tensor,
    #[graph_arg(skip)]
    opt: tensor_core::optim::Sgd,
}

impl Regressor {
    fn new(w: f32) -> Regressor {
        let w = f32s(&[w], &[1]).requires_grad_(true).unwrap();
        let config = tensor_core::optim::SgdConfig { lr: 0.1, momentum: 0.5, weight_decay: 0.0 };
        let opt = tensor_core::optim::Sgd::with_config(vec![w.clone()], config).unwrap();
        Regressor { w, opt }
    }

    #[graph_fn]
    fn step(&self, x: &Tensor) -> Result<Tensor> {
        self.step_eagerly(x)
    }

    fn step_eagerly(&self, x: &Tensor) -> Result<Tensor> {
        self.opt.zero_grad()?;
        let err = self.w.mul(x)?.sub(1.0)?;
        let loss = err.mul(&err)?.sum()?;
        loss.backward()?;
        self.opt.step()?;
        Ok(loss)
    }
}

/// Two models with the same shapes, each with its own optimizer in a skipped field: the
/// second does not replay the first one's trace (which would step the first optimizer's
/// momentum buffers), as eager code never would; the retrace reason names the field.
#[test]
fn a_skipped_field_holding_other_tensors_traces_again() -> Result<()> {
    let x = f32s(&[2.0], &[1]);
    let run = |eager: bool| -> Result<Vec<f32>> {
        let (a, b) = (Regressor::new(1.0), Regressor::new(3.0));
        let step = |m: &Regressor| if eager { m.step_eagerly(&x) } else { m.step(&x) };
        let mut seen = Vec::new();
        for _ in 0..3 {
            step(&a)?;
            step(&b)?;
            seen.extend([a.w.item::<f32>()?, b.w.item::<f32>()?]);
        }
        Ok(seen)
    };
    let (eager, graph) = (run(true)?, run(false)?);
    assert_eq!(
        graph.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        eager.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "{graph:?} vs {eager:?}"
    );
    let f = function("Regressor::step");
    assert_eq!(f.trace_count(), 2, "one trace per optimizer");
    assert_eq!(f.retrace_reasons()[1], "arg self.opt: holds other tensors (a #[graph_arg(skip)] field is read as captures, bound when traced)");
    assert!(f.traces()[1].signature.starts_with("self: (w: f32[1] requires_grad"), "{}", f.traces()[1].signature);
    Ok(())
}

/// A config whose `Hash` ignores the value: every `Collider` hashes alike, so only `Eq` can
/// tell two apart.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Collider {
    factor: i32,
}

impl std::hash::Hash for Collider {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        0u8.hash(state);
    }
}

#[derive(GraphArg)]
struct Configured {
    x: Tensor,
    #[graph_arg(static)]
    config: Collider,
}

#[graph_fn]
fn configured(c: &Configured) -> Result<Tensor> {
    c.x.mul(c.config.factor as f32)
}

/// Static fields key by value, not by their hash: two values whose hashes collide get two
/// traces (and each its own graph, with its own constant), and an equal value hits the cache.
#[test]
fn static_fields_with_colliding_hashes_trace_apart() -> Result<()> {
    let with = |factor| Configured { x: f32s(&[1.0, 2.0], &[2]), config: Collider { factor } };
    assert_eq!(configured(&with(2))?.to_vec::<f32>()?, [2.0, 4.0]);
    assert_eq!(configured(&with(3))?.to_vec::<f32>()?, [3.0, 6.0], "not the graph traced for factor 2");
    assert_eq!(configured(&with(2))?.to_vec::<f32>()?, [2.0, 4.0]);
    assert_eq!(configured(&with(3))?.to_vec::<f32>()?, [3.0, 6.0]);
    let f = function("configured");
    assert_eq!(f.trace_count(), 2, "one trace per value; equal values hit the cache");
    assert_eq!(f.retrace_reasons(), ["first call", "arg c.config: Collider { factor: 2 } -> Collider { factor: 3 }"]);
    assert_eq!(f.cached_signatures(), ["c: (x: f32[2], config: Collider { factor: 2 })", "c: (x: f32[2], config: Collider { factor: 3 })"]);
    Ok(())
}

#[derive(GraphArg)]
struct Wrapper<T> {
    inner: T,
}

#[graph_fn]
fn unwrap_sum(w: &Wrapper<Vec<Tensor>>, extra: Wrapper<i64>) -> Result<Tensor> {
    let mut total = Tensor::scalar(extra.inner as f32);
    for t in &w.inner {
        total = total.add(&t.sum()?)?;
    }
    Ok(total)
}

/// A generic derived type is `GraphArg` when its parameters are.
#[test]
fn generic_derived_types() -> Result<()> {
    let w = Wrapper { inner: vec![f32s(&[1.0, 2.0], &[2]), f32s(&[3.0], &[1])] };
    assert_eq!(unwrap_sum(&w, Wrapper { inner: 10 })?.item::<f32>()?, 16.0);
    assert_eq!(unwrap_sum(&w, Wrapper { inner: 20 })?.item::<f32>()?, 26.0);
    assert_eq!(function("unwrap_sum").retrace_reasons(), ["first call", "arg extra.inner: 10 -> 20"]);
    Ok(())
}

// ----------------------------------------------------------------------- generic functions

#[graph_fn]
fn scale_by<S: Into<Scalar> + GraphArg + Copy>(x: &Tensor, s: S) -> Result<Tensor> {
    x.mul(Into::<Scalar>::into(s))
}

#[graph_fn]
fn filled<const N: usize>(value: f32) -> Tensor {
    Tensor::full(&[N], value, DType::F32)
}

#[graph_fn]
fn zeros_of<T: tensor_core::Element>(n: usize) -> Tensor {
    Tensor::zeros(&[n], T::DTYPE)
}

/// Generic functions work: each argument's type, and the instantiation (const and type
/// parameters no argument shows), is part of the key.
#[test]
fn generic_functions_key_their_instantiation() -> Result<()> {
    let x = f32s(&[1.0, 2.0], &[2]);
    assert_eq!(scale_by(&x, 3i32)?.to_vec::<f32>()?, [3.0, 6.0]);
    assert_eq!(scale_by(&x, 3i64)?.to_vec::<f32>()?, [3.0, 6.0]);
    assert_eq!(scale_by(&x, 0.5f64)?.to_vec::<f32>()?, [0.5, 1.0]);
    assert_eq!(function("scale_by").retrace_reasons(), ["first call", "arg s: type i32 -> i64", "arg s: type i64 -> f64"]);
    assert_eq!(filled::<2>(1.5).to_vec::<f32>()?, [1.5, 1.5]);
    assert_eq!(filled::<3>(1.5).to_vec::<f32>()?, [1.5, 1.5, 1.5]);
    assert_eq!(filled::<2>(1.5).dims(), [2]);
    assert_eq!(function("filled").trace_count(), 2);
    assert_eq!(zeros_of::<f32>(2).dtype(), DType::F32);
    assert_eq!(zeros_of::<i64>(2).dtype(), DType::I64);
    assert_eq!(zeros_of::<f64>(2).dtype(), DType::F64);
    assert_eq!(zeros_of::<i64>(2).dtype(), DType::I64);
    assert_eq!(function("zeros_of").trace_count(), 3);
    assert_eq!(function("zeros_of").retrace_reasons()[1], "instantiation zeros_of<f32> -> zeros_of<i64>");
    Ok(())
}

struct Gain<T>(T);

impl<T: tensor_core::Element + GraphArg> GraphArg for Gain<T> {
    fn flatten(&self, f: &mut tensor_core::function::Flattener) {
        self.0.flatten(f);
    }
}

impl<T: tensor_core::Element + GraphArg + Into<Scalar>> Gain<T> {
    #[graph_fn]
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        x.cast(T::DTYPE)?.mul(Into::<Scalar>::into(self.0))
    }
}

/// A method of a generic impl: the impl's parameters are part of the key.
#[test]
fn methods_of_generic_impls() -> Result<()> {
    let x = f32s(&[1.5, 2.5], &[2]);
    assert_eq!(Gain(2i32).apply(&x)?.to_vec::<i32>()?, [2, 4]);
    assert_eq!(Gain(2.0f64).apply(&x)?.to_vec::<f64>()?, [3.0, 5.0]);
    assert_eq!(Gain(3i32).apply(&x)?.to_vec::<i32>()?, [3, 6]);
    assert_eq!(Gain(3i32).apply(&x)?.to_vec::<i32>()?, [3, 6]);
    let f = function("Gain::apply");
    assert_eq!(f.trace_count(), 3);
    assert_eq!(f.retrace_reasons()[1], "arg self: type Gain<i32> -> Gain<f64>");
    Ok(())
}

// ---------------------------------------------------------------------------- return types

#[graph_fn]
fn nothing(x: &Tensor) {
    tprint!("{}", x);
}

#[graph_fn]
fn pair(x: &Tensor) -> (Tensor, Tensor) {
    (x + 1.0, x * 2.0)
}

type Nested = ((Tensor, Vec<Tensor>), Option<Tensor>, Option<Tensor>);

#[graph_fn]
fn nested(x: &Tensor) -> Result<Nested> {
    Ok(((-x, vec![x + 1.0, x + 2.0, x + 3.0]), Some(x.clone()), None))
}

#[graph_fn]
fn listed(xs: &[Tensor]) -> Vec<Tensor> {
    xs.iter().map(|x| x * x).collect()
}

/// Every `GraphOutput` comes back with its structure, from the tracing call and from the
/// cache alike.
#[test]
fn every_output_structure_round_trips() -> Result<()> {
    for v in [1.0f32, 2.0] {
        let x = f32s(&[v], &[1]);
        nothing(&x);
        let (a, b) = pair(&x);
        assert_eq!((a.item::<f32>()?, b.item::<f32>()?), (v + 1.0, v * 2.0));
        let ((neg, list), some, none) = nested(&x)?;
        assert_eq!(neg.item::<f32>()?, -v);
        assert_eq!(list.iter().map(|t| t.item::<f32>()).collect::<Result<Vec<_>>>()?, [v + 1.0, v + 2.0, v + 3.0]);
        assert_eq!(some.map(|t| t.item::<f32>()).transpose()?, Some(v));
        assert!(none.is_none());
        let squares = listed(&[x.clone(), &x + 1.0]);
        assert_eq!(squares.len(), 2);
        assert_eq!(squares[1].item::<f32>()?, (v + 1.0) * (v + 1.0));
    }
    for name in ["nothing", "pair", "nested", "listed"] {
        assert_eq!(function(name).trace_count(), 1, "{name}");
    }
    Ok(())
}

// ------------------------------------------------------------------- Result and the caller's E

#[derive(Debug)]
enum AppError {
    Tensor(tensor_core::Error),
    Refused(&'static str),
}

impl From<tensor_core::Error> for AppError {
    fn from(e: tensor_core::Error) -> Self {
        AppError::Tensor(e)
    }
}

#[graph_fn(input_signature(x: f32[2]))]
fn checked(x: &Tensor, allow: bool, other: &Tensor) -> std::result::Result<Tensor, AppError> {
    if !allow {
        return Err(AppError::Refused("not allowed"));
    }
    let y = x.add(other)?; // a tensor_core::Error converts through `?`
    Ok(y.mul(2.0)?)
}

/// `Result<T, E>` with the caller's `E: From<tensor_core::Error>`: the body's `Err` passes
/// through untouched, a trace-time op error arrives converted, and so do the runtime's own
/// errors (an input-signature mismatch).
#[test]
fn results_pass_errors_through() {
    let x = f32s(&[1.0, 2.0], &[2]);
    assert!(matches!(checked(&x, false, &x), Err(AppError::Refused("not allowed"))));
    assert_eq!(function("checked").trace_count(), 0, "a trace that returned Err is not kept");
    match checked(&x, true, &f32s(&[1.0, 2.0, 3.0], &[3])) {
        Err(AppError::Tensor(e)) => assert!(e.to_string().contains("add"), "{e}"),
        other => panic!("expected the add's shape error, got {other:?}"),
    }
    let y = checked(&x, true, &x).expect("a valid call");
    assert_eq!(y.to_vec::<f32>().expect("concrete"), [4.0, 8.0]);
    assert!(matches!(checked(&Tensor::zeros(&[2], DType::I32), true, &x), Err(AppError::Tensor(Error::SignatureMismatch { .. }))));
    assert_eq!(function("checked").trace_count(), 1);
}

#[graph_fn(input_signature(x: f32[?]))]
fn deferred(x: &Tensor, other: &Tensor) -> Result<Tensor> {
    x.add(other)
}

/// With an unknown dim in the traced signature, a shape error can only show when the graph
/// runs; it must still be an `Err`, never a panic.
#[test]
fn a_run_time_shape_error_with_unknown_dims_is_an_err() {
    let ok = deferred(&f32s(&[1.0, 2.0, 3.0], &[3]), &f32s(&[1.0, 1.0, 1.0], &[3])).expect("compatible shapes");
    assert_eq!(ok.to_vec::<f32>().expect("concrete"), [2.0, 3.0, 4.0]);
    let (x, other) = (f32s(&[1.0, 2.0], &[2]), f32s(&[1.0, 1.0, 1.0], &[3]));
    let bad = std::panic::catch_unwind(|| deferred(&x, &other));
    assert!(matches!(bad, Ok(Err(_))), "an Err, not a panic");
    assert_eq!(deferred(&x, &other).unwrap_err(), x.add(&other).unwrap_err(), "the error eager gives");
}

/// Calls `graph` and `eager` (the same body, run eagerly) on the same arguments: the same
/// error, or the same bits.
#[track_caller]
fn same_as_eager(graph: Result<Tensor>, eager: Result<Tensor>) {
    match (graph, eager) {
        (Ok(g), Ok(e)) => assert_eq!(g.to_vec::<f32>().expect("concrete"), e.to_vec::<f32>().expect("concrete")),
        (Err(g), Err(e)) => assert_eq!(g, e),
        (g, e) => panic!("graph {g:?}, eager {e:?}"),
    }
}

/// An elementwise chain: the ops on the unknown dims run one by one; those after the
/// broadcast with `b` (whose shape the trace knows) are fused.
fn chain_body(x: &Tensor, y: &Tensor, b: &Tensor) -> Result<Tensor> {
    let h = x.mul(2.0)?.add(y)?.add(b)?;
    h.tanh()?.mul(b)?.sub(b)?.relu()
}

#[graph_fn(input_signature(x: f32[?], y: f32[?]))]
fn chain(x: &Tensor, y: &Tensor, b: &Tensor) -> Result<Tensor> {
    chain_body(x, y, b)
}

/// A chain with fused nodes over unknown dims: calls whose dims broadcast give eager's bits,
/// the others eager's error (from the op that fails), never a panic.
#[test]
fn a_fused_chain_with_unknown_dims_checks_its_shapes_when_it_runs() {
    let b = f32s(&[0.5, -1.0, 2.0], &[3]);
    let calls = [
        (f32s(&[1.0, 2.0, 3.0], &[3]), f32s(&[0.25], &[1])),
        (f32s(&[1.5], &[1]), f32s(&[1.0, -2.0, 0.5], &[3])),
        (f32s(&[1.0, 2.0], &[2]), f32s(&[1.0, 2.0, 3.0], &[3])), // x and y do not broadcast
        (f32s(&[1.0, 2.0], &[2]), f32s(&[1.0, 2.0], &[2])),      // x + y does not broadcast with b
    ];
    for (x, y) in &calls {
        same_as_eager(chain(x, y, &b), chain_body(x, y, &b));
    }
    let f = function("chain");
    assert_eq!(f.trace_count(), 1, "one trace serves every call");
    let text = f.concrete_functions()[0].to_text();
    assert!(text.contains("fused["), "{text}");
}

#[graph_fn(input_signature(a: f32[?, ?], b: f32[?, ?]))]
fn product(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.matmul(b)
}

/// A matmul whose inner dims differ only at run time is eager's error naming both shapes.
#[test]
fn a_matmul_with_mismatched_inner_dims_is_an_err() {
    let (a, b) = (Tensor::randn(&[2, 3], DType::F32, 1), Tensor::randn(&[3, 4], DType::F32, 2));
    same_as_eager(product(&a, &b), a.matmul(&b));
    let c = Tensor::randn(&[4, 2], DType::F32, 3);
    let err = product(&a, &c).unwrap_err();
    assert_eq!(err, a.matmul(&c).unwrap_err());
    let msg = err.to_string();
    assert!(msg.contains("matmul") && msg.contains("[2, 3]") && msg.contains("[4, 2]") && msg.contains("3 vs 4"), "{msg}");
}

#[graph_fn(input_signature(acc: f32[?], x: f32[?]))]
fn accumulate(acc: &Tensor, x: &Tensor) -> Result<()> {
    acc.add_(x)
}

#[graph_fn(input_signature(x: f32[?]))]
fn weighted_loss(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let loss = w.mul(x)?.sum()?;
    loss.backward()?;
    Ok(loss)
}

/// A call that fails at run time changes nothing: no in-place update lands (also one whose
/// op ran but whose result would not fit the target), no `.grad` is written.
#[test]
fn a_failed_call_changes_no_state() {
    let acc = f32s(&[1.0, 2.0, 3.0], &[3]);
    accumulate(&acc, &f32s(&[1.0, 1.0, 1.0], &[3])).expect("same shapes");
    assert_eq!(acc.to_vec::<f32>().expect("concrete"), [2.0, 3.0, 4.0]);
    let version = acc.version();
    assert!(accumulate(&acc, &f32s(&[1.0, 1.0], &[2])).is_err());
    let small = f32s(&[5.0], &[1]);
    let three = f32s(&[1.0, 1.0, 1.0], &[3]);
    let err = accumulate(&small, &three).unwrap_err();
    assert_eq!(err, f32s(&[5.0], &[1]).add_(&three).unwrap_err(), "the in-place error eager gives");
    assert_eq!((acc.to_vec::<f32>().expect("concrete"), acc.version()), (vec![2.0, 3.0, 4.0], version));
    assert_eq!((small.to_vec::<f32>().expect("concrete"), small.shape()), (vec![5.0], Shape::new(&[1])));

    let w = f32s(&[1.0, 2.0, 3.0], &[3]).requires_grad_(true).expect("float");
    weighted_loss(&f32s(&[1.0, 1.0, 1.0], &[3]), &w).expect("same shapes");
    let bad = weighted_loss(&f32s(&[1.0, 1.0], &[2]), &w);
    assert!(bad.is_err(), "{bad:?}");
    assert_eq!(w.grad().expect("set by the first call").to_vec::<f32>().expect("concrete"), [1.0, 1.0, 1.0]);
    weighted_loss(&f32s(&[2.0, 2.0, 2.0], &[3]), &w).expect("same shapes");
    assert_eq!(w.grad().expect("accumulated").to_vec::<f32>().expect("concrete"), [3.0, 3.0, 3.0]);
}

// ------------------------------------------------------------- the signature stays the same

mod api {
    use tensor_core::prelude::*;

    /// Doubles `x`. Visible to the crate only; callers cannot tell it is a graph function.
    #[graph_fn]
    #[must_use]
    #[inline]
    pub(crate) fn doubled(x: &Tensor) -> Tensor {
        x * 2.0
    }

    #[graph_fn]
    pub fn patterns((a, b): (&Tensor, &Tensor), _: i32, mut n: i32) -> Result<Tensor> {
        n += 1;
        a.mul(b)?.mul(n as f32)
    }
}

/// The function keeps its signature, visibility and attributes: it coerces to the same `fn`
/// pointer type, and argument patterns still bind.
#[test]
fn signatures_are_unchanged() -> Result<()> {
    let f: fn(&Tensor) -> Tensor = api::doubled;
    assert_eq!(f(&f32s(&[1.5], &[1])).to_vec::<f32>()?, [3.0]);
    let g: fn((&Tensor, &Tensor), i32, i32) -> Result<Tensor> = api::patterns;
    let (a, b) = (f32s(&[2.0], &[1]), f32s(&[3.0], &[1]));
    assert_eq!(g((&a, &b), 0, 1)?.to_vec::<f32>()?, [12.0]);
    assert_eq!(g((&a, &b), 5, 1)?.to_vec::<f32>()?, [12.0]);
    assert_eq!(g((&b, &b), 5, 2)?.to_vec::<f32>()?, [27.0]);
    let patterns = function("patterns");
    assert_eq!(patterns.trace_count(), 3);
    assert_eq!(patterns.traces()[0].signature, "(a, b): (f32[1], f32[1]), _: 0, n: 1");
    Ok(())
}
