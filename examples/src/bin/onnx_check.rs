//! ONNX conformance: runs test cases in ONNX's backend-test layout (`model.onnx` beside
//! `test_data_set_N/{input,output}_K.pb`) through `tensor_core::onnx::import`.
//!
//! ```text
//! cargo run --release -p examples --bin onnx_check -- [--rtol R] [--atol A] DIR...
//! ```
//!
//! Each DIR is a case or a folder of cases (searched recursively). Every case runs eagerly
//! and as a traced graph (float inputs as the graph's arguments, integer and bool inputs as
//! its constants: ops such as Reshape need those values when tracing, and so are the float
//! inputs `OnnxModel::value_inputs` names, such as Resize's scales, Dropout's ratio, OneHot's
//! depth or Range's bounds), twice; its outputs
//! must match the expected ones within ONNX's tolerances (rtol 1e-3, atol 1e-7, or those of
//! `--rtol` and `--atol`; integers and bools exactly: |got - expected| <= atol + rtol *
//! |expected|), and the graph's must equal eager's bit for bit. A case is skipped
//! only for an element type tensor-core lacks, with the reason. One line per case, then
//! `N passed, M failed, K skipped` and the failures grouped by op. The exit code is 0 when
//! no case failed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tensor_core::function::ConcreteFunction;
use tensor_core::onnx::OnnxModel;
use tensor_core::prelude::*;

enum Outcome {
    /// With the largest float error as a fraction of the tolerance.
    Pass(f64),
    Skip(String),
    /// The ops to blame, and what went wrong.
    Fail(Vec<String>, String),
}

/// How close a float output must be to the expected one: `|got - expected| <= atol + rtol *
/// |expected|`.
#[derive(Clone, Copy)]
struct Tolerance {
    rtol: f64,
    atol: f64,
}

const USAGE: &str = "usage: onnx_check [--rtol R] [--atol A] DIR... (ONNX backend-test cases, or folders of them; \
                     default rtol 1e-3, atol 1e-7)";

/// The tolerance and the folders from the command line, or what is wrong with it.
fn parse_args(args: impl Iterator<Item = String>) -> std::result::Result<(Tolerance, Vec<PathBuf>), String> {
    let mut tol = Tolerance { rtol: 1e-3, atol: 1e-7 };
    let mut dirs = Vec::new();
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        let slot = match arg.as_str() {
            "--rtol" => &mut tol.rtol,
            "--atol" => &mut tol.atol,
            "-h" | "--help" => return Err(USAGE.into()),
            _ => {
                dirs.push(PathBuf::from(arg));
                continue;
            }
        };
        let value = args.next().ok_or_else(|| format!("{arg} needs a number, as in `{arg} 1e-4`"))?;
        *slot = value.parse().ok().filter(|v: &f64| *v >= 0.0).ok_or_else(|| format!("{arg} {value}: expected a number >= 0, as in `{arg} 1e-4`"))?;
    }
    if dirs.is_empty() {
        return Err(USAGE.into());
    }
    Ok((tol, dirs))
}

fn main() {
    let (tol, dirs) = parse_args(std::env::args().skip(1)).unwrap_or_else(|why| {
        eprintln!("{why}");
        std::process::exit(2);
    });
    let mut cases = Vec::new();
    for d in &dirs {
        find_cases(d, &mut cases);
    }
    cases.sort();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut by_op: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for case in &cases {
        let name = case.file_name().map_or_else(|| case.display().to_string(), |n| n.to_string_lossy().into_owned());
        let outcome =
            std::panic::catch_unwind(|| run_case(case, tol)).unwrap_or_else(|_| Err(Outcome::Fail(vec!["(panic)".into()], "panicked".into())));
        match outcome.unwrap_or_else(|o| o) {
            Outcome::Pass(worst) => {
                passed += 1;
                match worst > 0.0 {
                    true => println!("PASS {name} (largest error {:.1}% of the tolerance)", worst * 100.0),
                    false => println!("PASS {name}"),
                }
            }
            Outcome::Skip(why) => {
                skipped += 1;
                println!("SKIP {name}: {why}");
            }
            Outcome::Fail(ops, why) => {
                failed += 1;
                println!("FAIL {name}: {why}");
                by_op.entry(ops.join("+")).or_default().push(name);
            }
        }
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    if !by_op.is_empty() {
        println!("failures by op:");
        let mut groups: Vec<_> = by_op.into_iter().collect();
        groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        for (op, names) in groups {
            println!("  {op} ({}): {}", names.len(), names.join(" "));
        }
    }
    std::process::exit(i32::from(failed > 0));
}

/// `dir` if it is a case, else the cases under it.
fn find_cases(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("model.onnx").is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if e.path().is_dir() {
            find_cases(&e.path(), out);
        }
    }
}

