//! Introspection of graph functions — free functions and methods alike: trace counts, cached
//! signatures, why each trace happened, the text form and DOT of each concrete function —
//! and the warning logged (through `tracing`) when a function retraces too often.

use std::process::Command;
use tensor_core::function::{lookup, GraphFunction, TraceRecord};
use tensor_core::prelude::*;

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).expect("data matches shape")
}

fn function(name: &str) -> &'static GraphFunction {
    lookup(name).unwrap_or_else(|| panic!("`{name}` is registered once called"))
}

use tests::capture_warnings;

// ------------------------------------------------------------------------- retrace reasons

#[graph_fn]
fn everything(x: &Tensor, n: i32, act: &str, flag: bool, rate: f64, c: char) -> Tensor {
    let _ = (n, act, flag, rate, c);
    x.clone()
}

/// Each trace records why it happened: the first call, or which argument changed and how.
#[test]
fn retrace_reasons_name_the_argument_and_the_change() -> Result<()> {
    let x2 = f32s(&[1.0, 2.0], &[2]);
    let x3 = f32s(&[1.0, 2.0, 3.0], &[3]);
    let i3 = Tensor::from_vec(vec![1i32, 2, 3], &[3])?;
    let g3 = f32s(&[1.0, 2.0, 3.0], &[3]).requires_grad_(true)?;
    everything(&x2, 1, "relu", true, 0.5, 'a');
    everything(&x2, 1, "relu", true, 0.5, 'a'); // cached
    everything(&x3, 1, "relu", true, 0.5, 'a');
    everything(&i3, 1, "relu", true, 0.5, 'a');
    everything(&i3, 2, "relu", true, 0.5, 'a');
    everything(&i3, 2, "tanh", true, 0.5, 'a');
    everything(&i3, 2, "tanh", false, 0.5, 'a');
    everything(&i3, 2, "tanh", false, 0.25, 'a');
    everything(&i3, 2, "tanh", false, 0.25, 'b');
    everything(&x2, 3, "tanh", false, 0.25, 'b');
    everything(&g3, 3, "tanh", false, 0.25, 'b');
    let f = function("everything");
    assert_eq!(f.trace_count(), 10);
    assert_eq!(
        f.retrace_reasons(),
        [
            "first call",
            "arg x: shape [2] -> [3]",
            "arg x: dtype f32 -> i32",
            "arg n: 1 -> 2",
            "arg act: \"relu\" -> \"tanh\"",
            "arg flag: true -> false",
            "arg rate: 0.5 -> 0.25",
            "arg c: 'a' -> 'b'",
            "arg x: dtype i32 -> f32, shape [3] -> [2]; arg n: 2 -> 3",
            "arg x: shape [2] -> [3], requires_grad false -> true",
        ]
    );
    assert_eq!(
        f.traces()[0],
        TraceRecord { signature: "x: f32[2], n: 1, act: \"relu\", flag: true, rate: 0.5, c: 'a'".into(), reason: "first call".into() }
    );
    assert_eq!(f.traces()[9].signature, "x: f32[3] requires_grad, n: 3, act: \"tanh\", flag: false, rate: 0.25, c: 'b'");
    assert_eq!(f.cached_signatures().len(), 10);
    Ok(())
}

#[graph_fn]
fn collections(xs: &[Tensor], pair: (i32, &Tensor), maybe: Option<&Tensor>) -> Tensor {
    let _ = (pair, maybe);
    xs[0].clone()
}

/// Structure changes (a collection's length, an `Option`'s variant) are reasons too.
#[test]
fn retrace_reasons_for_structure() {
    let t = || f32s(&[1.0], &[1]);
    collections(&[t(), t()], (1, &t()), None);
    collections(&[t(), t(), t()], (1, &t()), None);
    collections(&[t(), t(), t()], (1, &t()), Some(&t()));
    collections(&[t(), t(), t()], (5, &t()), Some(&t()));
    let f = function("collections");
    assert_eq!(
        f.retrace_reasons(),
        [
            "first call",
            "arg xs: structure (length 2, f32[1], f32[1]) -> (length 3, f32[1], f32[1], f32[1])",
            "arg maybe: structure (None) -> (Some, f32[1])",
            "arg pair.0: 1 -> 5",
        ]
    );
    assert_eq!(f.traces()[0].signature, "xs: (length 2, f32[1], f32[1]), pair: (1, f32[1]), maybe: None");
}

#[graph_fn]
fn pair_sum(x: &Tensor, y: &Tensor) -> Tensor {
    x + y
}

