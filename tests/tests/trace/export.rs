//! Exported graphs: a concrete function to one file and back — the same bits, training
//! steps that update the caller's tensors, control flow, `tprint!` and fused programs — and
//! every kind of bad file or call as a clear `Err`, never a panic.

use proptest::prelude::*;
use std::process::Command;
use tensor_core::export::{self, LoadedFunction};
use tensor_core::function::{lookup, ConcreteFunction};
use tensor_core::io::StateDict;
use tensor_core::optim::{Adam, Optimizer};
use tensor_core::prelude::*;

fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype() && a.dims() == b.dims() && a.bit_eq(b).unwrap()
}

fn round_trip(f: &ConcreteFunction) -> LoadedFunction {
    export::load_bytes(&f.export_bytes().expect("exports")).expect("loads")
}

// ----------------------------------------------------------------------------- a small CNN

/// A LeNet-like model: conv + relu + pool, twice, then two dense layers; Adam left out of
/// the signature (captured by the training step).
#[derive(GraphArg)]
struct Cnn {
    c1: Tensor,
    c1b: Tensor,
    c2: Tensor,
    c2b: Tensor,
    f1: Tensor,
    f1b: Tensor,
    f2: Tensor,
    f2b: Tensor,
    #[graph_arg(skip)]
    opt: Option<Adam>,
}

impl Cnn {
    fn new(seed: u64) -> Cnn {
        let p = |shape: &[usize], s: u64| (Tensor::randn(shape, DType::F32, seed * 10 + s) * 0.3f32).requires_grad_(true).unwrap();
        let mut m = Cnn {
            c1: p(&[4, 1, 3, 3], 1),
            c1b: p(&[4], 2),
            c2: p(&[6, 4, 3, 3], 3),
            c2b: p(&[6], 4),
            f1: p(&[24, 16], 5),
            f1b: p(&[16], 6),
            f2: p(&[16, 5], 7),
            f2b: p(&[5], 8),
            opt: None,
        };
        m.opt = Some(Adam::new(m.live(), 0.01).unwrap());
        m
    }

    /// The parameters (live handles), in declaration order.
    fn live(&self) -> Vec<Tensor> {
        [&self.c1, &self.c1b, &self.c2, &self.c2b, &self.f1, &self.f1b, &self.f2, &self.f2b].into_iter().cloned().collect()
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = x.conv2d(&self.c1, Some(&self.c1b), [1, 1], [1, 1])?.relu()?.max_pool2d([2, 2], [2, 2])?; // 4@6x6
        let h = h.conv2d(&self.c2, Some(&self.c2b), [1, 1], [0, 0])?.relu()?.max_pool2d([2, 2], [2, 2])?; // 6@2x2
        let h = h.flatten_from(1)?.matmul(&self.f1)?.add(&self.f1b)?.tanh()?;
        h.matmul(&self.f2)?.add(&self.f2b)
    }

    #[graph_fn]
    fn predict(&self, x: &Tensor) -> Result<Tensor> {
        self.forward(x)?.softmax(1)
    }

    #[graph_fn]
    fn train_step(&self, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        let opt = self.opt.as_ref().expect("an optimizer");
        opt.zero_grad()?;
        let loss = self.forward(x)?.cross_entropy(y)?;
        loss.backward()?;
        opt.step()?;
        Ok(loss)
    }
}

fn images(seed: u64) -> Tensor {
    Tensor::randn(&[3, 1, 12, 12], DType::F32, seed)
}

fn labels() -> Tensor {
    Tensor::from_vec(vec![0i64, 3, 4], &[3]).unwrap()
}

/// The exported `Cnn::predict` for `images`' shape.
fn predict_function() -> ConcreteFunction {
    let m = Cnn::new(1);
    m.predict(&images(0)).unwrap();
    lookup("Cnn::predict").unwrap().concrete_functions().into_iter().next().unwrap()
}

