//! A program as Rust code: a function over the public API and a test that checks it with
//! [`check`](super::check), ready to paste into `tests/tests/fuzz.rs`.

use super::data::{Dist, InputSpec};
use super::program::{Block, GradMode, Node, Program, Reduce, Rhs, Scalar, Ty};
use std::fmt::Write;
use tensor_core::DType;

/// `p` as Rust code: `fn program(x: &[Tensor])` and a `#[test]` that checks it.
pub fn to_rust(p: &Program) -> String {
    let mut s = String::new();
    s.push_str("#[allow(unused_variables, clippy::redundant_clone)]\nfn program(x: &[Tensor]) -> Result<Vec<Tensor>> {\n");
    for (k, (id, _)) in p.inputs.iter().enumerate() {
        let _ = writeln!(s, "    let v{id} = x[{k}].clone();");
    }
    block_steps(&mut s, &p.body, 1);
    let _ = writeln!(s, "    Ok(vec![{}])\n}}\n", list(&p.body.results));
    s.push_str("#[test]\nfn fuzz_case() {\n    let inputs = [\n");
    for (_, spec) in &p.inputs {
        let _ = writeln!(s, "        {},", input_spec(spec));
    }
    let _ = writeln!(s, "    ];\n    assert_eq!(check(&inputs, {}, {}, &program), Ok(Agreement::Same));\n}}", grad_mode(p.grad), p.preset_grads);
    imports(&s) + &s
}

/// The `use` lines the code `s` needs.
fn imports(s: &str) -> String {
    let mut control = Vec::new();
    if s.contains("cond(") {
        control.push("cond");
    }
    if s.contains("while_loop_opts(") {
        control.extend(["while_loop_opts", "WhileOptions"]);
    }
    let mut out = String::new();
    match control[..] {
        [] => {}
        [one] => {
            let _ = writeln!(out, "use tensor_core::control::{one};");
        }
        _ => {
            let _ = writeln!(out, "use tensor_core::control::{{{}}};", control.join(", "));
        }
    }
    if s.contains("CmpOp::") {
        out.push_str("use tensor_core::ops::CmpOp;\n");
    }
    out.push_str("use tensor_core::prelude::*;\n");
    let fallible = if s.contains(".fallible()") { "Fallible, " } else { "" };
    let _ = writeln!(out, "use tests::fuzz::{{check, Agreement, Dist, {fallible}GradMode, InputSpec}};\n");
    out
}

fn input_spec(spec: &InputSpec) -> String {
    let mut s = format!("InputSpec::new(DType::{:?}, &{:?}, {}, {})", spec.dtype, spec.dims, dist(spec.dist), spec.seed);
    if spec.requires_grad {
        s.push_str(".requires_grad()");
    }
    if spec.capture {
        s.push_str(".captured()");
    }
    s
}

fn dist(d: Dist) -> String {
    match d {
        Dist::Ints(lo, hi) => format!("Dist::Ints({lo}, {hi})"),
        other => format!("Dist::{other:?}"),
    }
}

fn grad_mode(g: GradMode) -> String {
    match g {
        GradMode::BackwardSgd(lr) => format!("GradMode::BackwardSgd({})", f64_lit(lr)),
        other => format!("GradMode::{other:?}"),
    }
}

/// Values as the elements of a returned `vec!` (cloned: a value may be returned twice, or
/// be captured by both branches of a `cond`).
fn list(ids: &[usize]) -> String {
    ids.iter().map(|i| format!("v{i}.clone()")).collect::<Vec<_>>().join(", ")
}

fn refs(ids: &[usize]) -> String {
    ids.iter().map(|i| format!("&v{i}")).collect::<Vec<_>>().join(", ")
}

fn indent(depth: usize) -> String {
    "    ".repeat(depth)
}