/// An import or read error as the case's outcome: a missing dtype skips it.
fn outcome(e: Error, ops: &[String]) -> Outcome {
    match e {
        Error::OnnxDType { .. } => Outcome::Skip(e.to_string()),
        Error::OnnxUnsupportedOps { ops, .. } => {
            let names = ops.iter().map(|o| o.split(' ').next().unwrap_or(o).to_string()).collect();
            Outcome::Fail(names, format!("unsupported: {}", ops.join(", ")))
        }
        Error::OnnxImport { ref op, .. } => Outcome::Fail(vec![op.clone()], e.to_string()),
        e => Outcome::Fail(ops.to_vec(), e.to_string()),
    }
}

fn run_case(case: &Path, tol: Tolerance) -> Result<Outcome, Outcome> {
    let model = tensor_core::onnx::import(case.join("model.onnx")).map_err(|e| outcome(e, &[]))?;
    let ops = model.ops().to_vec();
    let mut sets: Vec<PathBuf> =
        std::fs::read_dir(case).map_err(|e| Outcome::Fail(ops.clone(), e.to_string()))?.flatten().map(|e| e.path()).collect();
    sets.retain(|p| p.is_dir() && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("test_data_set_")));
    sets.sort();
    if sets.is_empty() {
        return Err(Outcome::Fail(ops, "no test_data_set_*".into()));
    }
    let mut worst = 0.0f64;
    for set in &sets {
        let fail = |why: String| Outcome::Fail(ops.clone(), why);
        let inputs = read_inputs(&model, set).map_err(|e| outcome(e, &ops))?;
        let expected = read_all(set, "output").map_err(|e| outcome(e, &ops))?;
        let refs: Vec<&Tensor> = inputs.iter().collect();
        let eager = model.call(&refs).map_err(|e| outcome(e, &ops))?;
        worst = worst.max(compare(&eager, &expected, tol).map_err(|why| fail(format!("eager: {why}")))?);
        let graph = run_graph(&model, &inputs).map_err(|e| outcome(e, &ops))?;
        for run in &graph {
            same_bits(&eager, run).map_err(|why| fail(format!("graph vs eager: {why}")))?;
        }
    }
    Ok(Outcome::Pass(worst))
}

/// The data set's `{prefix}_K.pb` files in order of K.
fn read_all(set: &Path, prefix: &str) -> Result<Vec<(String, Tensor)>> {
    let mut out = Vec::new();
    while set.join(format!("{prefix}_{}.pb", out.len())).is_file() {
        out.push(tensor_core::onnx::read_tensor(set.join(format!("{prefix}_{}.pb", out.len())))?);
    }
    Ok(out)
}

/// The inputs in the model's order: by name, else by position.
fn read_inputs(model: &OnnxModel, set: &Path) -> Result<Vec<Tensor>> {
    let read = read_all(set, "input")?;
    let by_name = |name: &str| read.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone());
    Ok(model.inputs().iter().enumerate().filter_map(|(i, info)| by_name(&info.name).or_else(|| read.get(i).map(|(_, t)| t.clone()))).collect())
}

/// The model traced (float inputs as arguments, the others as constants, and so are the
/// float inputs whose values nodes read, such as Resize's scales), called twice.
fn run_graph(model: &OnnxModel, inputs: &[Tensor]) -> Result<Vec<Vec<Tensor>>> {
    let values = model.value_inputs();
    let argument = |name: &str, t: &Tensor| t.dtype().is_float() && !values.contains(&name);
    let args: Vec<(String, &Tensor)> =
        model.inputs().iter().zip(inputs).filter(|(i, t)| argument(&i.name, t)).map(|(i, t)| (i.name.clone(), t)).collect();
    let named: Vec<(&str, &Tensor)> = args.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let host = model
        .inputs()
        .iter()
        .zip(inputs)
        .map(|(i, t)| if argument(&i.name, t) { Ok(Host::Argument) } else { Host::of(t) })
        .collect::<Result<Vec<_>>>()?;
    let f = ConcreteFunction::trace("onnx_case", &named, || {
        let all: Vec<Tensor> = inputs.iter().zip(&host).map(|(t, h)| h.remake().unwrap_or_else(|| t.clone())).collect();
        model.call(&all.iter().collect::<Vec<_>>())
    })?;
    let call_args: Vec<&Tensor> = args.iter().map(|(_, t)| *t).collect();
    Ok(vec![f.call(&call_args)?, f.call(&call_args)?])
}