#[test]
fn a_loaded_forward_graph_gives_the_originals_bits_with_its_fused_programs() -> Result<()> {
    let m = Cnn::new(1);
    let x = images(5);
    let expected = m.predict(&x)?;
    let f = predict_function();
    let path = std::env::temp_dir().join(format!("tc-export-predict-{}.tcg", std::process::id()));
    f.export(&path)?;
    let loaded = export::load(&path)?;
    std::fs::remove_file(&path).unwrap();
    let mut args: Vec<Tensor> = m.live();
    args.push(x.clone());
    let refs: Vec<&Tensor> = args.iter().collect();
    let out = loaded.call(&refs)?;
    assert!(same_bits(&out[0], &expected));
    assert_eq!(loaded.to_text(), f.to_text(), "the same graph, node for node");
    let g = loaded.graph();
    assert!(g.count_op("epilogue") >= 2 && g.count_op("fused") + g.count_op("epilogue") >= 3, "{}", loaded.to_text());
    let names: Vec<&str> = loaded.args().iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["self.c1", "self.c1b", "self.c2", "self.c2b", "self.f1", "self.f1b", "self.f2", "self.f2b", "x"]);
    Ok(())
}

#[test]
fn captured_weights_travel_in_the_file() -> Result<()> {
    let m = Cnn::new(2);
    let x = images(6);
    let f = no_grad(|| ConcreteFunction::trace("cnn_forward", &[("x", &x)], || Ok(vec![m.forward(&x)?])))?;
    let loaded = round_trip(&f);
    assert_eq!(loaded.args().len(), 1, "only the image is an argument");
    assert_eq!(loaded.captures().len(), 8);
    for seed in [7, 8] {
        let x = images(seed);
        assert!(same_bits(&loaded.call(&[&x])?[0], &m.forward(&x)?));
    }
    // The loaded function owns copies: changing the model does not change it.
    no_grad(|| m.c1.mul_(0.0))?;
    assert!(!same_bits(&loaded.call(&[&x])?[0], &m.forward(&x)?));
    Ok(())
}

/// `Cnn::train_step` is traced by this file's tests on several models (one per model): each
/// takes this lock while it traces and picks its function, which is then the last one.
static CNN_TRAIN_STEP: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_loaded_training_step_updates_the_callers_parameters_as_the_original_does() -> Result<()> {
    let (x, y) = (images(9), labels());
    // The original: one step (which traces), then the export, then two more steps.
    let original = Cnn::new(3);
    let tracing = CNN_TRAIN_STEP.lock().unwrap_or_else(|e| e.into_inner());
    let first = original.train_step(&x, &y)?;
    let f = lookup("Cnn::train_step").unwrap().concrete_functions().pop().unwrap();
    drop(tracing);
    let loaded = round_trip(&f);
    assert_eq!(loaded.captures().len(), 3 * 8 + 3, "Adam's step, exp_avg and exp_avg_sq for each parameter, and its lr and betas");
    // A copy of the model as it was after the first step, trained by the loaded step.
    let mut copy = Cnn::new(4);
    copy.load_state_dict(&original.state_dict()?)?;
    let mut args: Vec<Tensor> = copy.live();
    args.extend([x.clone(), y.clone()]);
    let refs: Vec<&Tensor> = args.iter().collect();
    for step in 0..2 {
        let expected = original.train_step(&x, &y)?;
        let got = loaded.call(&refs)?;
        assert!(same_bits(&got[0], &expected), "step {step}: {} vs {}", got[0], expected);
        for (a, b) in original.live().iter().zip(copy.live()) {
            assert!(same_bits(a, &b), "step {step}: the caller's parameters are updated in place");
            assert!(same_bits(&a.grad().unwrap(), &b.grad().unwrap()), "and their .grad");
        }
    }
    assert!(first.item::<f32>()? > 0.0);
    Ok(())
}

// ----------------------------------------------------------------------------- control flow

#[graph_fn]
fn collatz_steps(start: &Tensor) -> Result<Tensor> {
    let mut n = start.clone();
    let mut steps = Tensor::scalar(0i64);
    while n.gt(1)? {
        let even = n.compare(tensor_core::ops::CmpOp::Eq, &n.div(2)?.mul(2)?)?;
        if even {
            n = n.div(2)?;
        } else {
            n = n.mul(3)?.add(1)?;
        }
        steps = steps.add(1)?;
    }
    Ok(steps)
}

