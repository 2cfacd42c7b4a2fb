//! Every variant of `tensor_core::Error` that the current code can produce, triggered at
//! least once, with its message checked for the op, the shapes/dtypes and the fix; and the
//! promise that a failed op changes nothing (values, versions, grads, trace state).
//!
//! `every_variant_is_covered` reads the enum from error.rs, so a new variant fails it until
//! it is triggered here (or listed in `NOT_REACHABLE` with the reason).

use std::sync::{Mutex, OnceLock};
use tensor_core::control::{cond, while_loop};
use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;

/// Variants nothing can produce on a machine without a GPU (these tests run on CI's), with
/// why: `DeviceMismatch` needs a tensor on a GPU; `scripts/gpu_device_check.sh` triggers it
/// (`gpu_check`'s "mixing devices is an Err naming both").
const NOT_REACHABLE: [&str; 1] = ["DeviceMismatch"];

/// Asserts the message of `e` contains every piece, and returns it.
#[track_caller]
fn says(e: &Error, pieces: &[&str]) -> String {
    let msg = e.to_string();
    for p in pieces {
        assert!(msg.contains(p), "message {msg:?} lacks {p:?}");
    }
    msg
}

/// The error of `r`, which must have failed.
#[track_caller]
fn err<T>(r: Result<T>) -> Error {
    match r {
        Ok(_) => panic!("expected an error, got Ok"),
        Err(e) => e,
    }
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce() -> Tensor + std::panic::UnwindSafe) -> String {
    let payload = std::panic::catch_unwind(f).expect_err("expected a panic");
    payload.downcast_ref::<String>().cloned().or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

fn f32s(v: &[f32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), dims).unwrap()
}

fn leaf(v: &[f32], dims: &[usize]) -> Tensor {
    f32s(v, dims).requires_grad_(true).unwrap()
}

/// The variant's name, from its alternate Debug form (`{:#?}`; `{:?}` is the message).
fn variant(e: &Error) -> String {
    format!("{e:#?}").split([' ', '{', '(', '\n']).next().unwrap_or_default().to_string()
}

// ------------------------------------------------------------------------------ creation and conversion

fn data_length() -> Vec<Error> {
    let e = err(Tensor::from_vec(vec![1.0f32; 5], &[2, 3]));
    assert!(matches!(e, Error::DataLength { op: "from_vec", len: 5, numel: 6, .. }), "{e:?}");
    says(&e, &["from_vec", "5 values", "[2, 3]", "6 elements", "pass exactly 6 values"]);
    vec![e]
}

fn dtype_mismatch() -> Vec<Error> {
    let (a, b) = (Tensor::ones(&[2], DType::F32), Tensor::ones(&[2], DType::F64));
    let e1 = err(a.add(&b));
    assert!(matches!(e1, Error::OperandDTypes { op: "add", first_dtype: DType::F32, second_dtype: DType::F64, .. }), "{e1:?}");
    says(&e1, &["add: other is f64 but self is f32", ".cast(DType::F32) on other", ".cast(DType::F64) on self"]);
    // The operator panics with the same message.
    let (pa, pb) = (a.clone(), b.clone());
    assert_eq!(panic_message(move || &pa + &pb), e1.to_string());
    let e2 = err(Tensor::scalar(1i64).to_vec::<f32>());
    says(&e2, &["to_vec", "expected dtype f32, found i64", ".cast(DType::F32)"]);
    // An f64 batch into f32 weights names the operand that differs, and both fixes.
    let e3 = err(Tensor::ones(&[2, 2], DType::F64).matmul(&Tensor::ones(&[2, 2], DType::F32)));
    says(&e3, &["matmul: other is f32 but self is f64", ".cast(DType::F64) on other", ".cast(DType::F32) on self"]);
    let e4 = err(Tensor::concat(&[&a, &a, &Tensor::ones(&[2], DType::I32)], 0));
    says(&e4, &["concat: tensors[2] is i32 but tensors[0] is f32"]);
    let cond = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    let e5 = err(Tensor::where_(&cond, &a, &b));
    says(&e5, &["where_: b is f64 but a is f32"]);
    // Comparisons return the error, as `compare` does.
    let e6 = err(a.compare(tensor_core::ops::CmpOp::Lt, &b));
    assert_eq!(err(a.lt(&b)).to_string(), e6.to_string());
    // assign_ of another dtype names the in-place op.
    let x = Tensor::zeros(&[2], DType::I32);
    let e7 = err(x.assign_(&a));
    assert!(matches!(e7, Error::DTypeMismatch { op: "assign_", expected: DType::I32, found: DType::F32, .. }), "{e7:?}");
    says(&e7, &["assign_", "expected dtype i32, found f32", ".cast(DType::I32)"]);
    vec![e1, e2, e3, e4, e5, e6, e7]
}

fn unsupported_dtype() -> Vec<Error> {
    let i = Tensor::from_vec(vec![1i32, 2], &[2]).unwrap();
    let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    let f = f32s(&[1.0, 2.0], &[2]);
    let e1 = err(i.exp());
    assert!(matches!(e1, Error::UnsupportedDType { op: "exp", dtype: DType::I32, .. }), "{e1:?}");
    says(&e1, &["exp", "dtype i32", "a float dtype (f32 or f64)", "cast the input first"]);
    let e2 = err(b.add(&b));
    says(&e2, &["add", "dtype bool", "numeric"]);
    let e3 = err(i.requires_grad_(true));
    says(&e3, &["requires_grad_", "dtype i32", "only floats carry gradients"]);
    let e4 = err(Tensor::where_(&f, &f, &f));
    says(&e4, &["where_", "dtype f32", "bool condition", "x.gt(0.0)"]);
    let e5 = err(i.mean());
    says(&e5, &["mean", "dtype i32", "float"]);
    let e6 = err(f.logical_not());
    says(&e6, &["logical_not", "dtype f32", "needs bool"]);
    let e7 = err(f.index_select(0, &f));
    says(&e7, &["index_select", "dtype f32", "an i64 or i32 index tensor"]);
    let e8 = err(Tensor::zeros(&[2, 3], DType::F32).cross_entropy(&f));
    says(&e8, &["cross_entropy", "dtype f32", "class labels"]);
    let e9 = err(Tensor::ones(&[1, 1, 2, 2], DType::I32).conv2d(&Tensor::ones(&[1, 1, 1, 1], DType::I32), None, [1, 1], [0, 0]));
    says(&e9, &["conv2d", "dtype i32", "float"]);
    let e10 = err(f.one_hot(3, DType::F32));
    says(&e10, &["one_hot", "dtype f32", "index tensor"]);
    let e11 = err(i.softmax(0));
    says(&e11, &["softmax", "dtype i32"]);
    // Operators panic with the message.
    let pb = b.clone();
    assert_eq!(panic_message(move || -&pb), err(b.neg()).to_string());
    vec![e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11]
}

