//! The differential check: a function of tensors runs eagerly and as a traced, optimized
//! graph — forward outputs, gradients, and the state it leaves in its inputs — on the data
//! traced with, on fresh data of the same signature, and on the first data again (the
//! graph's pooled buffers are reused by then); and, without gradients, as a graph traced with
//! its argument dims unknown. Every result must have the same bits.

use super::data::InputSpec;
use super::program::GradMode;
use super::Fallible;
use std::fmt;
use tensor_core::autograd::vjp;
use tensor_core::function::ConcreteFunction;
use tensor_core::shape::UNKNOWN;
use tensor_core::{no_grad, DType, Result, Shape, Tensor};

/// A function under test: the inputs in order, the outputs (the last one is the loss when a
/// gradient is taken).
pub type Function<'a> = &'a dyn Fn(&[Tensor]) -> Result<Vec<Tensor>>;

/// How a check ended when eager and graph agree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Agreement {
    /// Every result has the same bits.
    Same,
    /// Every result has the same bits, except gradients that are absent eagerly and zeros
    /// from the graph (what a `cond` or `while_loop` node's gradient gives for an input the
    /// run did not use: a known difference); the detail says where.
    SameButZeroGrads(String),
    /// The eager run failed, so there was nothing to compare (the generator made an invalid
    /// program); the message says why.
    EagerFailed(String),
}

/// Where eager and graph differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Which run: `"call 0 (traced data)"`, `"call 1 (fresh data)"`, ...
    pub run: String,
    /// Which result and how it differs.
    pub detail: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.run, self.detail)
    }
}

/// What a run leaves behind.
struct Outcome {
    outputs: Vec<Tensor>,
    grads: Vec<Option<Tensor>>,
    finals: Vec<Tensor>,
}

/// The data sets the graph is called with, in order: traced, fresh, traced again.
const CALLS: [(u64, &str); 3] = [(0, "call 0 (traced data)"), (1, "call 1 (fresh data)"), (0, "call 2 (traced data again)")];

/// Runs `f` eagerly and as a graph on the inputs `specs` describe and compares every result
/// bit for bit (NaN payloads included).
///
/// ```
/// use tensor_core::prelude::*;
/// use tests::fuzz::{check, Agreement, Dist, GradMode, InputSpec};
/// let specs = [InputSpec::new(DType::F32, &[2, 3], Dist::Normal, 1).requires_grad()];
/// let f = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].tanh()?.sum_axes(&[0, 1], false)?]) };
/// assert_eq!(check(&specs, GradMode::Backward, false, &f), Ok(Agreement::Same));
/// ```
pub fn check(specs: &[InputSpec], grad: GradMode, preset_grads: bool, f: Function) -> std::result::Result<Agreement, Mismatch> {
    check_with_fingerprint(specs, grad, preset_grads, true, f).0
}

/// [`check`] (without the relaxed trace unless `relaxed`), and a hash of every eager result
/// (errors hash their message), to compare the eager runs of different SIMD levels.
pub(super) fn check_with_fingerprint(
    specs: &[InputSpec],
    grad: GradMode,
    preset_grads: bool,
    relaxed: bool,
    f: Function,
) -> (std::result::Result<Agreement, Mismatch>, u64) {
    let eager: Vec<Result<Outcome>> = [0, 1].iter().map(|&set| run_eager(specs, grad, preset_grads, f, set)).collect();
    (compare_with_graph(specs, grad, preset_grads, relaxed, f, &eager), fingerprint(&eager))
}