#[test]
fn cond_and_while_loops_survive_the_round_trip() -> Result<()> {
    collatz_steps(&Tensor::scalar(6i64))?;
    let f = lookup("collatz_steps").unwrap().concrete_functions().into_iter().next().unwrap();
    let text = f.to_text();
    assert!(text.contains("while") && text.contains("cond"), "{text}");
    let loaded = round_trip(&f);
    for start in [1i64, 6, 7, 27] {
        let x = Tensor::scalar(start);
        let (got, expected) = (loaded.call(&[&x])?, collatz_steps(&x)?);
        assert_eq!(got[0].item::<i64>()?, expected.item::<i64>()?, "start {start}");
    }
    assert_eq!(loaded.call(&[&Tensor::scalar(27i64)])?[0].item::<i64>()?, 111);
    Ok(())
}

#[test]
fn tprint_lines_of_a_loaded_function_are_the_originals() {
    let out = Command::new(env!("CARGO_BIN_EXE_tprint_demo")).output().expect("the demo binary runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect();
    let section = |name: &str| -> Vec<String> {
        let start = lines.iter().position(|l| *l == format!("== {name}")).unwrap();
        lines[start + 1..].iter().take_while(|l| !l.starts_with("== ")).cloned().collect()
    };
    let original = section("original");
    assert_eq!(original[..3], ["x = 1.0".to_string(), "total   1.00".to_string(), format!("positive {}", Tensor::scalar(1.0f32))]);
    assert!(original.contains(&"not positive".to_string()));
    assert_eq!(section("loaded"), original);
}

// ----------------------------------------------------------------------------- bad files

/// The graph section's JSON of an exported file, and the file with another graph section
/// (the header's length and checksum made to match, as the format documents them).
fn graph_json(file: &[u8]) -> serde_json::Value {
    let len = u64::from_le_bytes(file[16..24].try_into().unwrap()) as usize;
    serde_json::from_slice(&file[40..40 + len]).unwrap()
}

fn reseal(file: &[u8], graph: &[u8]) -> Vec<u8> {
    let old = u64::from_le_bytes(file[16..24].try_into().unwrap()) as usize;
    let tensors = &file[40 + old..];
    let mut out = file[..40].to_vec();
    out[16..24].copy_from_slice(&(graph.len() as u64).to_le_bytes());
    out[32..36].copy_from_slice(&crc32fast::hash(graph).to_le_bytes());
    out.extend_from_slice(graph);
    out.extend_from_slice(tensors);
    out
}

fn small_function() -> ConcreteFunction {
    let w = Tensor::randn(&[3, 2], DType::F32, 1);
    let x = Tensor::ones(&[4, 3], DType::F32);
    ConcreteFunction::trace("small", &[("x", &x)], || Ok(vec![x.matmul(&w)?.tanh()?.sum_axes(&[1], false)?])).unwrap()
}

fn load_err(bytes: &[u8]) -> String {
    export::load_bytes(bytes).expect_err("a bad file must not load").to_string()
}

#[test]
fn every_truncation_and_every_flipped_byte_is_an_error() {
    let file = small_function().export_bytes().unwrap();
    for len in 0..file.len() {
        let err = load_err(&file[..len]);
        assert!(err.contains("not a valid tensor-core graph file"), "cut to {len}: {err}");
    }
    for at in 0..file.len() {
        let mut bad = file.clone();
        bad[at] ^= 0x24;
        load_err(&bad);
    }
}

#[test]
fn a_newer_version_is_named() {
    let mut file = small_function().export_bytes().unwrap();
    file[8..12].copy_from_slice(&(export::VERSION + 1).to_le_bytes());
    let err = load_err(&file);
    assert!(err.contains("tensor-core graph version 2 is newer than this build reads (up to version 1)"), "{err}");
}

#[test]
fn graphs_whose_nodes_do_not_check_are_errors_naming_the_node() {
    let file = small_function().export_bytes().unwrap();
    let json = graph_json(&file);
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut j = json.clone();
        f(&mut j);
        load_err(&reseal(&file, &serde_json::to_vec(&j).unwrap()))
    };
    let nodes = |j: &mut serde_json::Value| j["graph"]["nodes"].as_array_mut().unwrap().clone();
    assert!(nodes(&mut json.clone()).len() >= 2, "{json}");
    // A node reading a value that does not exist.
    let err = edit(&|j| j["graph"]["nodes"][0]["inputs"][0] = 999.into());
    assert!(err.contains("node 0") && err.contains("value 999"), "{err}");
    // A value whose type is not what its node computes.
    let err = edit(&|j| {
        let out = j["graph"]["nodes"][0]["outputs"][0].as_u64().unwrap() as usize;
        j["graph"]["values"][out]["shape"] = serde_json::json!([4, 7]);
    });
    assert!(err.contains("does not check") || err.contains("node 0"), "{err}");
    // An attribute out of range.
    let err = edit(&|j| {
        let last = j["graph"]["nodes"].as_array().unwrap().len() - 1;
        j["graph"]["nodes"][last]["kind"] = serde_json::json!({"op": {"reduction": {"reduce": {"op": "sum", "axes": [5], "keepdim": false}}}});
    });
    assert!(err.contains("axis 5 is out of range"), "{err}");
    // An op that does not exist, and a field this version does not know.
    let err = edit(&|j| j["graph"]["nodes"][0]["kind"] = serde_json::json!({"op": {"linalg": "dot"}}));
    assert!(err.contains("is not the expected JSON"), "{err}");
    let err = edit(&|j| j["surprise"] = true.into());
    assert!(err.contains("unknown field `surprise`"), "{err}");
    // A huge value.
    let err = edit(&|j| j["graph"]["values"][0]["shape"] = serde_json::json!([1u64 << 40, 1 << 20]));
    assert!(err.contains("larger than"), "{err}");
}