/// Passing one tensor as two arguments is its own signature (the graph reads it once).
#[test]
fn retrace_reasons_for_aliasing() -> Result<()> {
    let (a, b) = (f32s(&[1.0, 2.0], &[2]), f32s(&[10.0, 20.0], &[2]));
    assert_eq!(pair_sum(&a, &b).to_vec::<f32>()?, [11.0, 22.0]);
    assert_eq!(pair_sum(&a, &a).to_vec::<f32>()?, [2.0, 4.0]);
    assert_eq!(pair_sum(&b, &b).to_vec::<f32>()?, [20.0, 40.0]);
    assert_eq!(pair_sum(&b, &a).to_vec::<f32>()?, [11.0, 22.0]);
    let f = function("pair_sum");
    assert_eq!(f.trace_count(), 2);
    assert_eq!(f.retrace_reasons(), ["first call", "aliasing (no tensor passed twice) -> (y is x)"]);
    assert_eq!(f.cached_signatures(), ["x: f32[2], y: f32[2]", "x: f32[2], y: f32[2] (y is x)"]);
    Ok(())
}

#[graph_fn]
fn generic_len<T: GraphArg>(x: T) -> Tensor {
    let _ = x;
    Tensor::scalar(0i32)
}

#[graph_fn]
fn typed_zeros<const N: usize>(dtype_code: u8) -> Tensor {
    let _ = dtype_code;
    Tensor::zeros(&[N], DType::F32)
}

/// In a generic function the argument's type is part of the key (`arg x: type Tensor ->
/// i32`); so is the instantiation, for generic parameters no argument shows.
#[test]
fn retrace_reasons_for_types_and_instantiations() -> Result<()> {
    generic_len(Tensor::scalar(1i32));
    generic_len(1i32);
    generic_len(1i64);
    generic_len(vec![1i64]);
    assert_eq!(
        function("generic_len").retrace_reasons(),
        ["first call", "arg x: type Tensor -> i32", "arg x: type i32 -> i64", "arg x: type i64 -> Vec<i64>"]
    );
    assert_eq!(typed_zeros::<2>(0).dims(), [2]);
    assert_eq!(typed_zeros::<3>(0).dims(), [3]);
    assert_eq!(typed_zeros::<2>(0).dims(), [2]);
    let f = function("typed_zeros");
    assert_eq!(f.trace_count(), 2);
    assert_eq!(f.retrace_reasons(), ["first call", "instantiation typed_zeros<2> -> typed_zeros<3>"]);
    Ok(())
}

#[graph_fn(cache_capacity = 1)]
fn evicting(n: i32) -> Tensor {
    Tensor::scalar(n)
}

#[graph_fn]
fn clearing(n: i32) -> Tensor {
    Tensor::scalar(n)
}

/// A signature that traces again because it left the cache says so.
#[test]
fn retrace_reasons_for_eviction_and_clearing() {
    evicting(1);
    evicting(2);
    evicting(1);
    assert_eq!(function("evicting").retrace_reasons(), ["first call", "arg n: 1 -> 2", "the signature was evicted from the cache (capacity 1)"]);
    clearing(1);
    clearing(2);
    function("clearing").clear_cache();
    assert!(function("clearing").cached_signatures().is_empty());
    clearing(2);
    clearing(1);
    clearing(1);
    assert_eq!(function("clearing").trace_count(), 4);
    assert_eq!(function("clearing").retrace_reasons(), ["first call", "arg n: 1 -> 2", "the cache was cleared", "the cache was cleared"]);
}

// ------------------------------------------------------------------------------ the warning

#[graph_fn]
fn warned(n: i32) -> Tensor {
    Tensor::scalar(n)
}

/// The fifth trace within a function's recent calls logs a warning through `tracing`, naming
/// the function and what changed; the four before it do not.
#[test]
fn the_fifth_recent_trace_warns() {
    let (_, quiet) = capture_warnings(|| (1..=4).for_each(|n| drop(warned(n))));
    assert!(quiet.is_empty(), "no warning before the fifth trace:\n{}", quiet.join("\n"));
    let (_, warnings) = capture_warnings(|| drop(warned(5)));
    assert_eq!(warnings.len(), 1, "{}", warnings.join("\n"));
    let w = &warnings[0];
    for part in ["WARN", "tensor_core::graph_fn", "`warned` traced 5 times in its last 20 calls; trace 5 because arg n: 4 -> 5", "reduce_retracing"] {
        assert!(w.contains(part), "the warning mentions {part:?}: {w}");
    }
    let (_, again) = capture_warnings(|| drop(warned(5)));
    assert!(again.is_empty(), "a cached call does not warn");
    let (_, sixth) = capture_warnings(|| drop(warned(6)));
    assert_eq!(sixth.len(), 1);
    assert!(sixth[0].contains("`warned` traced 6 times in its last 20 calls; trace 6 because arg n: 5 -> 6"), "{}", sixth[0]);
}

