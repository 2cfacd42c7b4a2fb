//! ONNX import: the committed node cases (tests/fixtures/onnx_node, written by
//! scripts/onnx_node_cases.py) run eagerly and as graphs with ONNX's expected outputs; an
//! imported model traces inside a `#[graph_fn]`, differentiates, serves a dynamic batch and
//! reads external data; bad files are `Err`s naming the node and op, never panics.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use tensor_core::function::ConcreteFunction;
use tensor_core::onnx::OnnxModel;
use tensor_core::prelude::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn model(name: &str) -> OnnxModel {
    tensor_core::onnx::import(fixtures().join("onnx_import").join(name)).unwrap()
}

fn read_set(set: &Path, prefix: &str) -> Vec<Tensor> {
    (0..).map(|k| set.join(format!("{prefix}_{k}.pb"))).take_while(|p| p.is_file()).map(|p| tensor_core::onnx::read_tensor(p).unwrap().1).collect()
}

fn as_f64(t: &Tensor) -> Vec<f64> {
    t.cast(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Bits of each element (f32 widened exactly), for eager == graph.
fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        DType::F32 => t.to_vec::<f32>().unwrap().iter().map(|x| x.to_bits() as u64).collect(),
        _ => as_f64(t).iter().map(|x| x.to_bits()).collect(),
    }
}

/// Runs one case: eager within ONNX's tolerances, the graph (float inputs traced, the
/// others and the float inputs nodes read as values constants) bit for bit equal to eager.
fn check_case(dir: &Path) {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let m = tensor_core::onnx::import(dir.join("model.onnx")).unwrap_or_else(|e| panic!("{name}: {e}"));
    let set = dir.join("test_data_set_0");
    let (inputs, expected) = (read_set(&set, "input"), read_set(&set, "output"));
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let eager = m.call(&refs).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(eager.len(), expected.len(), "{name}");
    for (g, e) in eager.iter().zip(&expected) {
        assert_eq!((g.dims(), g.dtype()), (e.dims(), e.dtype()), "{name}");
        for (a, b) in as_f64(g).iter().zip(as_f64(e)) {
            assert!((a.is_nan() && b.is_nan()) || *a == b || (a - b).abs() <= 1e-7 + 1e-3 * b.abs(), "{name}: {a} vs expected {b}");
        }
    }
    // Float inputs are traced, except those a node reads as values (Resize's scales).
    let values = m.value_inputs();
    let traced = |name: &str, t: &Tensor| t.dtype().is_float() && !values.contains(&name);
    let args: Vec<(String, &Tensor)> = m.inputs().iter().zip(&inputs).filter(|(i, t)| traced(&i.name, t)).map(|(i, t)| (i.name.clone(), t)).collect();
    let named: Vec<(&str, &Tensor)> = args.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let host: Vec<Option<Host>> = m.inputs().iter().zip(&inputs).map(|(i, t)| (!traced(&i.name, t)).then(|| Host::of(t))).collect();
    let f = ConcreteFunction::trace(&name, &named, || {
        // Integer, bool and value inputs made inside the trace: constants of the graph.
        let consts: Vec<Tensor> = inputs.iter().zip(&host).map(|(t, h)| h.as_ref().map_or_else(|| t.clone(), remake)).collect();
        m.call(&consts.iter().collect::<Vec<_>>())
    })
    .unwrap_or_else(|e| panic!("{name} traced: {e}"));
    let call: Vec<&Tensor> = args.iter().map(|(_, t)| *t).collect();
    let graph = f.call(&call).unwrap_or_else(|e| panic!("{name} graph: {e}"));
    for (a, b) in eager.iter().zip(&graph) {
        assert_eq!(bits(a), bits(b), "{name}: graph differs from eager");
    }
}

/// An input's values, dims and dtype, read before a trace to be made a constant inside it.
enum Host {
    Int(Vec<i64>, Vec<usize>, DType),
    F32(Vec<f32>, Vec<usize>),
    F64(Vec<f64>, Vec<usize>),
}

