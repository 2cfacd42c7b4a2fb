//! ONNX export: inference graphs exported here run in tract-onnx (a pure-Rust ONNX runtime)
//! with the outputs tensor-core computes, within f32 tolerance; an op without a mapping is
//! an `Err` naming it.

use tensor_core::function::ConcreteFunction;
use tensor_core::nn::{Conv2d, Linear, MaxPool2d, Module};
use tensor_core::prelude::*;
use tract_onnx::prelude::{Framework, InferenceModelExt, IntoTensor};

/// Runs ONNX model bytes in tract on `inputs`; returns every output as f32 values (ints
/// and bools converted) with its dims.
fn run_tract(bytes: &[u8], inputs: &[&Tensor]) -> Vec<(Vec<usize>, Vec<f32>)> {
    let model = tract_onnx::onnx().model_for_read(&mut &bytes[..]).expect("tract reads the model");
    let model = model.into_optimized().expect("tract types and optimizes it").into_runnable().expect("tract plans it");
    let ins = inputs.iter().map(|t| to_tract(t).into()).collect();
    let outs = model.run(ins).expect("tract runs it");
    outs.iter()
        .map(|o| {
            let o = o.cast_to::<f32>().expect("a numeric output");
            let view = o.to_array_view::<f32>().unwrap();
            (view.shape().to_vec(), view.iter().copied().collect())
        })
        .collect()
}

fn to_tract(t: &Tensor) -> tract_onnx::prelude::Tensor {
    let dims = tract_onnx::prelude::tract_ndarray::IxDyn(&t.dims());
    match t.dtype() {
        DType::F32 => tract_onnx::prelude::tract_ndarray::ArrayD::from_shape_vec(dims, t.to_vec::<f32>().unwrap()).unwrap().into_tensor(),
        DType::I64 => tract_onnx::prelude::tract_ndarray::ArrayD::from_shape_vec(dims, t.to_vec::<i64>().unwrap()).unwrap().into_tensor(),
        other => panic!("no test input of {other}"),
    }
}

/// Asserts tract's outputs match ours within f32 tolerance.
fn assert_close(tract: &[(Vec<usize>, Vec<f32>)], ours: &[Tensor]) {
    assert_eq!(tract.len(), ours.len());
    for ((dims, values), t) in tract.iter().zip(ours) {
        assert_eq!(*dims, t.dims(), "output shape");
        let mine = t.cast(DType::F32).unwrap().to_vec::<f32>().unwrap();
        for (a, b) in values.iter().zip(&mine) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "tract {a} vs tensor-core {b}\n{values:?}\n{mine:?}");
        }
    }
}

/// W4's LeNet-5, built from layers.
struct LeNet {
    c1: Conv2d,
    c2: Conv2d,
    f1: Linear,
    f2: Linear,
    f3: Linear,
}