#[graph_fn]
fn rarely_warned(n: i32) -> Tensor {
    Tensor::scalar(n)
}

/// Traces spread over many calls are not "excessive": five traces 25 calls apart log nothing.
#[test]
fn traces_spread_over_many_calls_do_not_warn() {
    let (_, warnings) = capture_warnings(|| {
        for n in 1..=6 {
            for _ in 0..5 {
                rarely_warned(n);
            }
        }
    });
    assert_eq!(function("rarely_warned").trace_count(), 6);
    assert!(warnings.is_empty(), "{}", warnings.join("\n"));
}

#[graph_fn]
fn unheard(n: i32) -> Tensor {
    Tensor::scalar(n)
}

#[graph_fn(max_traces = 1)]
fn unheard_limited(n: i32) -> Tensor {
    Tensor::scalar(n)
}

/// Set in the child process of `warnings_go_to_stderr_without_a_subscriber`.
const STDERR_CHILD: &str = "TENSOR_CORE_TEST_STDERR_CHILD";

/// The child: six traces and a `max_traces` overrun with no subscriber installed, then one
/// more warning after installing one.
fn warn_without_a_subscriber() {
    for n in 1..=6 {
        unheard(n);
    }
    unheard_limited(1);
    unheard_limited(2);
    let (_, captured) = capture_warnings(|| drop(unheard(7)));
    println!("captured {}", captured.len());
}

/// Without a `tracing` subscriber a warning is not lost: it goes to standard error, once.
/// Once a subscriber is installed, warnings go to it alone. (Run in a child process: this
/// binary's other tests install a global subscriber.)
#[test]
fn warnings_go_to_stderr_without_a_subscriber() {
    if std::env::var_os(STDERR_CHILD).is_some() {
        return warn_without_a_subscriber();
    }
    let test = "introspection::warnings_go_to_stderr_without_a_subscriber";
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe).args([test, "--exact", "--nocapture", "--test-threads=1"]).env(STDERR_CHILD, "1").output().expect("runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the child failed:\n{stdout}\n{stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.starts_with("WARN tensor_core::graph_fn: ")).collect();
    assert_eq!(warnings.len(), 3, "one line per warning:\n{stderr}");
    assert!(warnings[0].contains("`unheard` traced 5 times in its last 20 calls; trace 5 because arg n: 4 -> 5"), "{}", warnings[0]);
    assert!(warnings[1].contains("`unheard` traced 6 times in its last 20 calls; trace 6 because arg n: 5 -> 6"), "{}", warnings[1]);
    assert!(warnings[2].contains("unheard_limited: traced 2 times, more than max_traces = 1"), "{}", warnings[2]);
    assert!(stdout.contains("captured 1"), "the seventh trace's warning went to the subscriber:\n{stdout}");
}

// ------------------------------------------------------------------------- graphs as text

#[graph_fn(optimize = false)]
fn affine(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let y = x.mul(w)?;
    tprint!("y = {}", y);
    y.add(1.0)
}

/// Every concrete function prints as text (one line per node) and exports as DOT.
#[test]
fn concrete_functions_print_as_text_and_dot() -> Result<()> {
    let y = affine(&f32s(&[1.0, 2.0], &[2]), &f32s(&[3.0, 4.0], &[2]))?;
    assert_eq!(y.to_vec::<f32>()?, [4.0, 9.0]);
    affine(&f32s(&[1.0, 2.0, 3.0], &[3]), &f32s(&[3.0, 4.0, 5.0], &[3]))?;
    let f = function("affine");
    let graphs = f.concrete_functions();
    assert_eq!(graphs.len(), 2);
    let text = graphs[0].to_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "graph affine(x: f32[2], w: f32[2]) {", "{text}");
    assert!(lines[1].contains("= mul(x, w)"), "{text}");
    assert!(lines[2].starts_with("  tprint(\"y = {}\""), "{text}");
    assert!(lines[3].contains("= add"), "{text}");
    assert!(lines[4].starts_with("  return ("), "{text}");
    assert_eq!(lines.last(), Some(&"}"));
    assert!(graphs[1].to_text().starts_with("graph affine(x: f32[3], w: f32[3]) {"));
    let dot = graphs[0].to_dot();
    assert!(dot.starts_with("digraph \"affine\" {"), "{dot}");
    assert!(dot.contains("mul") && dot.contains("->"), "{dot}");
    assert_eq!(graphs[0].name(), "affine");
    Ok(())
}