impl Host {
    fn of(t: &Tensor) -> Host {
        let dims = t.dims().to_vec();
        match t.dtype() {
            DType::F32 => Host::F32(t.to_vec().unwrap(), dims),
            DType::F64 => Host::F64(t.to_vec().unwrap(), dims),
            dtype => Host::Int(t.cast(DType::I64).unwrap().to_vec::<i64>().unwrap(), dims, dtype),
        }
    }
}

/// A tensor from values read before the trace, made now (a constant of the graph).
fn remake(host: &Host) -> Tensor {
    match host {
        Host::F32(v, dims) => Tensor::from_vec(v.clone(), dims),
        Host::F64(v, dims) => Tensor::from_vec(v.clone(), dims),
        Host::Int(values, dims, DType::I32) => Tensor::from_vec(values.iter().map(|&v| v as i32).collect::<Vec<i32>>(), dims),
        Host::Int(values, dims, DType::Bool) => Tensor::from_vec(values.iter().map(|&v| v != 0).collect::<Vec<bool>>(), dims),
        Host::Int(values, dims, _) => Tensor::from_vec(values.clone(), dims),
    }
    .unwrap()
}

/// Every committed node case passes (the list is docs/ONNX.md's subset).
#[test]
fn the_committed_onnx_node_cases_pass_eagerly_and_as_graphs() {
    let dir = fixtures().join("onnx_node");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.join("model.onnx").is_file()).collect();
    cases.sort();
    assert!(cases.len() >= 60, "{} cases in {}", cases.len(), dir.display());
    for case in &cases {
        check_case(case);
    }
}

/// `Σ output₀ · r` for fixed weights `r`, in f64.
fn weighted_output(m: &OnnxModel, inputs: &[Tensor]) -> f64 {
    let out = &m.call(&inputs.iter().collect::<Vec<_>>()).unwrap()[0];
    as_f64(out).iter().enumerate().map(|(i, v)| v * (0.3 + (i as f64 * 0.7).sin())).sum()
}

/// Gradients through the composed builders of Attention (a fully masked row included),
/// LinearAttention, RotaryEmbedding, Resize and GridSample, to their first input, match
/// central finite differences (in f32, hence the loose tolerance), and none is NaN.
#[test]
fn gradients_through_the_composed_transformer_and_resampling_ops_match_finite_differences() {
    let cases = [
        "test_attention_23_boolmask_fullymasked_row_nan_robustness",
        "test_attention_4d_causal_with_past_and_present",
        "test_attention_local_window_gqa_rank4_mask",
        "test_linear_attention_decode_step",
        "test_rotary_embedding",
        "test_resize_downsample_scales_cubic_antialias",
        "test_gridsample_bicubic",
    ];
    for case in cases {
        let dir = fixtures().join("onnx_node").join(case);
        let m = tensor_core::onnx::import(dir.join("model.onnx")).unwrap();
        let inputs = read_set(&dir.join("test_data_set_0"), "input");
        let leaf = inputs[0].detach().requires_grad_(true).unwrap();
        let mut with_leaf = inputs.clone();
        with_leaf[0] = leaf.clone();
        let out = &m.call(&with_leaf.iter().collect::<Vec<_>>()).unwrap()[0];
        let r: Vec<f32> = (0..out.numel()).map(|i| (0.3 + (i as f64 * 0.7).sin()) as f32).collect();
        out.mul(&Tensor::from_vec(r, &out.dims()).unwrap()).unwrap().sum().unwrap().backward().unwrap();
        let grad = as_f64(&leaf.grad().unwrap());
        assert!(grad.iter().all(|g| g.is_finite()), "{case}: a gradient is not finite");
        let values = as_f64(&inputs[0]);
        let eps = 1e-2;
        for j in (0..values.len()).step_by(values.len().div_ceil(7)) {
            let moved = |d: f64| {
                let mut v = values.clone();
                v[j] += d;
                let mut x = inputs.clone();
                x[0] = Tensor::from_vec(v, &inputs[0].dims()).unwrap().cast(inputs[0].dtype()).unwrap();
                weighted_output(&m, &x)
            };
            let fd = (moved(eps) - moved(-eps)) / (2.0 * eps);
            assert!((grad[j] - fd).abs() <= 2e-2 * (1.0 + fd.abs()), "{case}: element {j}: gradient {} vs finite difference {fd}", grad[j]);
        }
    }
}