fn compare_with_graph(
    specs: &[InputSpec],
    grad: GradMode,
    preset_grads: bool,
    relaxed: bool,
    f: Function,
    eager: &[Result<Outcome>],
) -> std::result::Result<Agreement, Mismatch> {
    if let Err(e) = &eager[0] {
        return Ok(Agreement::EagerFailed(e.to_string()));
    }
    let traced = leaves(specs, 0, preset_grads).map_err(|e| mismatch("setup", format!("{e}")))?;
    let names: Vec<String> = (0..specs.len()).map(|i| format!("x{i}")).collect();
    let args: Vec<(&str, &Tensor)> = arg_positions(specs).map(|i| (names[i].as_str(), &traced[i])).collect();
    let cf = match ConcreteFunction::trace("fuzz", &args, || body(f, &traced, specs, grad)) {
        Ok(cf) => cf,
        Err(e) => return Err(mismatch("trace", format!("tracing failed but eager ran: {e}"))),
    };
    let mut zero_grads = None;
    for (k, &(set, run)) in CALLS.iter().enumerate() {
        let tensors = if k == 0 { Ok(traced.clone()) } else { reuse_captures(specs, set, &traced, preset_grads) };
        let tensors = tensors.map_err(|e| mismatch(run, format!("setup: {e}")))?;
        let arg_refs: Vec<&Tensor> = arg_positions(specs).map(|i| &tensors[i]).collect();
        let got = cf.call(&arg_refs).map(|outputs| outcome(outputs, &tensors));
        let mut known = Vec::new();
        compare(&eager[set as usize], &got, &mut known).map_err(|d| mismatch(run, d))?;
        if zero_grads.is_none() && !known.is_empty() {
            zero_grads = Some(format!("{run}: {}", known.join("; ")));
        }
    }
    if relaxed && grad == GradMode::None {
        compare_relaxed(specs, grad, preset_grads, f, eager)?;
    }
    Ok(zero_grads.map_or(Agreement::Same, Agreement::SameButZeroGrads))
}

/// The same function traced with every argument dim unknown (as `reduce_retracing` and
/// `input_signature` with `?` trace), so the graph checks shapes as it runs and fused steps
/// meet their inputs' shapes only then; called on both data sets. Only for functions without
/// a gradient: gradients through broadcasts between unknown dims are known to be ambiguous
/// (docs/TESTING.md). A function that cannot be traced that way is skipped.
fn compare_relaxed(
    specs: &[InputSpec],
    grad: GradMode,
    preset_grads: bool,
    f: Function,
    eager: &[Result<Outcome>],
) -> std::result::Result<(), Mismatch> {
    let traced = leaves(specs, 0, preset_grads).map_err(|e| mismatch("setup", format!("{e}")))?;
    let names: Vec<String> = (0..specs.len()).map(|i| format!("x{i}")).collect();
    let args: Vec<(&str, &Tensor)> = arg_positions(specs).map(|i| (names[i].as_str(), &traced[i])).collect();
    let shapes: Vec<Shape> = arg_positions(specs).map(|i| Shape::new(&vec![UNKNOWN; specs[i].dims.len()])).collect();
    let Ok(cf) = ConcreteFunction::trace_with_shapes("fuzz_relaxed", &args, &shapes, true, || body(f, &traced, specs, grad)) else {
        return Ok(());
    };
    for (k, &(set, run)) in [(0, "relaxed call 0 (traced data)"), (1, "relaxed call 1 (fresh data)")].iter().enumerate() {
        let tensors = if k == 0 { Ok(traced.clone()) } else { reuse_captures(specs, set, &traced, preset_grads) };
        let tensors = tensors.map_err(|e| mismatch(run, format!("setup: {e}")))?;
        let arg_refs: Vec<&Tensor> = arg_positions(specs).map(|i| &tensors[i]).collect();
        let got = cf.call(&arg_refs).map(|outputs| outcome(outputs, &tensors));
        compare(&eager[set as usize], &got, &mut Vec::new()).map_err(|d| mismatch(run, d))?;
    }
    Ok(())
}

fn mismatch(run: &str, detail: String) -> Mismatch {
    Mismatch { run: run.to_string(), detail }
}

fn arg_positions(specs: &[InputSpec]) -> impl Iterator<Item = usize> + '_ {
    specs.iter().enumerate().filter(|(_, s)| !s.capture).map(|(i, _)| i)
}