#[graph_fn]
fn squashed(x: &Tensor) -> Result<Tensor> {
    x.mul(1.0)?.add(0.0)?.tanh()
}

/// The pass log shows the graph as traced and after each pass that changed it: `x * 1`
/// is bypassed by simplification (`x + 0.0` stays: it turns -0.0 into 0.0) and its dead node
/// removed by dead-code elimination; the last graph is the one that runs.
#[test]
fn the_pass_log_shows_the_graph_before_and_after_each_pass() -> Result<()> {
    let x = f32s(&[-0.0, 0.5, -2.0], &[3]);
    assert_eq!(squashed(&x)?.to_vec::<f32>()?, x.mul(1.0)?.add(0.0)?.tanh()?.to_vec::<f32>()?);
    let f = &function("squashed").concrete_functions()[0];
    let log = f.pass_log();
    let passes: Vec<&str> = log.iter().map(|(pass, _)| *pass).collect();
    assert_eq!(passes, ["traced", "simplify", "dce", "fuse_elementwise"]);
    let (traced, simplified, cleaned) = (&log[0].1, &log[1].1, &log[2].1);
    assert!(traced.contains("= mul[rhs=1.0](x)") && traced.contains("= add[rhs=0.0](v1)") && traced.contains("= tanh("), "{traced}");
    assert!(simplified.contains("= add[rhs=0.0](x)"), "the add reads x itself:\n{simplified}");
    assert!(!cleaned.contains("mul") && cleaned.contains("= add[rhs=0.0](x)") && cleaned.contains("= tanh("), "{cleaned}");
    assert_eq!(log.last().map(|(_, text)| text.as_str()), Some(f.to_text().as_str()), "the last is the graph that runs");
    let text = f.pass_log_text();
    assert!(text.starts_with("== traced ==\ngraph squashed(x: f32[3]) {"), "{text}");
    assert!(text.contains("== after simplify ==\n"), "{text}");
    Ok(())
}

#[graph_fn(optimize = false)]
fn unoptimized(x: &Tensor) -> Result<Tensor> {
    x.mul(1.0)
}

/// A function traced without optimization logs the traced graph only.
#[test]
fn the_pass_log_of_an_unoptimized_function_is_the_traced_graph() -> Result<()> {
    unoptimized(&f32s(&[1.0], &[1]))?;
    let f = &function("unoptimized").concrete_functions()[0];
    assert_eq!(f.pass_log(), [("traced", f.to_text())]);
    Ok(())
}

// ------------------------------------------------------------------------------- methods

#[derive(GraphArg)]
struct Layer {
    w: Tensor,
    b: Tensor,
}

impl Layer {
    #[graph_fn]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.w)?.add(&self.b)
    }
}

trait Model {
    fn predict(&self, x: &Tensor) -> Result<Tensor>;
}

impl Model for Layer {
    #[graph_fn]
    fn predict(&self, x: &Tensor) -> Result<Tensor> {
        self.forward(x)?.relu()
    }
}

/// Methods (inherent and in trait impls) are introspected like free functions, under
/// `Type::method`; their graphs name the receiver's fields (`self.w`).
#[test]
fn methods_are_introspected_too() -> Result<()> {
    let layer = Layer { w: f32s(&[1.0, -1.0, 2.0, 0.5], &[2, 2]), b: f32s(&[0.5, -10.0], &[2]) };
    let x = f32s(&[1.0, 1.0], &[1, 2]);
    assert_eq!(layer.forward(&x)?.to_vec::<f32>()?, [3.5, -10.5]);
    assert_eq!(layer.predict(&x)?.to_vec::<f32>()?, [3.5, 0.0]);
    assert_eq!(layer.predict(&f32s(&[1.0, 1.0, 2.0, 2.0], &[2, 2]))?.to_vec::<f32>()?, [3.5, 0.0, 6.5, 0.0]);
    let forward = function("Layer::forward");
    assert_eq!(forward.trace_count(), 1, "the nested call inside predict's trace is inlined");
    assert_eq!(forward.cached_signatures(), ["self: (w: f32[2, 2], b: f32[2]), x: f32[1, 2]"]);
    let predict = function("Layer::predict");
    assert_eq!(predict.trace_count(), 2);
    assert_eq!(predict.retrace_reasons(), ["first call", "arg x: shape [1, 2] -> [2, 2]"]);
    let text = predict.concrete_functions()[0].to_text();
    assert!(text.starts_with("graph Layer::predict(self.w: f32[2, 2], self.b: f32[2], x: f32[1, 2]) {"), "{text}");
    assert!(tensor_core::function::all().iter().any(|f| f.name() == "Layer::predict"));
    Ok(())
}