fn not_one_element() -> Vec<Error> {
    let e = err(Tensor::zeros(&[2, 2], DType::F32).item::<f32>());
    assert!(matches!(e, Error::NotOneElement { op: "item", numel: 4, .. }), "{e:?}");
    says(&e, &["item", "shape [2, 2]", "4 elements", "reduce or index it first"]);
    let e2 = err(Tensor::zeros(&[0], DType::I64).item::<i64>());
    says(&e2, &["shape [0]", "0 elements"]);
    vec![e, e2]
}

// ------------------------------------------------------------------------------ shapes and arguments

fn broadcast() -> Vec<Error> {
    let (a, b) = (Tensor::zeros(&[2, 3], DType::F32), Tensor::zeros(&[4], DType::F32));
    let e1 = err(a.add(&b));
    match &e1 {
        Error::Broadcast { op, lhs, rhs } => {
            assert_eq!((*op, lhs.dims(), rhs.dims()), ("add", &[2usize, 3][..], &[4usize][..]));
        }
        other => panic!("expected Broadcast, got {other:?}"),
    }
    says(&e1, &["add", "[2, 3]", "[4]", "do not broadcast", "trailing dims must be equal or 1", "reshape or unsqueeze"]);
    let (pa, pb) = (a.clone(), b.clone());
    assert_eq!(panic_message(move || &pa * &pb), err(a.mul(&b)).to_string());
    let e2 = err(Tensor::zeros(&[3], DType::I64).compare(tensor_core::ops::CmpOp::Eq, &Tensor::zeros(&[4], DType::I64)));
    says(&e2, &["eq", "[3]", "[4]"]);
    let cond = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
    let e3 = err(Tensor::where_(&cond, &Tensor::zeros(&[2], DType::F32), &Tensor::zeros(&[2], DType::F32)));
    says(&e3, &["where_", "[3]", "[2]"]);
    let e4 = err(a.maximum(&b));
    says(&e4, &["maximum", "[2, 3]", "[4]"]);
    vec![e1, e2, e3, e4]
}

fn shape_mismatch() -> Vec<Error> {
    let z = |d: &[usize]| Tensor::zeros(d, DType::F32);
    let e1 = err(z(&[2, 3]).matmul(&z(&[4, 5])));
    assert!(matches!(e1, Error::ShapeMismatch { op: "matmul", .. }), "{e1:?}");
    says(&e1, &["matmul", "[2, 3]", "[4, 5]", "inner dims differ (3 vs 4)"]);
    let e2 = err(Tensor::scalar(1.0f32).matmul(&z(&[3, 2])));
    says(&e2, &["matmul", "[]", "at least 1 dim", "use `*`"]);
    let e3 = err(z(&[2, 2, 3]).matmul(&z(&[3, 3, 2])));
    says(&e3, &["matmul", "[2, 2, 3]", "[3, 3, 2]", "batch dims do not broadcast"]);
    let e4 = err(Tensor::concat(&[&z(&[2, 2]), &z(&[2, 3])], 0));
    says(&e4, &["concat", "[2, 2]", "[2, 3]", "all dims but the concat axis 0 must agree"]);
    let e5 = err(Tensor::stack(&[&z(&[2]), &z(&[3])], 0));
    says(&e5, &["stack", "[2]", "[3]", "equal shapes"]);
    let e6 = err(z(&[2]).broadcast_to(&[3]));
    says(&e6, &["broadcast_to", "[2]", "[3]", "equal the target's or be 1"]);
    let e7 = err(z(&[2, 1]).broadcast_to(&[2]));
    says(&e7, &["broadcast_to", "[2, 1]", "[2]"]);
    let idx = Tensor::zeros(&[2], DType::I64);
    let e8 = err(z(&[2, 2]).gather(1, &idx));
    says(&e8, &["gather", "[2, 2]", "[2]", "the input's rank"]);
    let e9 = err(z(&[2, 3]).cross_entropy(&Tensor::zeros(&[3], DType::I64)));
    says(&e9, &["cross_entropy", "[2, 3]", "[3]", "logits must be [n, classes] and labels [n]"]);
    let e10 = err(z(&[1, 3, 4, 4]).conv2d(&z(&[5, 2, 3, 3]), None, [1, 1], [0, 0]));
    says(&e10, &["conv2d", "[1, 3, 4, 4]", "[5, 2, 3, 3]", "the input has 3 channels but the weight expects 2"]);
    let e11 = err(z(&[1, 2, 4, 4]).conv2d(&z(&[5, 2, 3, 3]), Some(&z(&[4])), [1, 1], [0, 0]));
    says(&e11, &["conv2d", "[4]", "the bias must be [5], one value per output channel"]);
    // An in-place result that would not keep the target's shape.
    let t = z(&[2]);
    let e12 = err(t.add_(&z(&[2, 2])));
    assert!(matches!(e12, Error::ShapeMismatch { op: "add_", .. }), "{e12:?}");
    says(&e12, &["add_", "[2]", "[2, 2]", "an in-place result must keep the target's shape, but broadcasting gives [2, 2]"]);
    let e13 = err(t.assign_(&z(&[3, 2])));
    says(&e13, &["assign_", "[2]", "[3, 2]"]);
    vec![e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11, e12, e13]
}

fn axis() -> Vec<Error> {
    let x = Tensor::zeros(&[2, 3], DType::F32);
    let e1 = err(x.sum_axes(&[2], false));
    assert!(matches!(e1, Error::Axis { op: "sum", axis: 2, rank: 2 }), "{e1:?}");
    says(&e1, &["sum", "axis 2 is out of range for a tensor of rank 2", "valid: -2..2"]);
    let e2 = err(x.argmax(-3, false));
    says(&e2, &["argmax", "axis -3", "rank 2"]);
    let mut all = vec![e1, e2];
    let i = Tensor::zeros(&[2], DType::I64);
    for (op, r) in [
        ("mean", x.mean_axes(&[-3], true)),
        ("max", x.max_axes(&[5], false)),
        ("softmax", x.softmax(2)),
        ("log_softmax", x.log_softmax(-3)),
        ("transpose", x.transpose(0, 2)),
        ("permute", x.permute(&[0, 2])),
        ("concat", Tensor::concat(&[&x, &x], 2)),
        ("stack", Tensor::stack(&[&x, &x], 3)),
        ("narrow", x.narrow(2, 0, 1)),
        ("slice", x.slice(-3, ..)),
        ("index_select", x.index_select(2, &i)),
        ("gather", x.gather(-3, &i)),
        ("squeeze", x.squeeze(2)),
        ("unsqueeze", x.unsqueeze(4)),
        ("flatten", x.flatten_from(2)),
    ] {
        let e = err(r);
        assert!(matches!(e, Error::Axis { op: o, .. } if o == op), "{op}: {e:?}");
        says(&e, &[op, "is out of range"]);
        all.push(e);
    }
    all
}