/// Loss and the initializers' gradients, in a graph function taking the model (its
/// initializers are the function's tensor leaves).
#[graph_fn]
fn loss_and_grads(m: &OnnxModel, x: &Tensor) -> Result<Vec<Tensor>> {
    let loss = m.call(&[x])?[0].mul(&Tensor::arange(0.0f32, 5.0))?.sum()?;
    loss.backward()?;
    let mut out = vec![loss];
    out.extend(m.parameters().iter().map(|(_, p)| p.grad().unwrap()));
    Ok(out)
}

/// Gradients flow into an imported model's initializers, eagerly and inside a
/// `#[graph_fn]`: the same values both ways, one trace for two calls.
#[test]
fn an_imported_model_trains_eagerly_and_inside_a_graph_fn() -> Result<()> {
    let m = model("cnn.onnx");
    m.trainable(true);
    let x = Tensor::randn(&[2, 1, 6, 6], DType::F32, 3);
    let loss = m.call(&[&x])?[0].mul(&Tensor::arange(0.0f32, 5.0))?.sum()?;
    loss.backward()?;
    let eager: Vec<Tensor> = m.parameters().iter().map(|(_, p)| p.grad().unwrap()).collect();
    assert_eq!(eager.len(), 4);
    for (_, p) in m.parameters() {
        p.zero_grad()?;
    }
    for _ in 0..2 {
        let graph = loss_and_grads(&m, &x)?;
        assert_eq!(bits(&graph[0]), bits(&loss));
        for (g, e) in graph[1..].iter().zip(&eager) {
            for (a, b) in as_f64(g).iter().zip(as_f64(e)) {
                assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "grad {a} vs eager {b}");
            }
        }
        for (_, p) in m.parameters() {
            p.zero_grad()?;
        }
    }
    assert_eq!(tensor_core::function::lookup("loss_and_grads").unwrap().trace_count(), 1);
    Ok(())
}

/// A `dim_param` batch dim is unknown: `trace` makes one graph that serves every batch.
#[test]
fn a_dynamic_batch_dim_traces_once_for_every_batch() -> Result<()> {
    let m = model("cnn.onnx");
    assert_eq!(m.inputs()[0].dims, vec![None, Some(1), Some(6), Some(6)]);
    let f = m.trace("cnn")?;
    for batch in [1, 3] {
        let x = Tensor::randn(&[batch, 1, 6, 6], DType::F32, batch as u64);
        let (eager, graph) = (m.call(&[&x])?, f.call(&[&x])?);
        assert_eq!(graph[0].dims(), vec![batch, 5]);
        assert_eq!(bits(&eager[0]), bits(&graph[0]));
    }
    Ok(())
}

/// Initializers stored in a file beside the model (`external_data`) load.
#[test]
fn external_data_loads_from_beside_the_model() -> Result<()> {
    let m = model("external/model.onnx");
    let x = Tensor::randn(&[2, 4], DType::F32, 1);
    let p = m.parameters();
    assert_eq!(p.iter().map(|(n, t)| (n.as_str(), t.dims().to_vec())).collect::<Vec<_>>(), vec![("w", vec![4, 3]), ("b", vec![3])]);
    assert_eq!(bits(&m.call(&[&x])?[0]), bits(&x.matmul(&p[0].1)?.add(&p[1].1)?));
    let bytes = std::fs::read(fixtures().join("onnx_import/external/model.onnx")).unwrap();
    let e = tensor_core::onnx::import_bytes(&bytes).unwrap_err();
    assert!(e.to_string().contains("weights.bin") && e.to_string().contains("import it from its path"), "{e}");
    Ok(())
}