/// `Debug` shows a function's name, module, trace count, cached signatures and options, and a
/// concrete function's name, arguments and graph size.
#[test]
fn graph_functions_debug_print_what_they_hold() -> Result<()> {
    let layer = Layer { w: f32s(&[1.0, 0.0, 0.0, 1.0], &[2, 2]), b: f32s(&[0.0, 0.0], &[2]) };
    layer.forward(&f32s(&[1.0, 2.0], &[1, 2]))?;
    let f = format!("{:?}", function("Layer::forward"));
    let module = module_path!();
    assert!(f.starts_with(&format!("GraphFunction {{ name: \"Layer::forward\", module: \"{module}\", trace_count: 1, ")), "{f}");
    assert!(f.contains("cached_signatures: [\"self: (w: f32[2, 2], b: f32[2]), x: f32[1, 2]\"]"), "{f}");
    assert!(f.contains("options: Options { reduce_retracing: false, "), "{f}");
    let c = format!("{:?}", function("Layer::forward").concrete_functions()[0]);
    let args = "args: [\"self.w: f32[2, 2]\", \"self.b: f32[2]\", \"x: f32[1, 2]\"]";
    assert!(c.starts_with(&format!("ConcreteFunction {{ name: \"Layer::forward\", {args}, captures: 0, outputs: 1, nodes: ")), "{c}");
    assert!(c.ends_with("optimized: true }"), "{c}");
    Ok(())
}

// -------------------------------------------------------------------------------- lookup

struct Left;
struct Right;

impl GraphArg for Left {
    fn flatten(&self, _: &mut tensor_core::function::Flattener) {}
}

impl GraphArg for Right {
    fn flatten(&self, _: &mut tensor_core::function::Flattener) {}
}

impl Left {
    #[graph_fn]
    fn shift(&self, x: &Tensor) -> Tensor {
        x - 1.0
    }

    #[graph_fn]
    fn only_left(&self, x: &Tensor) -> Tensor {
        x * 2.0
    }

    #[graph_fn]
    fn also_free(&self, x: &Tensor) -> Tensor {
        x * 3.0
    }
}

impl Right {
    #[graph_fn]
    fn shift(&self, x: &Tensor) -> Tensor {
        x + 1.0
    }
}

#[graph_fn]
fn also_free(x: &Tensor) -> Tensor {
    x * 4.0
}

mod first {
    use tensor_core::prelude::*;
    #[graph_fn]
    pub fn same_name(x: &Tensor) -> Tensor {
        x + 10.0
    }
}

mod second {
    use tensor_core::prelude::*;
    #[graph_fn]
    pub fn same_name(x: &Tensor) -> Tensor {
        x + 20.0
    }
}

/// `lookup` takes a function's name, a method's `Type::method` or, when no other function
/// fits, its bare name, and any of these qualified by the module; a name that fits several
/// finds none, and a full name wins over a bare method name.
#[test]
fn lookup_accepts_bare_qualified_and_module_paths() {
    let x = f32s(&[1.0], &[1]);
    let _called =
        [Left.shift(&x), Right.shift(&x), Left.only_left(&x), Left.also_free(&x), also_free(&x), first::same_name(&x), second::same_name(&x)];
    let name = |n: &str| lookup(n).map(|f| f.name().to_string());
    let module = module_path!();
    assert_eq!(name("only_left").as_deref(), Some("Left::only_left"), "a method by its bare name");
    assert_eq!(name("Left::only_left").as_deref(), Some("Left::only_left"));
    assert_eq!(name(&format!("{module}::Left::only_left")).as_deref(), Some("Left::only_left"));
    assert_eq!(name("Left::shift").as_deref(), Some("Left::shift"));
    assert_eq!(name("Right::shift").as_deref(), Some("Right::shift"));
    assert_eq!(name("shift"), None, "two types have a `shift`");
    assert_eq!(name("also_free").as_deref(), Some("also_free"), "the full name wins over the method's bare name");
    assert_eq!(name("Left::also_free").as_deref(), Some("Left::also_free"));
    assert_eq!(name("same_name"), None, "two modules have a `same_name`");
    let in_first = lookup(&format!("{module}::first::same_name")).expect("qualified by its module");
    assert_eq!(in_first.module(), format!("{module}::first"));
    assert_eq!(name("Left::missing"), None);
    assert_eq!(name("nonexistent"), None);
}