#[test]
fn calls_that_do_not_match_the_signature_are_errors() -> Result<()> {
    let loaded = round_trip(&small_function());
    let cases = [
        (vec![], "called with 0 tensor argument(s), but it takes 1: x"),
        (vec![Tensor::ones(&[4, 3], DType::F64)], "expected f32[4, 3], found f64[4, 3]"),
        (vec![Tensor::ones(&[3, 4], DType::F32)], "expected f32[4, 3], found f32[3, 4]"),
        (vec![Tensor::ones(&[4, 3], DType::F32), Tensor::ones(&[1], DType::F32)], "called with 2 tensor argument(s), but it takes 1: x"),
    ];
    for (args, expected) in cases {
        let refs: Vec<&Tensor> = args.iter().collect();
        let err = loaded.call(&refs).unwrap_err().to_string();
        assert!(err.contains(expected), "{err}\nexpected: {expected}");
    }
    Ok(())
}

#[test]
fn unreadable_and_missing_files_are_errors() {
    let dir = std::env::temp_dir();
    assert!(export::load(dir.join(format!("tc-missing-{}.tcg", std::process::id()))).unwrap_err().to_string().contains("cannot read"));
    assert!(load_err(b"TCGRAPH\0").contains("shorter than the 40-byte header"));
    assert!(load_err(b"PK\x03\x04 a zip file").contains("does not start as a tensor-core graph file does"));
}

// ----------------------------------------------------------------------------- fuzzing

/// Calls `f` with zeros of its signature (unknown dims as 1), when its values are small
/// and it has no loop (a mutated loop condition may never end): it may fail, not panic.
fn call_with_zeros(f: &LoadedFunction) {
    let g = f.graph();
    let looping = |g: &tensor_core::graph::Graph| g.nodes.iter().any(|n| n.kind_name() == "while");
    let bytes =
        g.values.iter().map(|v| v.shape.dims().iter().fold(8usize, |n, &d| n.saturating_mul(d.min(1 << 20)))).fold(0usize, usize::saturating_add);
    if looping(g) || bytes > 64 << 20 {
        return;
    }
    let args: Vec<Tensor> = f
        .args()
        .iter()
        .map(|a| {
            let dims: Vec<usize> = a.shape.dims().iter().map(|&d| if d == tensor_core::shape::UNKNOWN { 1 } else { d }).collect();
            Tensor::zeros(&dims, a.dtype)
        })
        .collect();
    let refs: Vec<&Tensor> = args.iter().collect();
    let _ = f.call(&refs);
}

/// Real exported files: a forward CNN with epilogues and fused programs, a training step,
/// and a graph with `cond` and `while`.
fn corpus() -> Vec<Vec<u8>> {
    static FILES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    FILES
        .get_or_init(|| {
            let m = Cnn::new(11);
            let _tracing = CNN_TRAIN_STEP.lock().unwrap_or_else(|e| e.into_inner());
            m.train_step(&images(1), &labels()).unwrap();
            collatz_steps(&Tensor::scalar(3i64)).unwrap();
            let first = |name: &str| lookup(name).unwrap().concrete_functions().into_iter().next().unwrap();
            [predict_function(), first("Cnn::train_step"), first("collatz_steps"), small_function()]
                .iter()
                .map(|f| f.export_bytes().unwrap())
                .collect()
        })
        .clone()
}