fn reshape() -> Vec<Error> {
    let x = Tensor::zeros(&[2, 3], DType::F32);
    let e1 = err(x.reshape([4, -1]));
    assert!(matches!(&e1, Error::Reshape { numel: 6, .. }), "{e1:?}");
    assert_eq!(e1.to_string(), "reshape: cannot reshape [2, 3] (6 elements) into [4, -1]; the element counts differ");
    let e2 = err(x.reshape([-1, -1]));
    says(&e2, &["[2, 3]", "only one dim may be -1"]);
    let e3 = err(x.reshape([-2, 3]));
    says(&e3, &["dims must be positive or -1"]);
    let e4 = err(x.reshape([5]));
    says(&e4, &["[2, 3] (6 elements) into [5]", "the element counts differ"]);
    // -1 next to a 0 dim is ambiguous (as in PyTorch).
    let e5 = err(Tensor::zeros(&[0, 3], DType::F32).reshape([-1, 0]));
    says(&e5, &["[0, 3]", "[-1, 0]"]);
    vec![e1, e2, e3, e4, e5]
}

fn invalid_argument() -> Vec<Error> {
    let x = Tensor::zeros(&[2, 1], DType::F32);
    let v = Tensor::zeros(&[3], DType::F32);
    let e1 = err(x.squeeze(0));
    assert!(matches!(&e1, Error::InvalidArgument { op: "squeeze", arg: "axis", .. }), "{e1:?}");
    says(&e1, &["squeeze", "invalid argument `axis`", "dim 0 of shape [2, 1] has size 2, not 1"]);
    let (start, end) = (2, 1); // a reversed range, on purpose
    let cases: Vec<(Result<Tensor>, [&str; 3])> = vec![
        (x.permute(&[0, 0]), ["permute", "`perm`", "not a permutation"]),
        (v.narrow(0, 2, 2), ["narrow", "`start/len`", "do not fit in dim 0 of size 3"]),
        (v.slice(0, start..end), ["slice", "`range`", "start 2 is after end 1"]),
        (Tensor::concat(&[], 0), ["concat", "`tensors`", "at least one"]),
        (Tensor::stack(&[], 0), ["stack", "`tensors`", "at least one"]),
        (x.sum_axes(&[0, -2], false), ["sum", "`axes`", "listed twice"]),
        (v.index_select(0, &Tensor::zeros(&[1, 1], DType::I64)), ["index_select", "`index`", "must be 1-d"]),
        (
            Tensor::zeros(&[1, 1, 3, 3], DType::F32).conv2d(&Tensor::zeros(&[1, 1, 2, 2], DType::F32), None, [0, 1], [0, 0]),
            ["conv2d", "`stride`", "must be positive"],
        ),
        (
            Tensor::zeros(&[1, 3, 3], DType::F32).conv2d(&Tensor::zeros(&[1, 1, 2, 2], DType::F32), None, [1, 1], [0, 0]),
            ["conv2d", "`input`", "must be 4-d"],
        ),
        (Tensor::zeros(&[1, 1, 4, 4], DType::F32).max_pool2d([5, 5], [1, 1]), ["max_pool2d", "`kernel`", "larger than the padded input 4"]),
        (Tensor::zeros(&[1, 1, 4, 4], DType::F32).max_pool2d([2, 2], [0, 2]), ["max_pool2d", "`stride`", "must be positive"]),
        (Tensor::zeros(&[0, 2], DType::F32).max(), ["max", "`axes`", "empty dim"]),
        (Tensor::zeros(&[2, 0], DType::F32).argmax(1, false), ["argmax", "`axis`", "empty"]),
    ];
    let mut all = vec![e1];
    for (r, pieces) in cases {
        let e = err(r);
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
        says(&e, &pieces);
        all.push(e);
    }
    // Autograd arguments.
    let w = leaf(&[1.0], &[1]);
    let y = &w * 2.0;
    let e = err(y.requires_grad_(false));
    says(&e, &["requires_grad_", "only a leaf can stop requiring grad", "detach()"]);
    all.push(e);
    let e = err(Tensor::zeros(&[1], DType::F32).retain_grad());
    says(&e, &["retain_grad", "does not require grad"]);
    all.push(e);
    all
}

fn index_out_of_range() -> Vec<Error> {
    let labels = Tensor::from_vec(vec![0i64, 3], &[2]).unwrap();
    let e1 = err(labels.one_hot(3, DType::F32));
    assert!(matches!(e1, Error::IndexOutOfRange { op: "one_hot", index: 3, size: 3 }), "{e1:?}");
    assert_eq!(e1.to_string(), "one_hot: index 3 is out of range for a dim of size 3");
    let x = Tensor::zeros(&[3, 2], DType::F32);
    let e2 = err(x.index_select(0, &Tensor::from_vec(vec![1i32, 5], &[2]).unwrap()));
    says(&e2, &["index_select", "index 5", "size 3"]);
    let e3 = err(x.gather(1, &Tensor::from_vec(vec![0i64, -1, 1, 0, 0, 0], &[3, 2]).unwrap()));
    says(&e3, &["gather", "index -1", "size 2"]);
    let e4 = err(Tensor::zeros(&[2, 3], DType::F64).cross_entropy(&Tensor::from_vec(vec![1i64, 4], &[2]).unwrap()));
    says(&e4, &["cross_entropy", "index 4", "size 3"]);
    vec![e1, e2, e3, e4]
}

// ------------------------------------------------------------------------------ autograd

