//! The options of `#[graph_fn(...)]`: `reduce_retracing`, `input_signature`, `max_traces`
//! (warn and error), `name`, `optimize` and `cache_capacity`. Each test has its own functions
//! (their caches are global), and asserts trace counts, cached signatures and results.

use tensor_core::function::{lookup, GraphFunction};
use tensor_core::prelude::*;

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).expect("data matches shape")
}

fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    f32s(&(0..n).map(|i| i as f32).collect::<Vec<_>>(), shape)
}

fn function(name: &str) -> &'static GraphFunction {
    lookup(name).unwrap_or_else(|| panic!("`{name}` is registered once called"))
}

use tests::capture_warnings;

// ------------------------------------------------------------------------ reduce_retracing

#[graph_fn(reduce_retracing)]
fn relaxed_total(x: &Tensor) -> Tensor {
    x.sum().unwrap()
}

/// The same total through a reduction that keeps its dim: a rule that needs the rank, so
/// each rank traces on its own.
#[graph_fn(reduce_retracing)]
fn relaxed_kept_total(x: &Tensor) -> Tensor {
    x.sum_axes(&[0], true).unwrap().sum().unwrap()
}

#[graph_fn]
fn exact_total(x: &Tensor) -> Tensor {
    x.sum().unwrap()
}

/// As TF's `reduce_retracing`: the first shape traces exactly; a retrace caused only by
/// differing dims traces once with those dims unknown, and that trace serves every later
/// shape it admits. Traces widen against the relaxed shape ([?, 3] then [4, 5] -> [?, ?]).
/// (This function's ops need the rank, so a new rank traces exactly; see below for one whose
/// ops do not.)
#[test]
fn reduce_retracing_traces_once_for_varying_dims() -> Result<()> {
    let expect = |shape: &[usize], traces: usize| -> Result<()> {
        let x = iota(shape);
        let y = relaxed_kept_total(&x);
        let n = x.numel() as f32;
        assert_eq!(y.item::<f32>()?, n * (n - 1.0) / 2.0, "sum over {shape:?}");
        assert_eq!(function("relaxed_kept_total").trace_count(), traces, "traces after a call with {shape:?}");
        Ok(())
    };
    expect(&[2], 1)?;
    expect(&[3], 2)?; // only the dim changed: traced for [?]
    expect(&[4], 2)?;
    expect(&[7], 2)?;
    expect(&[2], 2)?; // the first, exact trace is still cached
    expect(&[2, 3], 3)?; // a new rank: exact
    expect(&[4, 3], 4)?; // -> [?, 3]
    expect(&[6, 3], 4)?;
    expect(&[4, 5], 5)?; // relaxed against [?, 3]: [?, ?]
    expect(&[9, 1], 5)?;
    expect(&[1, 9], 5)?;
    let f = function("relaxed_kept_total");
    assert_eq!(f.cached_signatures(), ["x: f32[2]", "x: f32[?]", "x: f32[2, 3]", "x: f32[?, 3]", "x: f32[?, ?]"]);
    assert_eq!(
        f.retrace_reasons(),
        ["first call", "arg x: shape [2] -> [3]", "arg x: shape [3] -> [2, 3]", "arg x: shape [2, 3] -> [4, 3]", "arg x: shape [4, 3] -> [4, 5]"]
    );
    // A relaxed graph has a symbolic dim in its argument.
    let text = f.concrete_functions()[1].to_text();
    assert!(text.contains("x: f32[n0]"), "relaxed graph:\n{text}");

    // Without the option, every new shape traces.
    for (i, n) in [2, 3, 4, 7].into_iter().enumerate() {
        exact_total(&iota(&[n]));
        assert_eq!(function("exact_total").trace_count(), i + 1);
    }
    Ok(())
}