/// New tensors holding data set `set`, requiring grad as specified, with `.grad` preset.
fn leaves(specs: &[InputSpec], set: u64, preset_grads: bool) -> Result<Vec<Tensor>> {
    specs
        .iter()
        .map(|s| {
            let t = s.tensor(set);
            if !s.requires_grad {
                return Ok(t);
            }
            let t = t.requires_grad_(true)?;
            if preset_grads {
                t.mul(0.5)?.sum().fallible()?.backward()?;
            }
            Ok(t)
        })
        .collect()
}

/// New argument tensors for data set `set`, and the traced function's captured tensors (the
/// same objects, as a closure keeps them) overwritten with that set's data.
fn reuse_captures(specs: &[InputSpec], set: u64, traced: &[Tensor], preset_grads: bool) -> Result<Vec<Tensor>> {
    let mut fresh = leaves(specs, set, preset_grads)?;
    for (i, _) in specs.iter().enumerate().filter(|(_, s)| s.capture) {
        no_grad(|| traced[i].assign_(&fresh[i]))?;
        fresh[i] = traced[i].clone();
    }
    Ok(fresh)
}

fn run_eager(specs: &[InputSpec], grad: GradMode, preset_grads: bool, f: Function, set: u64) -> Result<Outcome> {
    let tensors = leaves(specs, set, preset_grads)?;
    let outputs = body(f, &tensors, specs, grad)?;
    Ok(outcome(outputs, &tensors))
}

/// `f`, then the gradient `grad` asks for: the code both modes run.
fn body(f: Function, inputs: &[Tensor], specs: &[InputSpec], grad: GradMode) -> Result<Vec<Tensor>> {
    let mut outs = f(inputs)?;
    let wrt: Vec<&Tensor> = inputs.iter().zip(specs).filter(|(_, s)| s.requires_grad).map(|(t, _)| t).collect();
    let Some(loss) = outs.last().cloned() else { return Ok(outs) };
    match grad {
        GradMode::None => {}
        GradMode::Backward => loss.backward()?,
        GradMode::BackwardSgd(lr) => {
            loss.backward()?;
            no_grad(|| -> Result<()> {
                for p in &wrt {
                    if let Some(g) = p.grad() {
                        p.sub_(&g.mul(lr)?)?;
                    }
                }
                Ok(())
            })?;
        }
        GradMode::Functional => {
            let one = Tensor::ones(&[], loss.dtype());
            for g in vjp(&[&loss], &[&one], &wrt, false)? {
                // An input the loss does not depend on has no gradient: a bool marks it.
                outs.push(g.unwrap_or_else(|| Tensor::scalar(false)));
            }
        }
    }
    Ok(outs)
}

fn outcome(outputs: Vec<Tensor>, inputs: &[Tensor]) -> Outcome {
    Outcome { outputs, grads: inputs.iter().map(|t| t.grad()).collect(), finals: inputs.to_vec() }
}

/// Where `got` differs from `want`, in words; gradients absent eagerly and zeros from the
/// graph are listed in `known` instead.
fn compare(want: &Result<Outcome>, got: &Result<Outcome>, known: &mut Vec<String>) -> std::result::Result<(), String> {
    let (want, got) = match (want, got) {
        (Ok(w), Ok(g)) => (w, g),
        (Err(_), Err(_)) => return Ok(()),
        (Err(e), Ok(_)) => return Err(format!("eager failed ({e}) but the graph ran")),
        (Ok(_), Err(e)) => return Err(format!("the graph failed ({e}) but eager ran")),
    };
    if want.outputs.len() != got.outputs.len() {
        return Err(format!("{} outputs eagerly, {} from the graph", want.outputs.len(), got.outputs.len()));
    }
    for (i, (w, g)) in want.outputs.iter().zip(&got.outputs).enumerate() {
        if is_marker(w) && all_zero(g) {
            known.push(format!("output {i} (a gradient)"));
            continue;
        }
        same_bits(w, g).map_err(|d| format!("output {i}: {d}"))?;
    }
    for (i, (w, g)) in want.grads.iter().zip(&got.grads).enumerate() {
        match (w, g) {
            (None, None) => {}
            (Some(w), Some(g)) => same_bits(w, g).map_err(|d| format!(".grad of input {i}: {d}"))?,
            (None, Some(g)) if all_zero(g) => known.push(format!(".grad of input {i}")),
            _ => return Err(format!(".grad of input {i}: {} eagerly, {} from the graph", presence(w), presence(g))),
        }
    }
    for (i, (w, g)) in want.finals.iter().zip(&got.finals).enumerate() {
        same_bits(w, g).map_err(|d| format!("input {i} after the run: {d}"))?;
    }
    Ok(())
}