/// An exported model imported back computes what the traced function does.
#[test]
fn an_exported_model_imports_back_with_the_same_outputs() -> Result<()> {
    let w = Tensor::randn(&[6, 4], DType::F32, 1);
    let x = Tensor::randn(&[3, 6], DType::F32, 2);
    let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.matmul(&w)?.tanh()?.softmax(-1)?, x.sum_axes(&[1], true)?]))?;
    let m = tensor_core::onnx::import_bytes(&tensor_core::onnx::to_bytes(&f)?)?;
    for (a, b) in m.call(&[&x])?.iter().zip(f.call(&[&x])?) {
        assert_eq!(bits(a), bits(&b));
    }
    Ok(())
}

/// Each kind of bad model is an `Err` naming what is wrong.
#[test]
fn bad_models_are_errors_naming_the_node_and_op() {
    let err = |name: &str| tensor_core::onnx::import(fixtures().join("onnx_import").join(name)).unwrap_err();
    let e = err("unsupported.onnx");
    assert!(matches!(&e, Error::OnnxUnsupportedOps { ops } if ops == &["RandomNormalLike", "RandomUniformLike"]), "{e:?}");
    let e = err("gelu_opset17.onnx");
    assert!(matches!(&e, Error::OnnxImport { node, op, .. } if node == "act" && op == "Gelu"), "{e:?}");
    assert!(e.to_string().contains("not in opset 17"), "{e}");
    let e = err("dangling.onnx");
    assert!(matches!(&e, Error::OnnxImport { node, op, .. } if node == "lost" && op == "Relu"), "{e:?}");
    assert!(e.to_string().contains("`nowhere`"), "{e}");
    let e = err("cast_uint8.onnx");
    assert!(matches!(&e, Error::OnnxDType { .. }) && e.to_string().contains("UINT8"), "{e:?}");
    let bytes = std::fs::read(fixtures().join("onnx_import/cnn.onnx")).unwrap();
    let e = tensor_core::onnx::import_bytes(&bytes[..bytes.len() / 2]).unwrap_err();
    assert!(matches!(&e, Error::BadFile { format: "ONNX", .. }), "{e:?}");
    // A wrong-shaped initializer: the dense weight 35 wide where the flattened input is 36.
    let m = model("wrong_initializer.onnx");
    let e = m.call(&[&Tensor::zeros(&[1, 1, 6, 6], DType::F32)]).unwrap_err();
    assert!(matches!(&e, Error::OnnxImport { node, op, .. } if node == "dense" && op == "Gemm"), "{e:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: tests::proptest_cases(48), ..ProptestConfig::default() })]

    /// A truncated or mutated model imports and runs to an `Ok` or an `Err`, never a panic.
    #[test]
    fn mutated_models_are_errors_not_panics(cut in 0usize..1400, flips in proptest::collection::vec((0usize..1400, any::<u8>()), 0..6)) {
        let mut bytes = std::fs::read(fixtures().join("onnx_import/cnn.onnx")).unwrap();
        for (at, v) in flips {
            let n = bytes.len();
            bytes[at % n] = v;
        }
        bytes.truncate(cut.clamp(1, bytes.len()));
        let run = std::panic::catch_unwind(|| {
            let m = tensor_core::onnx::import_bytes(&bytes).map_err(|e| e.to_string())?;
            let inputs: Vec<Tensor> = m.inputs().iter().map(|i| Tensor::zeros(&i.dims.iter().map(|d| d.unwrap_or(1).min(8)).collect::<Vec<_>>(), i.dtype)).collect();
            m.call(&inputs.iter().collect::<Vec<_>>()).map(|_| ()).map_err(|e| e.to_string())
        });
        prop_assert!(run.is_ok(), "panicked");
        if let Ok(Err(e)) = run {
            prop_assert!(!e.contains("panicked"), "{}", e);
        }
    }
}