/// As TF does, calls of another rank relax the rank: the first call traces exactly, the next
/// of another rank traces once at an unknown rank (`f32[*]`), and that trace serves every
/// later rank — for a function whose ops all have a rule at an unknown rank (elementwise ops,
/// reductions over all axes); the results have the eager bits.
#[test]
fn reduce_retracing_relaxes_across_ranks_to_one_trace_of_unknown_rank() -> Result<()> {
    let shapes: [&[usize]; 8] = [&[], &[1], &[2], &[2, 3], &[4], &[3, 1, 2], &[0], &[]];
    for (i, shape) in shapes.into_iter().enumerate() {
        let x = iota(shape).mul(0.37)?.tanh()?;
        let y = relaxed_total(&x);
        let eager = x.sum()?;
        tests::assert_bits_eq(&y, &eager);
        assert_eq!(y.dims(), Vec::<usize>::new(), "{shape:?}");
        assert_eq!(function("relaxed_total").trace_count(), if i == 0 { 1 } else { 2 }, "traces after a call with {shape:?}");
    }
    let f = function("relaxed_total");
    assert_eq!(f.cached_signatures(), ["x: f32[]", "x: f32[*]"]);
    assert_eq!(f.retrace_reasons(), ["first call", "arg x: shape [] -> [1]"]);
    let text = f.concrete_functions()[1].to_text();
    assert!(text.contains("x: f32[*]"), "the graph of unknown rank:\n{text}");
    // The exported format has no unknown rank: an Err that says so.
    let e = f.concrete_functions()[1].export_bytes().unwrap_err().to_string();
    assert!(e.contains("unknown rank") && e.contains("known rank"), "{e}");

    // [2, 3] then [4]: the same, from a matrix; elementwise ops keep the unknown rank.
    for (i, shape) in [&[2usize, 3][..], &[4], &[5, 1, 1], &[2, 3]].into_iter().enumerate() {
        let (x, b) = (iota(shape).mul(0.5)?, Tensor::scalar(0.25f32));
        let y = relaxed_affine(&x, &b)?;
        assert_eq!(y.dims(), shape, "the output has the call's shape");
        tests::assert_bits_eq(&y, &x.mul(1.5)?.add(&b)?.tanh()?);
        assert_eq!(function("relaxed_affine").trace_count(), if i == 0 { 1 } else { 2 });
    }
    assert_eq!(function("relaxed_affine").cached_signatures(), ["x: f32[2, 3], b: f32[]", "x: f32[*], b: f32[]"]);
    Ok(())
}

#[graph_fn(reduce_retracing)]
fn relaxed_double_total(x: &Tensor) -> Result<Tensor> {
    x.mul(2.0)?.sum()
}

/// An argument that requires grad keeps its rank: the gradient through the call is traced
/// for the call's shapes, so ranks trace on their own (dims still relax).
#[test]
fn reduce_retracing_keeps_the_rank_of_an_argument_that_requires_grad() -> Result<()> {
    for (shape, traces) in [(&[2usize][..], 1), (&[2, 3], 2), (&[4], 3), (&[3], 3)] {
        let x = iota(shape).requires_grad_(true)?;
        let y = relaxed_double_total(&x)?;
        y.backward()?;
        tests::assert_values(&x.grad().expect("a gradient through the call"), &vec![2.0; x.numel()]);
        assert_eq!(function("relaxed_double_total").trace_count(), traces, "{shape:?}");
    }
    assert_eq!(
        function("relaxed_double_total").cached_signatures(),
        ["x: f32[2] requires_grad", "x: f32[2, 3] requires_grad", "x: f32[?] requires_grad"]
    );
    Ok(())
}

#[graph_fn(reduce_retracing)]
fn relaxed_affine(x: &Tensor, b: &Tensor) -> Result<Tensor> {
    x.mul(1.5)?.add(b)?.tanh()
}

/// Host code that decides, while tracing, which ops to use (here a switch read at trace
/// time): the trace of unknown rank can reach an op whose rule needs the rank.
static SOFTMAX_NEXT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[graph_fn(reduce_retracing)]
fn relaxed_switch(x: &Tensor) -> Result<Tensor> {
    if SOFTMAX_NEXT.load(std::sync::atomic::Ordering::SeqCst) {
        return x.softmax(-1);
    }
    x.mul(2.0)
}

#[graph_fn(reduce_retracing)]
fn relaxed_pair(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    x.add(y)
}