/// The bool scalar `body` puts where an input has no gradient.
fn is_marker(t: &Tensor) -> bool {
    t.dtype() == DType::Bool && t.dims().is_empty()
}

/// A float tensor of zeros (of either sign).
fn all_zero(t: &Tensor) -> bool {
    t.dtype().is_float() && t.cast(DType::F64).fallible().and_then(|t| t.to_vec::<f64>()).is_ok_and(|v| v.iter().all(|&x| x == 0.0))
}

fn presence(t: &Option<Tensor>) -> &'static str {
    if t.is_some() {
        "present"
    } else {
        "absent"
    }
}

/// The elements of `t` as bit patterns (floats by `to_bits`, so NaN payloads count).
pub fn bits(t: &Tensor) -> Result<Vec<u64>> {
    Ok(match t.dtype() {
        DType::F32 => t.to_vec::<f32>()?.iter().map(|v| v.to_bits() as u64).collect(),
        DType::F64 => t.to_vec::<f64>()?.iter().map(|v| v.to_bits()).collect(),
        DType::I32 => t.to_vec::<i32>()?.iter().map(|&v| v as u32 as u64).collect(),
        DType::I64 => t.to_vec::<i64>()?.iter().map(|&v| v as u64).collect(),
        DType::Bool => t.to_vec::<bool>()?.iter().map(|&v| v as u64).collect(),
    })
}

/// `Ok` when `g` has `w`'s dtype, dims and bits; else the first difference.
pub fn same_bits(w: &Tensor, g: &Tensor) -> std::result::Result<(), String> {
    if w.dtype() != g.dtype() || w.dims() != g.dims() {
        return Err(format!("type {:?}{:?} eagerly, {:?}{:?} from the graph", w.dtype(), w.dims(), g.dtype(), g.dims()));
    }
    let (bw, bg) = (bits(w).map_err(|e| e.to_string())?, bits(g).map_err(|e| e.to_string())?);
    match bw.iter().zip(&bg).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(k) => Err(format!(
            "element {k} of {:?}{:?} differs: eager {} ({:#x}), graph {} ({:#x})",
            w.dtype(),
            w.dims(),
            show(w.dtype(), bw[k]),
            bw[k],
            show(g.dtype(), bg[k]),
            bg[k]
        )),
    }
}

fn show(dtype: DType, bits: u64) -> String {
    match dtype {
        DType::F32 => format!("{:?}", f32::from_bits(bits as u32)),
        DType::F64 => format!("{:?}", f64::from_bits(bits)),
        DType::I32 => format!("{}", bits as u32 as i32),
        DType::I64 => format!("{}", bits as i64),
        DType::Bool => format!("{}", bits != 0),
    }
}

fn fingerprint(eager: &[Result<Outcome>]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for run in eager {
        match run {
            Err(e) => e.to_string().hash(&mut h),
            Ok(o) => {
                for t in o.outputs.iter().chain(o.grads.iter().flatten()).chain(&o.finals) {
                    (format!("{:?}", t.dtype()), t.dims(), bits(t).unwrap_or_default()).hash(&mut h);
                }
            }
        }
    }
    h.finish()
}