/// Edits of the graph section's text: mostly a digit replaced (ids, dims and attributes:
/// edits that keep the JSON valid and reach the checks), else a byte changed, a span
/// removed or a byte inserted.
fn mutate_text(text: &mut Vec<u8>, edits: &[(prop::sample::Index, u8, u8)]) {
    for (at, byte, kind) in edits {
        if text.is_empty() {
            return;
        }
        let i = at.index(text.len());
        match kind {
            0..=3 => {
                let digits: Vec<usize> = (0..text.len()).filter(|&k| text[k].is_ascii_digit()).collect();
                if !digits.is_empty() {
                    text[digits[i % digits.len()]] = b'0' + byte % 10;
                }
            }
            4 => text[i] = *byte,
            5 => drop(text.drain(i..(i + 1 + *byte as usize % 16).min(text.len()))),
            _ => text.insert(i, *byte),
        }
    }
}

proptest! {
    // Bounded to a few seconds in `cargo test`; PROPTEST_CASES=20000 runs longer (see
    // docs/EXPORT.md).
    #![proptest_config(ProptestConfig { cases: tests::proptest_cases(48), ..ProptestConfig::default() })]

    /// A real file with its graph section edited (and resealed, so the edits reach the
    /// parser and the checks) loads or fails with an `Err`, and a loaded one runs or fails
    /// with an `Err`: never a panic.
    #[test]
    fn edited_graph_sections_load_or_fail_cleanly(which in 0usize..4, edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..7), 1..4)) {
        let file = &corpus()[which];
        let len = u64::from_le_bytes(file[16..24].try_into().unwrap()) as usize;
        let mut text = file[40..40 + len].to_vec();
        mutate_text(&mut text, &edits);
        if let Ok(f) = export::load_bytes(&reseal(file, &text)) {
            call_with_zeros(&f);
        }
    }

    /// A real file with bytes flipped, cut or inserted anywhere: an `Err`, never a panic.
    #[test]
    fn damaged_files_are_errors(which in 0usize..4, edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4)) {
        let original = &corpus()[which];
        let mut file = original.clone();
        for (at, byte, kind) in &edits {
            if file.is_empty() {
                break;
            }
            let i = at.index(file.len());
            match kind {
                0 => file[i] ^= (*byte).max(1),
                1 => file.truncate(i),
                _ => file.insert(i, *byte),
            }
        }
        prop_assert!(file == *original || export::load_bytes(&file).is_err());
    }
}

// ----------------------------------------------------------------------------- matmul forms

/// Products reading an operand transposed (`matmul_t`) export with their flags, load and run
/// with the bits the traced function gives.
#[test]
fn transposed_matmul_operands_survive_the_round_trip() -> Result<()> {
    let (m, a) = (Tensor::randn(&[3, 4], DType::F32, 1), Tensor::randn(&[2, 1, 3, 4], DType::F32, 2));
    let (b, c) = (Tensor::randn(&[5, 2, 4], DType::F32, 3), Tensor::randn(&[5, 3, 2], DType::F32, 4));
    let d = Tensor::randn(&[6, 3], DType::F32, 5);
    let args = [("m", &m), ("a", &a), ("b", &b), ("c", &c), ("d", &d)];
    let f = ConcreteFunction::trace("flags", &args, || {
        Ok(vec![
            m.matmul_t(&m, false, true)?,
            m.matmul_t(&m, true, false)?,
            a.matmul_t(&b, false, true)?,
            a.matmul_t(&c, true, false)?,
            a.matmul_t(&d, true, true)?,
        ])
    })?;
    let loaded = round_trip(&f);
    let (ours, theirs) = (f.call(&[&m, &a, &b, &c, &d])?, loaded.call(&[&m, &a, &b, &c, &d])?);
    let dims: Vec<Vec<usize>> = theirs.iter().map(|t| t.dims().to_vec()).collect();
    assert_eq!(dims, vec![vec![3, 3], vec![4, 4], vec![2, 5, 3, 2], vec![2, 5, 4, 2], vec![2, 1, 4, 6]]);
    for (x, y) in ours.iter().zip(&theirs) {
        tests::assert_bits_eq(x, y);
    }
    Ok(())
}