#[test]
fn an_unknown_rank_reaching_a_rule_that_needs_it_is_an_err_and_run_time_shapes_are_checked() -> Result<()> {
    relaxed_switch(&iota(&[2]))?;
    SOFTMAX_NEXT.store(true, std::sync::atomic::Ordering::SeqCst);
    let e = relaxed_switch(&iota(&[2, 3])).unwrap_err().to_string();
    assert!(e.contains("softmax") && e.contains("unknown rank") && e.contains("input_signature"), "{e}");
    assert_eq!(function("relaxed_switch").trace_count(), 1, "a failed trace is not counted");
    // Two arguments relaxed across ranks, broadcast against each other.
    relaxed_pair(&iota(&[3]), &iota(&[3]))?;
    tests::assert_values(&relaxed_pair(&iota(&[2, 1]), &iota(&[3]))?, &[0.0, 1.0, 2.0, 1.0, 2.0, 3.0]);
    assert_eq!(function("relaxed_pair").cached_signatures(), ["x: f32[3], y: f32[3]", "x: f32[*], y: f32[3]"]);
    let e = relaxed_pair(&iota(&[2, 2]), &iota(&[3])).unwrap_err();
    let eager = iota(&[2, 2]).add(&iota(&[3])).unwrap_err();
    assert_eq!(e.to_string(), eager.to_string());
    Ok(())
}

#[graph_fn(reduce_retracing)]
fn relaxed_scaled(x: &Tensor, k: i32) -> Tensor {
    x * k as f32
}

/// Only a retrace caused by shapes alone relaxes: a dtype or a Rust value that changes traces
/// exactly (and relaxes per distinct rest-of-signature).
#[test]
fn reduce_retracing_relaxes_only_dims() -> Result<()> {
    let f = || function("relaxed_scaled");
    assert_eq!(relaxed_scaled(&iota(&[2]), 1).to_vec::<f32>()?, [0.0, 1.0]);
    assert_eq!(relaxed_scaled(&iota(&[2]), 3).to_vec::<f32>()?, [0.0, 3.0]); // value: exact
    assert_eq!(f().trace_count(), 2);
    assert_eq!(relaxed_scaled(&iota(&[3]), 3).to_vec::<f32>()?, [0.0, 3.0, 6.0]); // dims: relaxed for k = 3
    assert_eq!(f().trace_count(), 3);
    assert_eq!(relaxed_scaled(&iota(&[5]), 3).to_vec::<f32>()?, [0.0, 3.0, 6.0, 9.0, 12.0]);
    assert_eq!(f().trace_count(), 3);
    relaxed_scaled(&iota(&[5]), 1); // dims for k = 1: relaxed against k = 1's trace
    assert_eq!(f().trace_count(), 4);
    relaxed_scaled(&Tensor::zeros(&[5], DType::F64), 1); // dtype: exact
    assert_eq!(f().trace_count(), 5);
    assert_eq!(f().cached_signatures(), ["x: f32[2], k: 1", "x: f32[2], k: 3", "x: f32[?], k: 3", "x: f32[?], k: 1", "x: f64[5], k: 1"]);
    assert_eq!(f().retrace_reasons()[4], "arg x: dtype f32 -> f64");
    Ok(())
}

// ------------------------------------------------------------------------- input_signature

#[graph_fn(input_signature(x: f32[?, 3]))]
fn row_sums(x: &Tensor) -> Result<Tensor> {
    x.sum_axes(&[1], false)
}