/// An integer or bool input's values (or a float one a node reads as values), read before
/// tracing, to be made into a constant of the graph inside it (other float inputs are
/// arguments instead).
enum Host {
    F32(ndarray::ArrayD<f32>),
    F64(ndarray::ArrayD<f64>),
    I32(ndarray::ArrayD<i32>),
    I64(ndarray::ArrayD<i64>),
    Bool(ndarray::ArrayD<bool>),
    Argument,
}

impl Host {
    fn of(t: &Tensor) -> Result<Host> {
        Ok(match t.dtype() {
            DType::I32 => Host::I32(t.to_array()?),
            DType::I64 => Host::I64(t.to_array()?),
            DType::Bool => Host::Bool(t.to_array()?),
            DType::F32 => Host::F32(t.to_array()?),
            DType::F64 => Host::F64(t.to_array()?),
        })
    }

    fn remake(&self) -> Option<Tensor> {
        match self {
            Host::F32(a) => Some(Tensor::from(a.clone())),
            Host::F64(a) => Some(Tensor::from(a.clone())),
            Host::I32(a) => Some(Tensor::from(a.clone())),
            Host::I64(a) => Some(Tensor::from(a.clone())),
            Host::Bool(a) => Some(Tensor::from(a.clone())),
            Host::Argument => None,
        }
    }
}

/// Values as f64 (for comparing within tolerance) and as bits (for comparing exactly).
fn values(t: &Tensor) -> std::result::Result<(Vec<f64>, Vec<u64>), String> {
    let e = |e: Error| e.to_string();
    Ok(match t.dtype() {
        DType::F32 => {
            let v = t.to_vec::<f32>().map_err(e)?;
            (v.iter().map(|&x| x as f64).collect(), v.iter().map(|x| x.to_bits() as u64).collect())
        }
        DType::F64 => {
            let v = t.to_vec::<f64>().map_err(e)?;
            (v.clone(), v.iter().map(|x| x.to_bits()).collect())
        }
        _ => {
            let v = t.cast(DType::I64).map_err(e)?.to_vec::<i64>().map_err(e)?;
            (v.iter().map(|&x| x as f64).collect(), v.iter().map(|&x| x as u64).collect())
        }
    })
}

/// `Ok` with the largest float error as a fraction of its tolerance (0 when all are exact),
/// or the first element out of tolerance and how many are.
fn compare(got: &[Tensor], expected: &[(String, Tensor)], tol: Tolerance) -> std::result::Result<f64, String> {
    if got.len() != expected.len() {
        return Err(format!("{} outputs, expected {}", got.len(), expected.len()));
    }
    let mut worst = 0.0f64;
    for (k, (g, (_, e))) in got.iter().zip(expected).enumerate() {
        if g.dims() != e.dims() || g.dtype() != e.dtype() {
            return Err(format!("output {k} is {} {:?}, expected {} {:?}", g.dtype(), g.dims(), e.dtype(), e.dims()));
        }
        let ((gv, gb), (ev, eb)) = (values(g)?, values(e)?);
        let float = g.dtype().is_float();
        let (mut first_bad, mut bad) = (None, 0usize);
        for (i, ((a, b), (abits, bbits))) in gv.iter().zip(&ev).zip(gb.iter().zip(&eb)).enumerate() {
            let ok = if float {
                let exact = (a.is_nan() && b.is_nan()) || a == b;
                let used = if exact { 0.0 } else { (a - b).abs() / (tol.atol + tol.rtol * b.abs()) };
                worst = worst.max(used);
                exact || used <= 1.0
            } else {
                abits == bbits
            };
            if !ok {
                bad += 1;
                first_bad.get_or_insert((i, *a, *b));
            }
        }
        if let Some((i, a, b)) = first_bad {
            return Err(format!("output {k} element {i} is {a}, expected {b} ({bad} of {} elements out of tolerance)", gv.len()));
        }
    }
    Ok(worst)
}

fn same_bits(eager: &[Tensor], graph: &[Tensor]) -> std::result::Result<(), String> {
    if eager.len() != graph.len() {
        return Err(format!("{} outputs, eager {}", graph.len(), eager.len()));
    }
    for (k, (a, b)) in eager.iter().zip(graph).enumerate() {
        if a.dims() != b.dims() || a.dtype() != b.dtype() || values(a)?.1 != values(b)?.1 {
            return Err(format!("output {k} differs"));
        }
    }
    Ok(())
}