/// Matrix × vector, vector × matrix, vector · vector and broadcast batches export, load and
/// run with the bits the traced function gives.
#[test]
fn matmul_vector_and_batched_forms_survive_the_round_trip() -> Result<()> {
    let (m, v) = (Tensor::randn(&[3, 4], DType::F32, 1), Tensor::randn(&[4], DType::F32, 2));
    let (a, b) = (Tensor::randn(&[2, 1, 3, 4], DType::F32, 3), Tensor::randn(&[5, 4, 2], DType::F32, 4));
    let args = [("m", &m), ("v", &v), ("a", &a), ("b", &b)];
    let f = ConcreteFunction::trace("forms", &args, || Ok(vec![m.matmul(&v)?, v.matmul(&m.t()?)?, v.matmul(&v)?, a.matmul(&b)?, a.matmul(&v)?]))?;
    let loaded = round_trip(&f);
    let (ours, theirs) = (f.call(&[&m, &v, &a, &b])?, loaded.call(&[&m, &v, &a, &b])?);
    let dims: Vec<Vec<usize>> = theirs.iter().map(|t| t.dims().to_vec()).collect();
    assert_eq!(dims, vec![vec![3], vec![3], vec![], vec![2, 5, 3, 2], vec![2, 1, 3]]);
    for (x, y) in ours.iter().zip(&theirs) {
        tests::assert_bits_eq(x, y);
    }
    Ok(())
}

// ----------------------------------------------------------- symbolic dims and their guards

/// An evaluation step (forward and loss) whose host code checks the batch (a guard
/// `n0 <= 64` on the trace). (A whole training step with a relaxed batch: `export_relaxed.rs`.)
fn guarded_step(m: &Cnn, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    if x.dim(0) > 64 {
        return Err(Error::InvalidArgument { op: "guarded_step", arg: "x", reason: "batches of at most 64".into() });
    }
    m.forward(x)?.cross_entropy(y)
}

#[test]
fn a_step_traced_with_a_relaxed_batch_serves_every_batch_its_guards_admit() -> Result<()> {
    use tensor_core::shape::UNKNOWN;
    let batch = |b: usize, seed: u64| {
        let x = Tensor::randn(&[b, 1, 12, 12], DType::F32, seed);
        let y = Tensor::from_vec((0..b as i64).map(|i| i % 5).collect::<Vec<_>>(), &[b]).unwrap();
        (x, y)
    };
    let (traced, eager) = (Cnn::new(3), Cnn::new(3));
    let (x, y) = batch(2, 0);
    let shapes = [Shape::new(&[UNKNOWN, 1, 12, 12]), Shape::new(&[UNKNOWN])];
    let f = no_grad(|| {
        ConcreteFunction::trace_with_shapes("lenet_step", &[("x", &x), ("y", &y)], &shapes, true, || Ok(vec![guarded_step(&traced, &x, &y)?]))
    })?;
    assert_eq!(f.guards(), ["n0 <= 64"]);
    assert_eq!(f.symbols(), ["n0 = x dim 0", "n1 = y dim 0"]);
    assert!(f.to_text().contains("x: f32[n0, 1, 12, 12], y: i64[n1]"), "{}", f.to_text());
    let loaded = round_trip(&f);
    assert_eq!(loaded.guards(), ["n0 <= 64"]);
    // One file serves batches 1, 7 and 64, with the bits of the eager steps.
    for (k, b) in [1, 7, 64].into_iter().enumerate() {
        let (x, y) = batch(b, 10 + k as u64);
        let want = no_grad(|| guarded_step(&eager, &x, &y))?;
        let got = loaded.call(&[&x, &y])?;
        assert!(same_bits(&got[0], &want), "batch {b}");
    }
    let (x, y) = batch(65, 20);
    let err = loaded.call(&[&x, &y]).unwrap_err().to_string();
    assert!(err.contains("arg x dim 0 = 65 fails n0 <= 64"), "{err}");
    assert!(f.call(&[&x, &y]).unwrap_err().to_string().contains("fails n0 <= 64"));
    Ok(())
}