fn block_steps(s: &mut String, b: &Block, depth: usize) {
    for step in &b.steps {
        let pad = indent(depth);
        match &step.node {
            Node::Cond { pred, then, other } => {
                let _ = writeln!(s, "{pad}let r = cond(\n{pad}    &v{pred},");
                closure(s, "||", "Vec<Tensor>", then, depth + 1, true);
                closure(s, "||", "Vec<Tensor>", other, depth + 1, true);
                let _ = writeln!(s, "{pad})?;");
                unpack(s, &step.outs, &pad);
            }
            Node::While { vars, cond, body, max_iterations } => {
                let _ = writeln!(
                    s,
                    "{pad}let r = while_loop_opts(\n{pad}    &WhileOptions {{ max_iterations: {max_iterations:?}, ..WhileOptions::default() }},"
                );
                closure(s, "|vars: &Vec<Tensor>|", "Tensor", cond, depth + 1, false);
                closure(s, "|vars: Vec<Tensor>|", "Vec<Tensor>", body, depth + 1, true);
                let inits: Vec<String> = vars.iter().map(|v| format!("v{v}.clone()")).collect();
                let _ = writeln!(s, "{pad}    vec![{}],\n{pad})?;", inits.join(", "));
                unpack(s, &step.outs, &pad);
            }
            node if node.in_place_target().is_some() => {
                let _ = writeln!(s, "{pad}{};", expr(node));
            }
            node => {
                let _ = writeln!(s, "{pad}let v{} = {};", step.outs[0], expr(node));
            }
        }
    }
}

fn unpack(s: &mut String, outs: &[usize], pad: &str) {
    for (k, o) in outs.iter().enumerate() {
        let _ = writeln!(s, "{pad}let v{o} = r[{k}].clone();");
    }
}

fn closure(s: &mut String, head: &str, ret: &str, b: &Block, depth: usize, many: bool) {
    let pad = indent(depth);
    let _ = writeln!(s, "{pad}{head} -> Result<{ret}> {{");
    for (k, p) in b.params.iter().enumerate() {
        let _ = writeln!(s, "{pad}    let v{p} = vars[{k}].clone();");
    }
    block_steps(s, b, depth + 1);
    if many {
        let _ = writeln!(s, "{pad}    Ok(vec![{}])", list(&b.results));
    } else {
        let _ = writeln!(s, "{pad}    Ok(v{}.clone())", b.results[0]);
    }
    let _ = writeln!(s, "{pad}}},");
}

/// An f64 as a Rust expression of type f64.
pub fn f64_lit(v: f64) -> String {
    if v.is_nan() {
        "f64::NAN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "f64::INFINITY".into()
        } else {
            "f64::NEG_INFINITY".into()
        }
    } else {
        let t = format!("{v:?}");
        if t.contains('.') || t.contains('e') {
            t
        } else {
            format!("{t}.0")
        }
    }
}

fn scalar(v: Scalar) -> String {
    match v {
        Scalar::F(f) => f64_lit(f),
        Scalar::I(i) => format!("{i}i64"),
    }
}

fn rhs(r: &Rhs) -> String {
    match r {
        Rhs::Value(v) => format!("&v{v}"),
        Rhs::Scalar(s) => scalar(*s),
    }
}

fn element(dtype: DType, v: f64) -> String {
    match dtype {
        DType::F32 if v.is_nan() => "f32::NAN".into(),
        DType::F32 if v.is_infinite() => if v > 0.0 { "f32::INFINITY" } else { "f32::NEG_INFINITY" }.into(),
        DType::F32 => format!("{:?}f32", v as f32),
        DType::F64 => f64_lit(v),
        DType::I32 => format!("{}i32", v as i32),
        DType::I64 => format!("{}i64", v as i64),
        DType::Bool => format!("{}", v != 0.0),
    }
}

fn constant(ty: &Ty, values: &[f64]) -> String {
    let vals: Vec<String> = values.iter().map(|&v| element(ty.dtype, v)).collect();
    let vals = if vals.is_empty() { format!("Vec::<{}>::new()", rust_type(ty.dtype)) } else { format!("vec![{}]", vals.join(", ")) };
    format!("Tensor::from_vec({vals}, &{:?})?", ty.dims)
}

fn rust_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::Bool => "bool",
    }
}

fn reduce_all(op: Reduce) -> &'static str {
    match op {
        Reduce::Sum => "sum().fallible()?",
        Reduce::Mean => "mean()?",
        Reduce::Max => "max()?",
        Reduce::Min => "min()?",
    }
}