fn no_grad_fn() -> Vec<Error> {
    let e1 = err(Tensor::scalar(1.0f32).backward());
    assert!(matches!(e1, Error::NoGradFn { op: "backward" }), "{e1:?}");
    says(&e1, &["backward", "does not require grad and has no grad_fn", "requires_grad_(true)"]);
    let x = leaf(&[1.0], &[]);
    let c = Tensor::scalar(2.0f32);
    let e2 = err(tensor_core::grad(&[&c], &[&x], false));
    assert!(matches!(e2, Error::NoGradFn { .. }), "{e2:?}");
    // Under no_grad, results do not require grad either.
    let y = no_grad(|| &x * 3.0);
    let e3 = err(y.backward());
    assert!(matches!(e3, Error::NoGradFn { .. }), "{e3:?}");
    assert!(x.grad().is_none());
    vec![e1, e2, e3]
}

fn backward_non_scalar() -> Vec<Error> {
    let w = leaf(&[1.0, 2.0], &[2]);
    let e = err((&w * 2.0).backward());
    match &e {
        Error::BackwardNonScalar { shape } => assert_eq!(shape.dims(), &[2]),
        other => panic!("expected BackwardNonScalar, got {other:?}"),
    }
    says(&e, &["backward", "only for scalar outputs", "found shape [2]", ".sum() or .mean()", "backward_from"]);
    assert!(w.grad().is_none());
    vec![e]
}

fn gradient_shape() -> Vec<Error> {
    let w = leaf(&[1.0, 2.0], &[2]);
    let y = &w * 2.0;
    let e1 = err(y.backward_from(&Tensor::ones(&[3], DType::F32)));
    assert!(matches!(e1, Error::GradientShape { expected_dtype: DType::F32, found_dtype: DType::F32, .. }), "{e1:?}");
    says(&e1, &["backward_from", "gradient has shape [3] and dtype f32", "output has shape [2] and dtype f32"]);
    let e2 = err(y.backward_from(&Tensor::ones(&[2], DType::F64)));
    says(&e2, &["shape [2] and dtype f64", "shape [2] and dtype f32"]);
    assert!(w.grad().is_none(), "a failed backward leaves .grad alone");
    // The right gradient works afterwards (the graph was not consumed).
    y.backward_from(&Tensor::ones(&[2], DType::F32)).unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 2.0]);
    vec![e1, e2]
}

fn in_place_on_leaf() -> Vec<Error> {
    let w = leaf(&[1.0, 2.0], &[2]);
    let mut all = Vec::new();
    for (name, r) in
        [("add_", w.add_(1.0)), ("sub_", w.sub_(&w)), ("mul_", w.mul_(2.0)), ("div_", w.div_(2.0)), ("assign_", w.assign_(&w)), ("zero_", w.zero_())]
    {
        let e = err(r);
        assert!(matches!(e, Error::InPlaceOnLeaf { op } if op == name), "{name}: {e:?}");
        says(&e, &[name, "a leaf tensor that requires grad is used in an in-place operation", "no_grad(|| ...)"]);
        all.push(e);
    }
    // Nothing changed.
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    assert_eq!(w.version(), 0);
    assert!(w.is_leaf() && w.requires_grad() && w.grad().is_none());
    // Under no_grad the update is allowed, as optimizers do it.
    no_grad(|| w.sub_(0.5)).unwrap();
    assert_eq!((w.to_vec::<f32>().unwrap(), w.version()), (vec![0.5, 1.5], 1));
    all
}

fn saved_tensor_modified() -> Vec<Error> {
    let x = leaf(&[1.0, 2.0], &[2]);
    let w = leaf(&[3.0], &[1]);
    let y = &x * 2.0;
    let z = &y * &y; // saves y at version 0
    let v = &w * 3.0; // an independent branch into the same loss
    let loss = z.sum().unwrap() + v.sum().unwrap();
    y.add_(1.0).unwrap(); // y is not a leaf: allowed, bumps its version
    assert_eq!(y.version(), 1);
    let e = err(loss.backward());
    assert!(matches!(e, Error::SavedTensorModified { node: "MulBackward", expected: 0, found: 1 }), "{e:?}");
    says(&e, &["backward", "MulBackward", "modified by an in-place operation", "saved at version 0", "now at version 1", "clone the tensor first"]);
    // The failed backward changed no grad, not even on the branch it could compute.
    assert!(x.grad().is_none(), "x.grad = {:?}", x.grad());
    assert!(w.grad().is_none(), "w.grad = {:?}", w.grad());
    // A saved output modified in place is caught too.
    let a = leaf(&[0.5], &[1]);
    let e2_src = a.exp().unwrap();
    let s = e2_src.sum().unwrap();
    e2_src.mul_(2.0).unwrap();
    let e2 = err(s.backward());
    // SumBackward saves nothing; ExpBackward saved its output at version 0.
    assert!(matches!(e2, Error::SavedTensorModified { node: "ExpBackward", expected: 0, found: 1 }), "{e2:?}");
    vec![e, e2]
}

fn graph_released() -> Vec<Error> {
    let x = leaf(&[1.0, 2.0], &[2]);
    let s = (&x * &x).sum().unwrap();
    s.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    let e = err(s.backward());
    assert!(matches!(e, Error::GraphReleased { node: "MulBackward" }), "{e:?}");
    says(&e, &["MulBackward", "a second time", "saved tensors were freed", "retain_graph = true"]);
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0], "the failed backward added nothing");
    // With retain_graph the second pass works and accumulates.
    let x2 = leaf(&[3.0], &[1]);
    let s2 = (&x2 * &x2).sum().unwrap();
    let keep = tensor_core::BackwardOptions { retain_graph: Some(true), create_graph: false };
    s2.backward_opts(None, keep).unwrap();
    s2.backward().unwrap();
    assert_eq!(x2.grad().unwrap().to_vec::<f32>().unwrap(), vec![12.0]);
    vec![e]
}

fn not_differentiable() -> Vec<Error> {
    // max_pool2d's gradient has no gradient of its own.
    let x = leaf(&[1.0, 4.0, 3.0, 2.0], &[1, 1, 2, 2]);
    let y = x.max_pool2d([2, 2], [2, 2]).unwrap().sum().unwrap();
    let g = tensor_core::grad(&[&y], &[&x], true).unwrap().remove(0);
    assert_eq!(g.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 0.0, 0.0]);
    let e = err(g.sum().unwrap().backward());
    assert!(matches!(e, Error::NotDifferentiable { op: "max_pool2d", .. }), "{e:?}");
    says(&e, &["max_pool2d: not differentiable twice", "second-order"]);
    assert!(x.grad().is_none());
    vec![e]
}