/// A fixed input signature traces once, for its unknown dims, serves every call that matches,
/// and answers a call that does not match with an `Err` — never a retrace.
#[test]
fn input_signature_serves_matching_calls_and_refuses_others() -> Result<()> {
    let f = || function("row_sums");
    assert_eq!(row_sums(&iota(&[2, 3]))?.to_vec::<f32>()?, [3.0, 12.0]);
    assert_eq!(row_sums(&iota(&[1, 3]))?.to_vec::<f32>()?, [3.0]);
    assert_eq!(row_sums(&iota(&[4, 3]))?.to_vec::<f32>()?, [3.0, 12.0, 21.0, 30.0]);
    assert_eq!(f().trace_count(), 1);
    assert_eq!(f().cached_signatures(), ["x: f32[?, 3]"]);
    assert_eq!(f().traces()[0].signature, "x: f32[?, 3]");
    let text = f().concrete_functions()[0].to_text();
    assert!(text.contains("x: f32[n0, 3]"), "graph traced for the fixed signature:\n{text}");

    for (bad, found) in [(iota(&[2, 4]), "f32[2, 4]"), (Tensor::zeros(&[2, 3], DType::F64), "f64[2, 3]"), (iota(&[6]), "f32[6]")] {
        match row_sums(&bad) {
            Err(Error::SignatureMismatch { function, arg, expected, found: got }) => {
                assert_eq!((function.as_str(), arg.as_str(), expected.as_str(), got.as_str()), ("row_sums", "x", "f32[?, 3]", found));
            }
            other => panic!("expected a signature mismatch for {found}, got {other:?}"),
        }
    }
    let message = row_sums(&iota(&[2, 4])).unwrap_err().to_string();
    assert_eq!(message, "row_sums: argument `x` does not match the input signature: expected f32[?, 3], found f32[2, 4]");
    assert_eq!(f().trace_count(), 1, "a mismatched call never traces");
    Ok(())
}

#[graph_fn(input_signature(x: f32[?]))]
fn shifted(x: &Tensor, by: i32) -> Result<Tensor> {
    x.add(by as f32)
}

/// Arguments the signature does not fix key as usual: a new Rust value still retraces.
#[test]
fn input_signature_leaves_other_arguments_keyed() -> Result<()> {
    assert_eq!(shifted(&iota(&[2]), 1)?.to_vec::<f32>()?, [1.0, 2.0]);
    assert_eq!(shifted(&iota(&[3]), 1)?.to_vec::<f32>()?, [1.0, 2.0, 3.0]);
    assert_eq!(shifted(&iota(&[3]), 2)?.to_vec::<f32>()?, [2.0, 3.0, 4.0]);
    let f = function("shifted");
    assert_eq!(f.trace_count(), 2);
    assert_eq!(f.cached_signatures(), ["x: f32[?], by: 1", "x: f32[?], by: 2"]);
    assert_eq!(f.retrace_reasons(), ["first call", "arg by: 1 -> 2"]);
    Ok(())
}

#[derive(GraphArg)]
struct Affine {
    w: Tensor,
}

impl Affine {
    #[graph_fn(input_signature(x: i64[?, 2]))]
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.w)
    }
}

/// On a method the names are the method's arguments (`self` is not one of them).
#[test]
fn input_signature_on_a_method() -> Result<()> {
    let m = Affine { w: Tensor::from_vec(vec![1i64, 10, 100, 1000], &[2, 2])? };
    let x = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[3, 2])?;
    assert_eq!(m.apply(&x)?.to_vec::<i64>()?, [201, 2010, 403, 4030, 605, 6050]);
    assert_eq!(m.apply(&Tensor::from_vec(vec![1i64, 1], &[1, 2])?)?.to_vec::<i64>()?, [101, 1010]);
    let f = function("Affine::apply");
    assert_eq!(f.trace_count(), 1);
    assert_eq!(f.cached_signatures(), ["self: (w: i64[2, 2]), x: i64[?, 2]"]);
    assert!(matches!(m.apply(&Tensor::zeros(&[3, 2], DType::F32)), Err(Error::SignatureMismatch { .. })));
    Ok(())
}

// ------------------------------------------------------------------------------ max_traces

#[graph_fn(max_traces(2, error))]
fn limited(x: &Tensor, n: i32) -> Result<Tensor> {
    x.mul(n as f32)
}

/// `max_traces(N, error)`: the trace beyond N is an `Err` naming the function, the limit and
/// what changed; signatures already cached keep working.
#[test]
fn max_traces_error_refuses_the_extra_trace() -> Result<()> {
    let x = iota(&[2]);
    assert_eq!(limited(&x, 1)?.to_vec::<f32>()?, [0.0, 1.0]);
    assert_eq!(limited(&x, 2)?.to_vec::<f32>()?, [0.0, 2.0]);
    let err = limited(&x, 3).unwrap_err();
    match &err {
        Error::TooManyTraces { function, count, limit, reason } => {
            assert_eq!((function.as_str(), *count, *limit, reason.as_str()), ("limited", 3, 2, "arg n: 2 -> 3"));
        }
        other => panic!("expected TooManyTraces, got {other:?}"),
    }
    assert_eq!(err.to_string(), "limited: traced 3 times, more than max_traces = 2; last retrace because arg n: 2 -> 3");
    assert!(limited(&x, 4).is_err());
    assert_eq!(limited(&x, 1)?.to_vec::<f32>()?, [0.0, 1.0], "cached signatures still run");
    assert_eq!(limited(&x, 2)?.to_vec::<f32>()?, [0.0, 2.0]);
    assert_eq!(function("limited").trace_count(), 2);
    Ok(())
}