/// The expression of a single-output or in-place node.
fn expr(node: &Node) -> String {
    match node {
        Node::Unary(op, x) => format!("v{x}.{}()?", op.name()),
        Node::Binary(op, x, r) => format!("v{x}.{}({})?", op.name(), rhs(r)),
        Node::ScalarLhs(op, s, x) => format!("{} {} &v{x}", scalar(*s).trim_end_matches("i64"), op.operator().expect("an operator")),
        Node::Compare(op, x, r) => format!("v{x}.compare(CmpOp::{op:?}, {})?", rhs(r)),
        Node::Where(c, a, b) => format!("Tensor::where_(&v{c}, &v{a}, &v{b})?"),
        Node::Clamp(x, Some(lo), Some(hi)) => format!("v{x}.clamp({}, {})?", scalar(*lo), scalar(*hi)),
        Node::Clamp(x, Some(lo), None) => format!("v{x}.clamp_min({})?", scalar(*lo)),
        Node::Clamp(x, None, Some(hi)) => format!("v{x}.clamp_max({})?", scalar(*hi)),
        Node::Clamp(x, None, None) => format!("v{x}.clone()"),
        Node::Cast(x, d) => format!("v{x}.cast(DType::{d:?}).fallible()?"),
        Node::Reduce(op, x, None, _) => format!("v{x}.{}", reduce_all(*op)),
        Node::Reduce(op, x, Some(axes), keep) => format!("v{x}.{}(&{axes:?}, {keep})?", op.axes_name()),
        Node::Argmax(x, axis, keep) => format!("v{x}.argmax({axis}, {keep})?"),
        Node::Matmul(a, b) => format!("v{a}.matmul(&v{b})?"),
        Node::MatmulT(a, b, ta, tb) => format!("v{a}.matmul_t(&v{b}, {ta}, {tb})?"),
        Node::Reshape(x, dims) => format!("v{x}.reshape(&{dims:?})?"),
        Node::Permute(x, perm) => format!("v{x}.permute(&{perm:?})?"),
        Node::Transpose(x, a, b) => format!("v{x}.transpose({a}, {b})?"),
        Node::T(x) => format!("v{x}.t()?"),
        Node::BroadcastTo(x, dims) => format!("v{x}.broadcast_to(&{dims:?})?"),
        Node::Unsqueeze(x, a) => format!("v{x}.unsqueeze({a})?"),
        Node::Squeeze(x, a) => format!("v{x}.squeeze({a})?"),
        Node::FlattenFrom(x, a) => format!("v{x}.flatten_from({a})?"),
        Node::Concat(xs, axis) => format!("Tensor::concat(&[{}], {axis})?", refs(xs)),
        Node::Stack(xs, axis) => format!("Tensor::stack(&[{}], {axis})?", refs(xs)),
        Node::Narrow(x, axis, start, len) => format!("v{x}.narrow({axis}, {start}, {len})?"),
        Node::Select(x, axis, index) => format!("v{x}.select({axis}, {index})?"),
        Node::IndexSelect(x, axis, i) => format!("v{x}.index_select({axis}, &v{i})?"),
        Node::Gather(x, axis, i) => format!("v{x}.gather({axis}, &v{i})?"),
        Node::OneHot(x, classes, d) => format!("v{x}.one_hot({classes}, DType::{d:?})?"),
        Node::Softmax(x, axis) => format!("v{x}.softmax({axis})?"),
        Node::LogSoftmax(x, axis) => format!("v{x}.log_softmax({axis})?"),
        Node::CrossEntropy(x, l) => format!("v{x}.cross_entropy(&v{l})?"),
        Node::Conv2d { x, w, bias, stride, padding } => {
            let b = bias.map_or("None".to_string(), |b| format!("Some(&v{b})"));
            format!("v{x}.conv2d(&v{w}, {b}, {stride:?}, {padding:?})?")
        }
        Node::MaxPool2d(x, k, st) => format!("v{x}.max_pool2d({k:?}, {st:?})?"),
        Node::Detach(x) => format!("v{x}.detach()"),
        Node::Const(ty, values) => constant(ty, values),
        Node::InPlace(op, t, r) => format!("v{t}.{}({})?", op.name(), rhs(r)),
        Node::Assign(t, src) => format!("v{t}.assign_(&v{src})?"),
        Node::Zero(t) => format!("v{t}.zero_()?"),
        Node::Cond { .. } | Node::While { .. } => unreachable!("printed as blocks"),
    }
}