impl LeNet {
    fn new() -> Result<LeNet> {
        let rng = &Generator::new(5);
        Ok(LeNet {
            c1: Conv2d::new(1, 6, [5, 5], DType::F32, rng)?.with_padding([2, 2]),
            c2: Conv2d::new(6, 16, [5, 5], DType::F32, rng)?,
            f1: Linear::new(400, 120, DType::F32, rng)?,
            f2: Linear::new(120, 84, DType::F32, rng)?,
            f3: Linear::new(84, 10, DType::F32, rng)?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let pool = MaxPool2d::new([2, 2], [2, 2]);
        let h = pool.forward(&self.c1.forward(x)?.relu()?)?;
        let h = pool.forward(&self.c2.forward(&h)?.relu()?)?.flatten_from(1)?;
        let h = self.f1.forward(&h)?.relu()?;
        let h = self.f2.forward(&h)?.relu()?;
        self.f3.forward(&h)
    }
}

#[test]
fn lenet5_runs_in_tract_with_the_same_outputs() -> Result<()> {
    let net = LeNet::new()?;
    for batch in [1, 4] {
        let x = Tensor::randn(&[batch, 1, 28, 28], DType::F32, batch as u64);
        let f = no_grad(|| ConcreteFunction::trace("lenet5", &[("image", &x)], || Ok(vec![net.forward(&x)?])))?;
        let bytes = tensor_core::onnx::to_bytes(&f)?;
        let other = Tensor::randn(&[batch, 1, 28, 28], DType::F32, 10 + batch as u64);
        assert_close(&run_tract(&bytes, &[&other]), &f.call(&[&other])?);
    }
    Ok(())
}

#[test]
fn an_mlp_with_softmax_runs_in_tract_with_the_same_outputs() -> Result<()> {
    let rng = &Generator::new(1);
    let (l1, l2) = (Linear::new(12, 32, DType::F32, rng)?, Linear::new(32, 5, DType::F32, rng)?);
    let x = Tensor::randn(&[8, 12], DType::F32, 2);
    let f = no_grad(|| ConcreteFunction::trace("mlp", &[("x", &x)], || Ok(vec![l2.forward(&l1.forward(&x)?.tanh()?)?.softmax(-1)?])))?;
    let path = std::env::temp_dir().join(format!("tc-mlp-{}.onnx", std::process::id()));
    tensor_core::onnx::export(&f, &path)?;
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let y = Tensor::randn(&[8, 12], DType::F32, 3);
    assert_close(&run_tract(&bytes, &[&y]), &f.call(&[&y])?);
    Ok(())
}

/// The CNN forms (batch norm in evaluation mode, average and padded max pooling, the
/// transposed and depthwise convolutions, relu6, global and adaptive pooling, cumsum, topk)
/// run in tract with our values.
#[test]
fn cnn_forms_run_in_tract_with_the_same_outputs() -> Result<()> {
    let x = Tensor::randn(&[2, 4, 6, 6], DType::F32, 1);
    let (rm, rv) = (Tensor::randn(&[4], DType::F32, 2), Tensor::rand(&[4], DType::F32, 3).add(0.5f32)?);
    let (wt, wd) = (Tensor::randn(&[4, 3, 3, 3], DType::F32, 4), Tensor::randn(&[4, 1, 3, 3], DType::F32, 5));
    let f = no_grad(|| {
        ConcreteFunction::trace("cnn", &[("x", &x)], || {
            let bn = x.batch_norm(Some(&rm), Some(&rv), None, None, false, 0.1, 1e-5)?;
            let pooled = bn.avg_pool2d([3, 3], [2, 2], [1, 1], false, false)?;
            let up = pooled.conv_transpose2d(&wt, None, [2, 2], [1, 1], [1, 1], 1)?;
            let depthwise = x.conv2d_grouped(&wd, None, [1, 1], [1, 1], 4)?.relu6()?;
            let (top, idx) = x.flatten_from(1)?.cumsum(1)?.topk(5, 1, true, true)?;
            let max_pooled = x.max_pool2d_padded([3, 3], [2, 2], [1, 1])?;
            Ok(vec![up, depthwise.global_avg_pool()?, x.adaptive_avg_pool2d([4, 5])?, top, idx, max_pooled])
        })
    })?;
    let bytes = tensor_core::onnx::to_bytes(&f)?;
    let y = Tensor::randn(&[2, 4, 6, 6], DType::F32, 6);
    assert_close(&run_tract(&bytes, &[&y]), &f.call(&[&y])?);
    Ok(())
}

/// The vector forms of matmul and broadcast batches run in tract with our values.
#[test]
fn matmul_vector_and_batched_forms_run_in_tract() -> Result<()> {
    let (m, v) = (Tensor::randn(&[3, 4], DType::F32, 1), Tensor::randn(&[4], DType::F32, 2));
    let (a, b) = (Tensor::randn(&[2, 1, 3, 4], DType::F32, 3), Tensor::randn(&[5, 4, 2], DType::F32, 4));
    let args = [("m", &m), ("v", &v), ("a", &a), ("b", &b)];
    let f = ConcreteFunction::trace("forms", &args, || Ok(vec![m.matmul(&v)?, v.matmul(&m.t()?)?, v.matmul(&v)?, a.matmul(&b)?, a.matmul(&v)?]))?;
    let bytes = tensor_core::onnx::to_bytes(&f)?;
    assert_close(&run_tract(&bytes, &[&m, &v, &a, &b]), &f.call(&[&m, &v, &a, &b])?);
    Ok(())
}

/// Products reading an operand transposed run in tract (a Transpose before MatMul) with our
/// values.
#[test]
fn transposed_matmul_operands_run_in_tract() -> Result<()> {
    let (m, a) = (Tensor::randn(&[3, 4], DType::F32, 1), Tensor::randn(&[2, 1, 3, 4], DType::F32, 2));
    let (b, c) = (Tensor::randn(&[5, 2, 4], DType::F32, 3), Tensor::randn(&[5, 3, 2], DType::F32, 4));
    let d = Tensor::randn(&[6, 3], DType::F32, 5);
    let args = [("m", &m), ("a", &a), ("b", &b), ("c", &c), ("d", &d)];
    let f = ConcreteFunction::trace("flags", &args, || {
        Ok(vec![m.matmul_t(&m, false, true)?, a.matmul_t(&b, false, true)?, a.matmul_t(&c, true, false)?, a.matmul_t(&d, true, true)?])
    })?;
    let bytes = tensor_core::onnx::to_bytes(&f)?;
    assert_close(&run_tract(&bytes, &[&m, &a, &b, &c, &d]), &f.call(&[&m, &a, &b, &c, &d])?);
    Ok(())
}

#[test]
fn layout_reduction_and_elementwise_ops_map_to_onnx() -> Result<()> {
    let x = Tensor::randn(&[2, 3, 4], DType::F32, 4);
    let labels = Tensor::from_vec(vec![2i64, 0], &[2])?;
    let f = ConcreteFunction::trace("ops", &[("x", &x), ("labels", &labels)], || {
        let t = x.permute(&[0, 2, 1])?; // [2, 4, 3]
        let c = Tensor::concat(&[&t, &t.exp()?], 2)?; // [2, 4, 6]
        let n = c.narrow(2, 1, 4)?; // [2, 4, 4]
        let m = n.mean_axes(&[1], true)?.log_softmax(2)?; // [2, 1, 4]
        let clamped = n.clamp(-0.5f32, 0.5f32)?.sqrt()?;
        let picked = Tensor::where_(&n.gt(0.0f32)?, &clamped, &n.abs()?.neg()?)?;
        let big = picked.max_axes(&[2], false)?.sum_axes(&[1], false)?; // [2]
        let reshaped = n.reshape([2, 16])?.cast(DType::F64)?.mul(2.0)?.cast(DType::F32)?.sigmoid()?;
        let hot = labels.one_hot(4, DType::F32)?; // [2, 4]
        let logits = x.sum_axes(&[1], false)?; // [2, 4]
        let loss = logits.cross_entropy(&labels)?;
        Ok(vec![m, big, reshaped, hot.mul(&logits)?, loss, x.argmax(2, false)?])
    })?;
    let bytes = tensor_core::onnx::to_bytes(&f)?;
    let x2 = Tensor::randn(&[2, 3, 4], DType::F32, 5);
    assert_close(&run_tract(&bytes, &[&x2, &labels]), &f.call(&[&x2, &labels])?);
    Ok(())
}

#[test]
fn ops_without_a_mapping_are_errors_naming_them() -> Result<()> {
    let w = Tensor::randn(&[2, 1, 3, 3], DType::F32, 0).requires_grad_(true)?;
    let x = Tensor::randn(&[1, 1, 5, 5], DType::F32, 1);
    // A gradient: the graph holds the convolution's weight gradient.
    let grads = ConcreteFunction::trace("grads", &[("x", &x)], || tensor_core::grad(&[&x.conv2d(&w, None, [1, 1], [0, 0])?.sum()?], &[&w], false))?;
    let err = tensor_core::onnx::to_bytes(&grads).unwrap_err().to_string();
    assert!(err.contains("onnx export: conv2d_weight_grad has no ONNX mapping"), "{err}");
    // Control flow.
    let branch =
        ConcreteFunction::trace("branch", &[("x", &x)], || Ok(vec![tensor_core::control::cond(&x.sum()?.gt(0.0f32)?, || x.exp(), || x.neg())?]))?;
    let err = tensor_core::onnx::to_bytes(&branch).unwrap_err().to_string();
    assert!(err.contains("cond has no ONNX mapping"), "{err}");
    // An in-place update (a training step's parameter update).
    let step = ConcreteFunction::trace("step", &[("x", &x)], || {
        x.sub_(1.0f32)?;
        Ok(vec![])
    })?;
    let err = tensor_core::onnx::to_bytes(&step).unwrap_err().to_string();
    assert!(err.contains("no ONNX mapping") && err.contains("write"), "{err}");
    Ok(())
}

/// Import and export round trip: an ONNX model made elsewhere (the import fixtures' CNN:
/// Conv, Relu, MaxPool, Flatten, Gemm, Softmax; `tests/fixtures/onnx_import`), imported,
/// traced and exported again, runs in tract with the imported model's outputs.
#[test]
fn an_imported_model_exported_again_runs_in_tract_with_the_same_outputs() -> Result<()> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/onnx_import/cnn.onnx");
    let m = tensor_core::onnx::import(&path)?;
    for batch in [1, 4] {
        let x = Tensor::randn(&[batch, 1, 6, 6], DType::F32, 40 + batch as u64);
        let f = ConcreteFunction::trace("cnn", &[("x", &x)], || m.call(&[&x]))?;
        let ours = m.call(&[&x])?;
        assert_eq!(ours[0].dims(), vec![batch, 5]);
        assert_close(&run_tract(&tensor_core::onnx::to_bytes(&f)?, &[&x]), &ours);
    }
    Ok(())
}

/// The dims of each input and output of ONNX model bytes, as tract's protobuf reader reads
/// them: a `dim_param` by its name, a `dim_value` as its number.
fn proto_dims(bytes: &[u8]) -> Vec<(String, Vec<String>)> {
    use tract_onnx::pb::{tensor_shape_proto::dimension::Value, type_proto};
    let model = tract_onnx::onnx().proto_model_for_read(&mut &bytes[..]).expect("a model");
    let graph = model.graph.expect("a graph");
    let dims = |v: &tract_onnx::pb::ValueInfoProto| {
        let Some(type_proto::Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.clone()) else { panic!("a tensor type") };
        let dims = t.shape.expect("a shape").dim.into_iter().map(|d| match d.value {
            Some(Value::DimParam(name)) => name,
            Some(Value::DimValue(n)) => n.to_string(),
            None => "none".into(),
        });
        (v.name.clone(), dims.collect())
    };
    graph.input.iter().chain(&graph.output).map(dims).collect()
}

/// A forward pass traced with a relaxed batch names the batch `n0` in the model's input and
/// output (`dim_param`), and the one model runs in tract at two batch sizes.
#[test]
fn relaxed_dims_are_written_as_dim_params_named_by_their_symbols() -> Result<()> {
    use tensor_core::shape::UNKNOWN;
    let net = LeNet::new()?;
    let x = Tensor::randn(&[2, 1, 28, 28], DType::F32, 3);
    let any_batch = [Shape::new(&[UNKNOWN, 1, 28, 28])];
    let f = no_grad(|| ConcreteFunction::trace_with_shapes("lenet5", &[("image", &x)], &any_batch, true, || Ok(vec![net.forward(&x)?])))?;
    assert_eq!(f.symbols(), ["n0 = image dim 0"]);
    let bytes = tensor_core::onnx::to_bytes(&f)?;
    let s = |v: &[&str]| v.iter().map(|d| d.to_string()).collect::<Vec<_>>();
    assert_eq!(proto_dims(&bytes), [("image".to_string(), s(&["n0", "1", "28", "28"])), ("output_0".to_string(), s(&["n0", "10"]))]);
    for batch in [1, 5] {
        let x = Tensor::randn(&[batch, 1, 28, 28], DType::F32, 20 + batch as u64);
        let tract = run_tract(&bytes, &[&x]);
        assert_eq!(tract[0].0, vec![batch, 10]);
        assert_close(&tract, &no_grad(|| Ok::<_, Error>(vec![net.forward(&x)?]))?);
    }
    Ok(())
}

/// Two relaxed dims a guard makes equal (`n0 == n1`) share one name; an output dim that is
/// no symbol (`n0 + n0`, a concatenation's) gets a name of its own.
#[test]
fn dims_a_guard_makes_equal_share_a_dim_param_and_others_get_their_own() -> Result<()> {
    use tensor_core::shape::UNKNOWN;
    let (a, b) = (Tensor::randn(&[3, 4], DType::F32, 1), Tensor::randn(&[3, 4], DType::F32, 2));
    let shapes = [Shape::new(&[UNKNOWN, 4]), Shape::new(&[UNKNOWN, 4])];
    let body = || -> Result<Vec<Tensor>> {
        assert!(a.dim(0) == b.dim(0), "the rows agree");
        Ok(vec![a.add(&b)?, Tensor::concat(&[&a, &b], 0)?])
    };
    let f = ConcreteFunction::trace_with_shapes("pair", &[("a", &a), ("b", &b)], &shapes, true, body)?;
    assert_eq!(f.guards(), ["n0 == n1"]);
    let bytes = tensor_core::onnx::to_bytes(&f)?;
    let s = |v: &[&str]| v.iter().map(|d| d.to_string()).collect::<Vec<_>>();
    let want = [
        ("a".to_string(), s(&["n0", "4"])),
        ("b".to_string(), s(&["n0", "4"])),
        ("output_0".to_string(), s(&["n0", "4"])),
        ("output_1".to_string(), s(&["output_1_dim0", "4"])),
    ];
    assert_eq!(proto_dims(&bytes), want);
    let (a5, b5) = (Tensor::randn(&[5, 4], DType::F32, 3), Tensor::randn(&[5, 4], DType::F32, 4));
    let tract = run_tract(&bytes, &[&a5, &b5]);
    assert_eq!((tract[0].0.clone(), tract[1].0.clone()), (vec![5, 4], vec![10, 4]));
    assert_close(&tract, &[a5.add(&b5)?, Tensor::concat(&[&a5, &b5], 0)?]);
    Ok(())
}