#[graph_fn(max_traces(1, error))]
fn limited_fallible(x: &Tensor, other: &Tensor) -> Result<Tensor> {
    x.matmul(other)
}

/// A trace that fails (the body's `Err`) does not use up the limit.
#[test]
fn max_traces_counts_only_finished_traces() -> Result<()> {
    let err = limited_fallible(&iota(&[2, 3]), &iota(&[2, 3])).unwrap_err();
    assert!(err.to_string().contains("matmul"), "the body's own error: {err}");
    assert_eq!(function("limited_fallible").trace_count(), 0);
    let y = limited_fallible(&iota(&[2, 3]), &iota(&[3, 1]))?;
    assert_eq!(y.to_vec::<f32>()?, [5.0, 14.0]);
    assert_eq!(function("limited_fallible").trace_count(), 1);
    assert!(matches!(limited_fallible(&iota(&[1, 3]), &iota(&[3, 1])), Err(Error::TooManyTraces { .. })));
    Ok(())
}

#[graph_fn(max_traces = 2)]
fn limited_warn(n: i32) -> Tensor {
    Tensor::scalar(n)
}

/// `max_traces = N` (policy warn): the extra traces happen, each logging a warning through
/// `tracing` that names the function and what changed.
#[test]
fn max_traces_warn_logs_and_traces() -> Result<()> {
    let (values, warnings) = capture_warnings(|| (1..=4).map(|n| limited_warn(n).item::<i32>()).collect::<Result<Vec<_>>>());
    assert_eq!(values?, [1, 2, 3, 4]);
    assert_eq!(function("limited_warn").trace_count(), 4);
    assert_eq!(warnings.len(), 2, "one warning per trace beyond the limit:\n{}", warnings.join("\n"));
    assert!(warnings[0].contains("WARN"), "{}", warnings[0]);
    assert!(warnings[0].contains("limited_warn: traced 3 times, more than max_traces = 2; last retrace because arg n: 2 -> 3"), "{}", warnings[0]);
    assert!(warnings[1].contains("limited_warn: traced 4 times, more than max_traces = 2; last retrace because arg n: 3 -> 4"), "{}", warnings[1]);
    Ok(())
}

// ----------------------------------------------------------------------------------- name

#[graph_fn(name = "custom_name")]
fn named_function(x: &Tensor) -> Result<Tensor> {
    x.add(1.0)
}

#[derive(GraphArg)]
struct Named {
    w: Tensor,
}

impl Named {
    #[graph_fn(name = "named_method")]
    fn scale(&self, x: &Tensor) -> Result<Tensor> {
        x.mul(&self.w)
    }
}

/// `name = "..."` is the name introspection, the registry, graphs and errors use, as given.
#[test]
fn name_option_names_the_function() -> Result<()> {
    assert_eq!(named_function(&iota(&[2]))?.to_vec::<f32>()?, [1.0, 2.0]);
    let f = function("custom_name");
    assert_eq!(f.name(), "custom_name");
    assert!(lookup("named_function").is_none());
    assert!(lookup(&format!("{}::custom_name", module_path!())).is_some(), "module-qualified lookup");
    assert!(f.concrete_functions()[0].to_text().starts_with("graph custom_name("), "{}", f.concrete_functions()[0].to_text());

    let m = Named { w: f32s(&[2.0, 3.0], &[2]) };
    assert_eq!(m.scale(&iota(&[2]))?.to_vec::<f32>()?, [0.0, 3.0]);
    assert_eq!(function("named_method").name(), "named_method");
    assert!(lookup("Named::scale").is_none());
    Ok(())
}