fn unused_input() -> Vec<Error> {
    let x = leaf(&[1.0], &[]);
    let u = leaf(&[1.0], &[]);
    let y = &x * 2.0;
    let e = err(tensor_core::grad(&[&y], &[&x, &u], false));
    assert!(matches!(e, Error::UnusedInput { index: 1 }), "{e:?}");
    says(&e, &["grad", "input 1 was not used to compute the outputs"]);
    assert!(x.grad().is_none() && u.grad().is_none());
    vec![e]
}

// ------------------------------------------------------------------------------ tracing

fn symbolic_value() -> Vec<Error> {
    let x = f32s(&[1.0, 2.0], &[2]);
    let e1 = err(ConcreteFunction::trace("reads_arg", &[("x", &x)], || {
        let v = x.item::<f32>()?;
        Ok(vec![x.mul(v)?])
    }));
    let e1 = match e1 {
        Error::SymbolicValue { op: "item", ref name } if name == "x" => e1,
        other => panic!("expected SymbolicValue for x, got {other:?}"),
    };
    says(
        &e1,
        &[
            "item: `x` is a symbolic tensor while tracing",
            "exists only when the graph runs",
            "`cast` for another dtype",
            "`where_` for a choice per element",
            "`cond`/`while_loop` for a branch or a loop",
            "tprint!",
            "run_functions_eagerly(true)",
        ],
    );
    let e2 = err(ConcreteFunction::trace("reads_result", &[("x", &x)], || {
        let y = x.mul(2.0)?;
        let v = y.to_vec::<f32>()?;
        Ok(vec![y.add(v[0])?])
    }));
    assert!(matches!(e2, Error::SymbolicValue { op: "to_vec", .. }), "{e2:?}");
    // A captured tensor's value is a run-time value too.
    let w = f32s(&[3.0], &[1]);
    let e3 = err(ConcreteFunction::trace("reads_capture", &[("x", &x)], || {
        let y = x.mul(&w)?;
        let _ = w.item::<f32>()?;
        Ok(vec![y])
    }));
    assert!(matches!(e3, Error::SymbolicValue { op: "item", .. }), "{e3:?}");
    // The failed traces left no trace context behind: the next trace is clean.
    assert!(executing_eagerly());
    let f = ConcreteFunction::trace("clean", &[("x", &x)], || Ok(vec![x.mul(3.0)?])).unwrap();
    assert_eq!(f.call(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
    // Reading a constant made inside the trace is fine.
    let ok = ConcreteFunction::trace("constant", &[("x", &x)], || {
        let c = Tensor::scalar(2.0f32);
        Ok(vec![x.mul(c.item::<f32>()?)?])
    });
    assert!(ok.is_ok());
    // Through #[graph_fn]: the body's error comes back, and nothing half-made is cached.
    let e4 = err(item_inside(&x));
    assert!(matches!(e4, Error::SymbolicValue { op: "item", .. }), "{e4:?}");
    let e5 = err(item_inside(&x));
    assert!(matches!(e5, Error::SymbolicValue { .. }), "{e5:?}");
    let f = tensor_core::function::lookup("item_inside").expect("registered");
    assert_eq!(f.trace_count(), 0);
    assert!(f.cached_signatures().is_empty());
    assert!(executing_eagerly());
    vec![e1, e2, e3, e4]
}

#[graph_fn]
fn item_inside(x: &Tensor) -> Result<Tensor> {
    let s = x.sum()?.item::<f32>()?;
    x.mul(s)
}

fn parameter_in_trace() -> Vec<Error> {
    let x = f32s(&[1.0], &[1]);
    let e = err(ConcreteFunction::trace("makes_param", &[("x", &x)], || {
        let w = Tensor::zeros(&[1], DType::F32).requires_grad_(true)?;
        Ok(vec![x.mul(&w)?])
    }));
    assert!(matches!(e, Error::ParameterInTrace), "{e:?}");
    says(&e, &["requires_grad_", "created inside a traced graph function", "Create parameters outside the function"]);
    assert!(executing_eagerly());
    vec![e]
}

fn loop_var_changed() -> Vec<Error> {
    let x = f32s(&[1.0, 2.0, 3.0], &[3]);
    let e = err(while_loop(|(i, _): &(Tensor, Tensor)| i.lt(3), |(i, y)| Ok((&i + 1, y.sum()?)), (Tensor::scalar(0i32), x)));
    assert!(matches!(&e, Error::LoopVarChanged { .. }), "{e:?}");
    says(&e, &["while_loop", "loop_vars[1]", "f32[3]", "f32[]"]);
    vec![e]
}

fn branch_mismatch() -> Vec<Error> {
    let x = f32s(&[1.0, -2.0, 3.0], &[3]);
    let e =
        err(ConcreteFunction::trace("branches", &[("x", &x)], || cond(&x.sum()?.gt(0.0)?, || Ok(vec![x.clone()]), || Ok(vec![x.cast(DType::F64)?]))));
    assert!(matches!(&e, Error::BranchMismatch { index: 0, .. }), "{e:?}");
    says(&e, &["cond", "output 0 differs between the branches", "f32[3] in then_fn", "f64[3] in else_fn"]);
    vec![e]
}

fn control_flow() -> Vec<Error> {
    let x = f32s(&[1.0, 2.0], &[2]);
    let outer = f32s(&[10.0, 20.0], &[2]);
    let e = err(ConcreteFunction::trace("updates_in_condition", &[("x", &x)], || {
        let y = while_loop(|y: &Tensor| outer.add_(&x).and_then(|_| y.sum()?.lt(10.0f32)), |y| y.mul(2.0f32), x.clone())?;
        Ok(vec![y])
    }));
    assert!(matches!(&e, Error::ControlFlow { .. }), "{e:?}");
    says(&e, &["in-place update", "condition", "body"]);
    assert_eq!(outer.to_vec::<f32>().unwrap(), vec![10.0, 20.0], "the failed trace changed nothing");
    vec![e]
}

fn invalid_graph() -> Vec<Error> {
    let mut g = tensor_core::graph::Graph::new("hand_made");
    g.outputs.push(3);
    let e = err(tensor_core::graph::validate(&g));
    assert!(matches!(&e, Error::InvalidGraph { graph, .. } if graph == "hand_made"), "{e:?}");
    says(&e, &["graph `hand_made` is invalid", "value 3"]);
    vec![e]
}

fn leaked_tracer() -> Vec<Error> {
    let x = f32s(&[1.0, 2.0], &[2]);
    let leak: Mutex<Option<Tensor>> = Mutex::new(None);
    let f = ConcreteFunction::trace("leaks", &[("x", &x)], || {
        let y = x.mul(2.0)?;
        *leak.lock().unwrap() = Some(y.clone());
        Ok(vec![y])
    })
    .unwrap();
    let y = leak.lock().unwrap().take().unwrap();
    assert!(y.is_symbolic());
    let e1 = err(y.item::<f32>());
    let name = match &e1 {
        Error::LeakedTracer { op: "item", name, ty, function } => {
            assert_eq!((ty.as_str(), function.as_str()), ("f32[2]", "leaks"));
            name.clone()
        }
        other => panic!("expected LeakedTracer, got {other:?}"),
    };
    says(
        &e1,
        &[
            "item",
            &format!("`{name}` (f32[2])"),
            "made while tracing `leaks`",
            "belongs to a trace that has ended",
            "captured variable, a static or a returned closure",
            "return it from the function instead of storing it",
        ],
    );
    let e2 = err(y.add(1.0));
    assert!(matches!(e2, Error::LeakedTracer { op: "add", .. }), "{e2:?}");
    // Used inside another trace, it is still a leak.
    let e3 = err(ConcreteFunction::trace("uses_leak", &[("x", &x)], || Ok(vec![x.add(&y)?])));
    assert!(matches!(e3, Error::LeakedTracer { .. }), "{e3:?}");
    // The function itself still works.
    assert_eq!(f.call(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    vec![e1, e2, e3]
}

fn signature_mismatch() -> Vec<Error> {
    let x = f32s(&[1.0, 2.0], &[2]);
    let f = ConcreteFunction::trace("scale", &[("x", &x)], || Ok(vec![x.mul(2.0)?])).unwrap();
    let e1 = err(f.call(&[&Tensor::zeros(&[3], DType::F32)]));
    assert_eq!(e1.to_string(), "scale: argument `x` does not match the input signature: expected f32[2], found f32[3]");
    let e2 = err(f.call(&[&Tensor::zeros(&[2], DType::F64)]));
    says(&e2, &["scale", "`x`", "expected f32[2], found f64[2]"]);
    let e3 = err(f.call(&[]));
    assert_eq!(e3.to_string(), "scale: called with 0 tensor argument(s), but it takes 1: x");
    assert!(matches!(e3, Error::ArgumentCount { expected: 1, found: 0, .. }), "{e3:?}");
    // #[graph_fn(input_signature(...))]: a call that does not match is an Err, not a retrace.
    let ok = fixed_signature(&Tensor::ones(&[4, 3], DType::F32)).unwrap();
    assert_eq!(ok.dims(), vec![4, 3]);
    let e4 = err(fixed_signature(&Tensor::ones(&[4, 2], DType::F32)));
    assert!(matches!(&e4, Error::SignatureMismatch { arg, .. } if arg == "x"), "{e4:?}");
    says(&e4, &["fixed_signature", "argument `x`", "expected f32[?, 3], found f32[4, 2]"]);
    let e5 = err(fixed_signature(&Tensor::ones(&[4, 3], DType::F64)));
    says(&e5, &["expected f32[?, 3], found f64[4, 3]"]);
    assert_eq!(tensor_core::function::lookup("fixed_signature").unwrap().trace_count(), 1);
    vec![e1, e2, e3, e4, e5]
}

#[graph_fn(input_signature(x: f32[?, 3]))]
fn fixed_signature(x: &Tensor) -> Result<Tensor> {
    x.add(1.0)
}

fn guard_failed() -> Vec<Error> {
    let x = Tensor::ones(&[3], DType::F32);
    let any = [Shape::new(&[tensor_core::shape::UNKNOWN])];
    let f = ConcreteFunction::trace_with_shapes("small", &[("x", &x)], &any, true, || Ok(vec![if x.dim(0) < 10 { x.mul(2.0)? } else { x.exp()? }]))
        .unwrap();
    assert_eq!(f.call(&[&Tensor::ones(&[9], DType::F32)]).unwrap()[0].to_vec::<f32>().unwrap(), vec![2.0; 9]);
    let e = err(f.call(&[&Tensor::ones(&[12], DType::F32)]));
    assert_eq!(e.to_string(), "small: the call does not satisfy the trace's guards: arg x dim 0 = 12 fails n0 < 10");
    vec![e]
}

fn grad_presence() -> Vec<Error> {
    let x = leaf(&[1.0, 2.0], &[2]);
    // The body reads x.grad (empty now): its presence becomes a guard of the graph.
    let f = ConcreteFunction::trace("reads_grad", &[("x", &x)], || {
        assert!(x.grad().is_none());
        Ok(vec![no_grad(|| x.mul(2.0))?])
    })
    .unwrap();
    assert_eq!(f.call(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    (&x * 1.0).sum().unwrap().backward().unwrap(); // now x.grad is set
    let e = err(f.call(&[&x]));
    assert!(matches!(&e, Error::GradPresence { traced: "empty", now: "set", .. }), "{e:?}");
    says(
        &e,
        &["reads_grad", "the .grad of `x` was empty when the graph was traced but is set now", "call zero_grad() at the same point on every call"],
    );
    x.zero_grad().unwrap();
    assert!(f.call(&[&x]).is_ok());
    vec![e]
}

#[graph_fn(max_traces(1, error))]
fn traced_once(x: &Tensor) -> Result<Tensor> {
    x.mul(2.0)
}

fn too_many_traces() -> Vec<Error> {
    static ERRORS: OnceLock<Vec<Error>> = OnceLock::new();
    ERRORS
        .get_or_init(|| {
            let a = Tensor::ones(&[2], DType::F32);
            assert_eq!(traced_once(&a).unwrap().to_vec::<f32>().unwrap(), vec![2.0, 2.0]);
            let e = err(traced_once(&Tensor::ones(&[3], DType::F32)));
            assert!(matches!(&e, Error::TooManyTraces { count: 2, limit: 1, .. }), "{e:?}");
            says(&e, &["traced_once", "traced 2 times, more than max_traces = 1", "last retrace because", "[2]", "[3]"]);
            // The cached signature still runs; the refused one was not cached.
            assert_eq!(traced_once(&a).unwrap().to_vec::<f32>().unwrap(), vec![2.0, 2.0]);
            let f = tensor_core::function::lookup("traced_once").unwrap();
            assert_eq!((f.trace_count(), f.cached_signatures().len()), (1, 1));
            vec![e]
        })
        .clone()
}

fn io() -> Vec<Error> {
    let path = std::env::temp_dir().join(format!("tensor-core-errors-missing-{}.safetensors", std::process::id()));
    let e = err(tensor_core::io::load_tensors(&path));
    assert!(matches!(&e, Error::Io { action: "read", .. }), "{e:?}");
    says(&e, &[&path.display().to_string(), "cannot read"]);
    vec![e]
}

/// A small traced function to export.
fn exportable() -> ConcreteFunction {
    let x = f32s(&[1.0, -2.0], &[2]);
    ConcreteFunction::trace("exportable", &[("x", &x)], || Ok(vec![x.tanh()?])).unwrap()
}

fn bad_file() -> Vec<Error> {
    let e = err(tensor_core::export::load_bytes(b"TCGRAPH\0 cut short"));
    assert!(matches!(&e, Error::BadFile { format: "tensor-core graph", .. }), "{e:?}");
    says(&e, &["not a valid tensor-core graph file"]);
    vec![e]
}

fn file_version() -> Vec<Error> {
    let mut file = exportable().export_bytes().unwrap();
    file[8..12].copy_from_slice(&(tensor_core::export::VERSION + 1).to_le_bytes());
    let e = err(tensor_core::export::load_bytes(&file));
    assert!(matches!(&e, Error::FileVersion { found, supported, .. } if *found == supported + 1), "{e:?}");
    says(&e, &["is newer than this build reads", "load it with a newer tensor-core"]);
    vec![e]
}

fn state_dict() -> Vec<Error> {
    let mut model = vec![f32s(&[1.0, 2.0], &[2])];
    let e = err(model.load_state_dict(&[("0".to_string(), f32s(&[1.0, 2.0, 3.0], &[3]))]));
    assert!(matches!(&e, Error::StateDict { name, .. } if name == "0"), "{e:?}");
    says(&e, &["tensor `0`", "[3]", "nothing was loaded"]);
    assert_eq!(model[0].to_vec::<f32>().unwrap(), vec![1.0, 2.0], "unchanged");
    vec![e]
}

fn state_dict_keys() -> Vec<Error> {
    let mut model = vec![f32s(&[1.0, 2.0], &[2]), f32s(&[3.0], &[1])];
    let e = err(model.load_state_dict(&[("1".to_string(), f32s(&[5.0], &[1])), ("2".to_string(), f32s(&[5.0], &[1]))]));
    assert!(matches!(&e, Error::StateDictKeys { missing, unexpected, .. } if missing == &["0"] && unexpected == &["2"]), "{e:?}");
    says(&e, &["load_state_dict: 1 missing key: `0`; 1 unexpected key: `2`; nothing was loaded", "non-strict"]);
    assert_eq!(model[1].to_vec::<f32>().unwrap(), vec![3.0], "unchanged");
    vec![e]
}

/// A model whose only parameter is in a skipped field.
#[derive(GraphArg)]
struct Hiding {
    #[graph_arg(skip)]
    w: Tensor,
}

#[graph_fn]
fn read_hiding(m: &Hiding, x: &Tensor) -> Result<Tensor> {
    x.mul(&m.w)
}

fn skipped_parameters() -> Vec<Error> {
    let model = Hiding { w: f32s(&[1.0], &[1]).requires_grad_(true).unwrap() };
    let graph = err(read_hiding(&model, &f32s(&[2.0], &[1])));
    assert!(matches!(&graph, Error::SkippedParameters { fields, .. } if fields == &["m.w"]), "{graph:?}");
    says(&graph, &["read_hiding: field `m.w` is #[graph_arg(skip)] but holds tensors that require grad", "remove the skip"]);
    let eager = err(model.state_dict());
    says(&eager, &["state_dict: field `w` is #[graph_arg(skip)]"]);
    vec![graph, eager]
}

fn onnx_unsupported() -> Vec<Error> {
    let x = f32s(&[1.0, -2.0], &[2]);
    let step = ConcreteFunction::trace("step", &[("x", &x)], || {
        x.sub_(1.0f32)?;
        Ok(vec![])
    })
    .unwrap();
    let e = err(tensor_core::onnx::to_bytes(&step));
    assert!(matches!(&e, Error::OnnxUnsupported { .. }), "{e:?}");
    says(&e, &["onnx export: the in-place update of `x` has no ONNX mapping", "export an inference graph"]);
    assert!(!e.to_string().contains("slot"), "no internal names: {e}");
    vec![e]
}

/// An ONNX model from tests/fixtures/onnx_import (scripts/onnx_import_fixtures.py).
fn import_fixture(name: &str) -> Error {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/onnx_import").join(name);
    err(tensor_core::onnx::import(path))
}

fn onnx_import() -> Vec<Error> {
    let e = import_fixture("dangling.onnx");
    assert!(matches!(&e, Error::OnnxImport { node, op, .. } if node == "lost" && op == "Relu"), "{e:?}");
    says(&e, &["onnx import: node `lost` (Relu): input `nowhere` is made by no earlier node"]);
    vec![e]
}

fn onnx_unsupported_ops() -> Vec<Error> {
    let e = import_fixture("unsupported.onnx");
    assert!(matches!(&e, Error::OnnxUnsupportedOps { ops } if ops.len() == 2), "{e:?}");
    says(&e, &["onnx import: no tensor-core mapping for RandomNormalLike, RandomUniformLike", "docs/ONNX.md"]);
    vec![e]
}

fn onnx_dtype() -> Vec<Error> {
    let e = import_fixture("cast_uint8.onnx");
    assert!(matches!(&e, Error::OnnxDType { .. }), "{e:?}");
    says(&e, &["element type UINT8, which tensor-core lacks"]);
    vec![e]
}

fn distributed() -> Vec<Error> {
    // No communicator: this process never joined a job (distributed::init or init_single).
    let x = f32s(&[1.0, -2.0], &[2]);
    let e = err(tensor_core::distributed::all_reduce(&x, tensor_core::distributed::Reduce::Sum));
    assert!(matches!(&e, Error::Distributed { op: "all_reduce", .. }), "{e:?}");
    says(&e, &["all_reduce", "no communicator", "mpi", "mpirun"]);
    vec![e]
}

fn device() -> Vec<Error> {
    // This build has no GPU support, or this machine no GPU: either way an Err saying which.
    let x = f32s(&[1.0, -2.0], &[2]);
    let e = err(x.to_device(Device::Cuda(0)));
    assert!(matches!(&e, Error::Device { op: "to_device", .. }), "{e:?}");
    says(&e, &["cuda:0"]);
    vec![e]
}

// ------------------------------------------------------------------------------ the tests

macro_rules! variant_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                assert!(!super::$name().is_empty());
            }
        )*
        /// Every trigger, for the coverage check.
        fn all_triggers() -> Vec<(&'static str, fn() -> Vec<Error>)> {
            vec![$((stringify!($name), super::$name as fn() -> Vec<Error>)),*]
        }
    };
}

mod each {
    use super::*;
    variant_tests!(
        data_length,
        dtype_mismatch,
        unsupported_dtype,
        not_one_element,
        broadcast,
        shape_mismatch,
        axis,
        reshape,
        invalid_argument,
        index_out_of_range,
        no_grad_fn,
        backward_non_scalar,
        gradient_shape,
        in_place_on_leaf,
        saved_tensor_modified,
        graph_released,
        not_differentiable,
        unused_input,
        symbolic_value,
        parameter_in_trace,
        leaked_tracer,
        loop_var_changed,
        branch_mismatch,
        control_flow,
        invalid_graph,
        signature_mismatch,
        guard_failed,
        grad_presence,
        too_many_traces,
        io,
        bad_file,
        file_version,
        state_dict,
        state_dict_keys,
        skipped_parameters,
        onnx_unsupported,
        onnx_import,
        onnx_unsupported_ops,
        onnx_dtype,
        distributed,
        device,
    );

    #[test]
    fn every_variant_is_covered() {
        // The variants as declared in error.rs.
        let source = include_str!("../../../tensor-core/src/error.rs");
        let body = &source[source.find("pub enum Error {").expect("the enum")..];
        let body = &body[..body.find("\n}").expect("its end")];
        let declared: Vec<String> = body
            .lines()
            .filter_map(|l| l.strip_prefix("    "))
            .filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
            .map(|l| l.split([' ', ',', '{', '(']).next().unwrap().to_string())
            .collect();
        assert!(declared.len() >= 25, "parsed {declared:?}");
        let mut seen: Vec<String> = Vec::new();
        for (name, trigger) in all_triggers() {
            let errors = trigger();
            assert!(!errors.is_empty(), "{name} produced nothing");
            seen.extend(errors.iter().map(variant));
        }
        for v in &declared {
            let covered = seen.contains(v);
            let listed = NOT_REACHABLE.contains(&v.as_str());
            assert!(covered || listed, "Error::{v} is neither triggered by a test nor listed as not reachable");
            assert!(!(covered && listed), "Error::{v} is reachable now: remove it from NOT_REACHABLE");
        }
        for v in NOT_REACHABLE {
            assert!(declared.iter().any(|d| d == v), "{v} is not a variant any more");
        }
    }

    /// `{:?}` is the message (what `main() -> Result` and `unwrap()` print); `{:#?}` is the
    /// variant with its fields, as `#[derive(Debug)]` prints it.
    #[test]
    fn debug_prints_the_message_and_alternate_debug_the_variant() {
        for (name, trigger) in all_triggers() {
            for e in trigger() {
                assert_eq!(format!("{e:?}"), e.to_string(), "{name}");
                let alternate = format!("{e:#?}");
                let variant = variant(&e);
                let unit = alternate == variant;
                assert!(unit || (alternate.starts_with(&format!("{variant} {{\n    ")) && alternate.ends_with(",\n}")), "{alternate}");
            }
        }
        let e = err(Tensor::from_vec(vec![1.0f32; 5], &[2, 3]));
        let fields = "DataLength {\n    op: \"from_vec\",\n    len: 5,\n    shape: [2, 3],\n    numel: 6,\n}";
        assert_eq!(format!("{e:#?}"), fields);
        let unwrapped = std::panic::catch_unwind(|| Tensor::from_vec(vec![1.0f32; 5], &[2, 3]).unwrap()).map(|_| ()).expect_err("unwrap of an Err");
        let message = unwrapped.downcast_ref::<String>().expect("a formatted panic message");
        assert!(
            message.ends_with("from_vec: 5 values cannot fill shape [2, 3] (6 elements); pass exactly 6 values or change the shape"),
            "{message}"
        );
    }
}

// ------------------------------------------------------------------------------ failures change nothing

#[test]
fn failed_in_place_ops_leave_the_target_unchanged() {
    let x = f32s(&[1.0, 2.0, 3.0], &[3]);
    let alias = x.clone();
    assert!(x.add_(&Tensor::ones(&[2, 3], DType::F32)).is_err()); // would broadcast to [2, 3]
    assert!(x.mul_(&Tensor::ones(&[2], DType::F32)).is_err()); // does not broadcast
    assert!(x.sub_(&Tensor::ones(&[3], DType::F64)).is_err()); // dtype
    assert!(x.div_(&Tensor::ones(&[3], DType::I32)).is_err());
    assert!(x.assign_(&Tensor::ones(&[4], DType::F32)).is_err());
    assert!(x.assign_(&Tensor::ones(&[3], DType::I64)).is_err());
    assert_eq!(alias.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    assert_eq!(alias.version(), 0);
    // A non-leaf that requires grad keeps its history after a failed in-place op.
    let w = leaf(&[1.0, 2.0, 3.0], &[3]);
    let y = &w * 2.0;
    assert!(y.add_(&Tensor::ones(&[2, 3], DType::F32)).is_err());
    assert_eq!((y.version(), y.grad_fn().unwrap().name()), (0, "MulBackward"));
    y.sum().unwrap().backward().unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 2.0, 2.0]);
}

#[test]
fn failed_ops_leave_inputs_and_grads_unchanged() {
    let w = leaf(&[1.0, 2.0], &[2]);
    let y = &w * 3.0;
    assert!(y.matmul(&Tensor::ones(&[3], DType::F32)).is_err());
    assert!(y.reshape([3]).is_err());
    assert!(y.add(&Tensor::ones(&[3], DType::F32)).is_err());
    assert_eq!((y.to_vec::<f32>().unwrap(), y.version()), (vec![3.0, 6.0], 0));
    assert!(w.grad().is_none());
    y.sum().unwrap().backward().unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0, 3.0]);
    // A failed backward later does not touch the accumulated grad.
    assert!((&w * 1.0).backward().is_err());
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0, 3.0]);
}

#[test]
fn zero_gives_zeros_even_from_inf_and_nan() {
    let x = f32s(&[f32::INFINITY, f32::NAN, -2.0], &[3]);
    x.zero_().unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![0.0, 0.0, 0.0]);
    assert_eq!(x.version(), 1);
}