#[graph_fn(name = "renamed_rows", input_signature(x: f32[?, 3]))]
fn fixed_rows(x: &Tensor) -> Result<Tensor> {
    x.sum_axes(&[1], false)
}

#[graph_fn(name = "renamed_counter", max_traces = 1)]
fn counted(n: i32) -> Tensor {
    Tensor::scalar(n)
}

impl Named {
    #[graph_fn(input_signature(x: f32[2]))]
    fn fixed_scale(&self, x: &Tensor) -> Result<Tensor> {
        x.mul(&self.w)
    }
}

/// Errors and warnings name a function by the name introspection uses: its `name = "..."`,
/// or `Type::method` for a method.
#[test]
fn errors_and_warnings_use_the_configured_name() -> Result<()> {
    let err = fixed_rows(&iota(&[2, 4])).unwrap_err();
    assert!(matches!(&err, Error::SignatureMismatch { function, .. } if function == "renamed_rows"), "{err:?}");
    assert!(err.to_string().starts_with("renamed_rows: argument `x`"), "{err}");
    let (_, warnings) = capture_warnings(|| (1..=5).for_each(|n| drop(counted(n))));
    assert_eq!(warnings.len(), 5, "four max_traces overruns and the fifth trace:\n{}", warnings.join("\n"));
    assert!(warnings.iter().all(|w| w.contains("renamed_counter") && !w.contains("counted")), "{}", warnings.join("\n"));
    assert!(warnings[4].contains("`renamed_counter` traced 5 times"), "{}", warnings[4]);
    let m = Named { w: f32s(&[2.0, 3.0], &[2]) };
    let err = m.fixed_scale(&iota(&[3])).unwrap_err();
    assert!(err.to_string().starts_with("Named::fixed_scale: argument `x`"), "{err}");
    Ok(())
}

// ------------------------------------------------------------------------------- optimize

#[graph_fn(optimize = false)]
fn unoptimized_identity(x: &Tensor) -> Tensor {
    &(x * 1.0) + 0.0
}

#[graph_fn]
fn optimized(x: &Tensor) -> Tensor {
    &(x * 1.0) + 0.0
}

/// `optimize = false` runs the graph as traced; by default the optimizer simplifies it. The
/// results are the same bits either way.
#[test]
fn optimize_option_switches_the_optimizer() -> Result<()> {
    let x = f32s(&[1.5, -2.0, 0.25], &[3]);
    let (a, b) = (unoptimized_identity(&x), optimized(&x));
    assert_eq!(a.to_vec::<f32>()?, x.to_vec::<f32>()?);
    assert_eq!(b.to_vec::<f32>()?, x.to_vec::<f32>()?);
    let plain = &function("unoptimized_identity").concrete_functions()[0];
    assert_eq!(plain.graph().nodes.len(), plain.traced_graph().nodes.len());
    let fast = &function("optimized").concrete_functions()[0];
    assert!(fast.graph().nodes.len() < fast.traced_graph().nodes.len(), "x * 1 + 0 simplifies:\n{}", fast.to_text());
    assert!(!function("unoptimized_identity").options().optimize);
    Ok(())
}

// ------------------------------------------------------------------------- cache_capacity

#[graph_fn(cache_capacity = 2)]
fn small_cache(n: i32) -> Tensor {
    Tensor::scalar(n * 10)
}

/// `cache_capacity = N` keeps the N most recently used signatures; the default is 64.
#[test]
fn cache_capacity_option_bounds_the_cache() -> Result<()> {
    for n in [1, 2, 1, 3] {
        assert_eq!(small_cache(n).item::<i32>()?, n * 10);
    }
    let f = function("small_cache");
    assert_eq!(f.cache_capacity(), 2);
    assert_eq!(f.trace_count(), 3);
    assert_eq!(f.cached_signatures(), ["n: 1", "n: 3"], "2 was least recently used");
    default_capacity(&iota(&[1]));
    assert_eq!(function("exact_total_for_capacity").cache_capacity(), 64);
    Ok(())
}

#[graph_fn(name = "exact_total_for_capacity")]
fn default_capacity(x: &Tensor) -> Tensor {
    x.sum().unwrap()
}
