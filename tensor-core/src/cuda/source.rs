//! CUDA C source for elementwise programs and reductions, generated from the same table of
//! scalar functions the CPU loops use (`math::functions`): each function names its CUDA twin
//! (`prelude.cuh`), and the generator only strings them together. Plain text, built and
//! checked without a GPU (golden tests below; NVRTC compiles each one where it is installed).
//!
//! An elementwise program is the graph's fused program (`math::Instr`): instructions
//! over the program's inputs and earlier results. One op run eagerly is a program of one
//! instruction, so eager kernels and fused graph kernels come from one generator.
//!
//! Elementwise programs are generated in a [`MathMode`]: the CPU's functions (the default),
//! or, opt-in, the GPU's fast ones for f32 (`fast_math.rs`, `prelude_fast.cuh`).

use super::fast_math::{math_mode, MathMode};
use crate::dtype::{DType, Scalar};
use crate::math::fastmath;
use crate::math::{BinaryOp, CmpOp, ElementwiseOp, ReduceOp, UnaryOp, GELU_C, GELU_K};
use crate::math::{Fn1, Fn2, Not, Visit1, Visit2};
use crate::math::{Instr, Operand};
use std::fmt::Write;

/// The most dims an index computation handles (ranks above are refused before codegen).
pub(crate) const MAX_RANK: usize = 8;
/// The most strided (broadcast or permuted) inputs of one program.
pub(crate) const MAX_STRIDED: usize = 8;

/// The index argument of every kernel, the twin of its `struct TcIndex`: the output's dims,
/// and each strided input's strides in elements (a reduction: kept dims then reduced dims,
/// with the kept strides in row 0 and the reduced in row 1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TcIndex {
    pub dims: [i64; MAX_RANK],
    pub strides: [[i64; MAX_RANK]; MAX_STRIDED],
}

/// The scalar functions, compiled ahead of every kernel.
const PRELUDE: &str = include_str!("prelude.cuh");
/// The fast-math functions, compiled ahead of the kernels that call them.
const FAST_PRELUDE: &str = include_str!("prelude_fast.cuh");
/// What every fast-math function's name starts with.
const FAST_PREFIX: &str = "tc_fast_";

/// A kernel's CUDA C: its entry point's name and its own text; the prelude every kernel
/// shares comes in front of it in [`code`](Self::code). The name is the text's hash, so a
/// launch finds a compiled kernel without building the whole unit again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelSource {
    pub name: String,
    pub kernel: String,
    /// Elements each thread of the launch handles (4 for a vectorized elementwise kernel).
    pub per_thread: usize,
}

impl KernelSource {
    fn new(prefix: &str, signature_and_body: &str) -> KernelSource {
        KernelSource::with_helpers(prefix, "", signature_and_body, 1)
    }

    /// A kernel with device functions of its own (`helpers`) in front of it.
    /// Its helpers' names end in the kernel's (`tc_lane` becomes `tc_ew_…_lane`), so the
    /// kernels of one translation unit never clash.
    fn with_helpers(prefix: &str, helpers: &str, signature_and_body: &str, per_thread: usize) -> KernelSource {
        let name = format!("{prefix}_{:016x}", fnv1a(&format!("{helpers}{signature_and_body}")));
        let own = |text: &str| text.replace("tc_lane(", &format!("{name}_lane("));
        KernelSource { kernel: format!("{}extern \"C\" __global__ void {name}{}", own(helpers), own(signature_and_body)), name, per_thread }
    }

    /// The whole translation unit: the prelude, the fast-math functions when the kernel
    /// calls any (so that every other kernel's unit stays what it was without them), then
    /// the kernel. The unit follows from the kernel's text, so the name fixes it.
    pub(crate) fn code(&self) -> String {
        let fast = if self.kernel.contains(FAST_PREFIX) { FAST_PRELUDE } else { "" };
        format!("{}{fast}{}", header(), self.kernel)
    }
}

/// How a kernel reads one input, for output index `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    /// `in[i]`: the input has the output's shape and is contiguous.
    Contiguous,
    /// `in[0]`: one value for every output.
    Scalar,
    /// `in[offset(i)]`, with the input's strides (0 on broadcast dims) from the kernel's
    /// `TcIndex` argument: the `k`-th strided input reads `strides[k]`.
    Strided(usize),
}

/// What the generator needs of an elementwise program.
pub(crate) struct Program<'a> {
    pub rank: usize,
    pub inputs: &'a [(DType, Access)],
    pub instrs: &'a [Instr],
    pub outputs: &'a [usize],
}

/// The C type of a dtype's elements on the device (`bool` is one byte, as in Rust).
pub(crate) fn c_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::Bool => "tc_bool",
    }
}

/// A scalar attribute as a C literal of `dtype`, converted as `Element::from_scalar` does,
/// written by its bits so that no decimal rounding comes between.
pub(crate) fn literal(s: Scalar, dtype: DType) -> String {
    use crate::storage::Element;
    match dtype {
        DType::F32 => format!("__int_as_float(0x{:08x})", f32::from_scalar(s).to_bits()),
        DType::F64 => format!("__longlong_as_double(0x{:016x}LL)", f64::from_scalar(s).to_bits()),
        DType::I32 => format!("((int)0x{:08x})", i32::from_scalar(s) as u32),
        DType::I64 => format!("((long long)0x{:016x}ULL)", i64::from_scalar(s) as u64),
        DType::Bool => format!("((tc_bool){})", bool::from_scalar(s) as u8),
    }
}

/// The table's function names, whatever the element type.
struct CudaName;

impl<T, U> Visit1<T, U> for CudaName {
    type Out = &'static str;
    fn visit<F: Fn1<T, U> + 'static>(self) -> &'static str {
        F::CUDA
    }
}

impl<T, U> Visit2<T, U> for CudaName {
    type Out = &'static str;
    fn visit<F: Fn2<T, U> + 'static>(self) -> &'static str {
        F::CUDA
    }
}

fn unary_fn(u: UnaryOp, dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => u.visit_float::<f32, _>(CudaName),
        DType::F64 => u.visit_float::<f64, _>(CudaName),
        DType::I32 => u.visit_num::<i32, _>(CudaName),
        DType::I64 => u.visit_num::<i64, _>(CudaName),
        DType::Bool => <CudaName as Visit1<bool, bool>>::visit::<Not>(CudaName),
    }
}

fn binary_fn(b: BinaryOp) -> &'static str {
    b.visit::<f32, _>(CudaName)
}

fn compare_fn(c: CmpOp) -> &'static str {
    c.visit::<f32, _>(CudaName)
}

/// The fast-math twin of an f32 unary function, where it has one.
fn fast_unary(u: UnaryOp) -> Option<&'static str> {
    match u {
        UnaryOp::Exp => Some("tc_fast_exp"),
        UnaryOp::Tanh => Some("tc_fast_tanh"),
        UnaryOp::Sigmoid => Some("tc_fast_sigmoid"),
        UnaryOp::GeluTanh => Some("tc_fast_gelu_tanh"),
        _ => None,
    }
}

/// The fast-math twin of an f32 binary function, where it has one: `+` and `*` without the
/// select that keeps a NaN operand's own bits (a NaN still gives NaN).
fn fast_binary(b: BinaryOp) -> Option<&'static str> {
    match b {
        BinaryOp::Div => Some("tc_fast_div"),
        BinaryOp::Add => Some("tc_add_plain"),
        BinaryOp::Mul => Some("tc_mul_plain"),
        _ => None,
    }
}

/// The function of a unary op over `dtype` in `math`.
fn unary_fn_in(u: UnaryOp, dtype: DType, math: MathMode) -> &'static str {
    match (math, dtype) {
        (MathMode::Fast, DType::F32) => fast_unary(u).unwrap_or_else(|| unary_fn(u, dtype)),
        _ => unary_fn(u, dtype),
    }
}

/// The function of a binary op over `dtype` in `math`.
fn binary_fn_in(b: BinaryOp, dtype: DType, math: MathMode) -> &'static str {
    match (math, dtype) {
        (MathMode::Fast, DType::F32) => fast_binary(b).unwrap_or_else(|| binary_fn(b)),
        _ => binary_fn(b),
    }
}

/// The C expression of one instruction over its operands' expressions.
fn expression(op: &ElementwiseOp, args: &[String], in_dtype: DType, math: MathMode) -> String {
    let lit = |s: Scalar| literal(s, in_dtype);
    let binary = |b: BinaryOp| binary_fn_in(b, in_dtype, math);
    match op {
        ElementwiseOp::Unary(u) => format!("{}({})", unary_fn_in(*u, in_dtype, math), args[0]),
        ElementwiseOp::Binary(b) => format!("{}({}, {})", binary(*b), args[0], args[1]),
        ElementwiseOp::BinaryScalar { op, scalar, scalar_first: true } => format!("{}({}, {})", binary(*op), lit(scalar.0), args[0]),
        ElementwiseOp::BinaryScalar { op, scalar, .. } => format!("{}({}, {})", binary(*op), args[0], lit(scalar.0)),
        ElementwiseOp::Compare(c) => format!("{}({}, {})", compare_fn(*c), args[0], args[1]),
        ElementwiseOp::CompareScalar { op, scalar } => format!("{}({}, {})", compare_fn(*op), args[0], lit(scalar.0)),
        ElementwiseOp::Where => format!("tc_where({}, {}, {})", args[0], args[1], args[2]),
        ElementwiseOp::Clamp { min, max } => {
            let lo = min.map_or_else(|| args[0].clone(), |m| format!("tc_clamp_lo({}, {})", args[0], lit(m.0)));
            max.map_or(lo.clone(), |m| format!("tc_clamp_hi({lo}, {})", lit(m.0)))
        }
        ElementwiseOp::Cast(to) => format!("tc_cast<{}>({})", c_type(*to), args[0]),
    }
}

/// The constants of `fastmath.rs` (and GELU's), as exact bit patterns.
fn constants() -> String {
    let mut out = String::new();
    let mut f32s = vec![
        ("TC_LOG2E", fastmath::LOG2E),
        ("TC_LN2_HI", fastmath::LN2_HI),
        ("TC_LN2_LO", fastmath::LN2_LO),
        ("TC_EXP_HI", fastmath::EXP_HI),
        ("TC_EXP_LO", fastmath::EXP_LO),
        ("TC_ROUND_MAGIC", fastmath::ROUND_MAGIC),
        ("TC_TANH_CLAMP", fastmath::TANH_CLAMP),
        ("TC_TANH_TINY", fastmath::TANH_TINY),
        ("TC_FRAC_1_SQRT_2_F32", std::f32::consts::FRAC_1_SQRT_2),
    ];
    let named = |prefix: &str, c: &[f32]| -> Vec<(String, f32)> { c.iter().enumerate().map(|(i, &v)| (format!("{prefix}{i}"), v)).collect() };
    let mut owned = named("TC_EXP_P", &fastmath::EXP_P);
    owned.extend(named("TC_TANH_P", &fastmath::TANH_P));
    owned.extend(named("TC_TANH_Q", &fastmath::TANH_Q));
    f32s.extend(owned.iter().map(|(n, v)| (n.as_str(), *v)));
    for (name, v) in f32s {
        writeln!(out, "#define {name} __int_as_float(0x{:08x})", v.to_bits()).expect("write to String");
    }
    for (name, v) in [("TC_GELU_K", GELU_K), ("TC_GELU_C", GELU_C), ("TC_FRAC_1_SQRT_2_F64", std::f64::consts::FRAC_1_SQRT_2)] {
        writeln!(out, "#define {name} __longlong_as_double(0x{:016x}LL)", v.to_bits()).expect("write to String");
    }
    out
}

/// The index argument every kernel takes: the output's dims and each strided input's
/// strides in elements (a `#[repr(C)]` twin on the Rust side, `launch::TcIndex`).
const INDEX_STRUCT: &str = "struct TcIndex { long long dims[8]; long long strides[8][8]; };\n";

/// The prelude every kernel starts with (built once).
pub(crate) fn header() -> &'static str {
    static HEADER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HEADER.get_or_init(|| format!("{}{PRELUDE}\n{INDEX_STRUCT}{}", constants(), batched::TABLE_STRUCT.replace("WORDS", &TABLE_WORDS.to_string())))
}

/// A 64-bit FNV-1a hash: kernel names and the disk cache's file names (stable across builds
/// and platforms, unlike `std`'s hasher).
pub(crate) fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The index arithmetic: the coordinates of output index `i` (when a strided input needs
/// them) and each input's value.
fn loads(p: &Program, body: &mut String) {
    if p.inputs.iter().any(|(_, a)| matches!(a, Access::Strided(_))) {
        writeln!(body, "        long long rem = i, c[{}];", p.rank.max(1)).expect("write");
        for d in (0..p.rank).rev() {
            writeln!(body, "        c[{d}] = rem % ix.dims[{d}]; rem /= ix.dims[{d}];").expect("write");
        }
    }
    for (k, (dtype, access)) in p.inputs.iter().enumerate() {
        let at = match access {
            Access::Contiguous => "i".to_string(),
            Access::Scalar => "0".to_string(),
            Access::Strided(s) => (0..p.rank).map(|d| format!("c[{d}] * ix.strides[{s}][{d}]")).collect::<Vec<_>>().join(" + "),
        };
        let at = if at.is_empty() { "0".to_string() } else { at };
        writeln!(body, "        const {} a{k} = in{k}[{at}];", c_type(*dtype)).expect("write");
    }
}

fn operand(o: &Operand) -> String {
    match o {
        Operand::Input(i) => format!("a{i}"),
        Operand::ResultOf(r) => format!("r{r}"),
    }
}

fn operand_dtype(p: &Program, o: &Operand) -> DType {
    match *o {
        Operand::Input(i) => p.inputs[i].0,
        Operand::ResultOf(r) => p.instrs[r].dtype,
    }
}

/// A generated kernel kept for its program, so that a launch of a program seen before (every
/// eager op after its first use, every graph step after the first call) only hashes it.
struct Cached {
    math: MathMode,
    rank: usize,
    inputs: Vec<(DType, Access)>,
    instrs: Vec<Instr>,
    outputs: Vec<usize>,
    source: std::sync::Arc<KernelSource>,
}

impl Cached {
    fn is(&self, p: &Program, math: MathMode) -> bool {
        self.math == math && self.rank == p.rank && self.inputs == p.inputs && self.instrs == p.instrs && self.outputs == p.outputs
    }
}

/// [`elementwise_in`] the [`math_mode`] of now, generated once per program and mode.
pub(crate) fn elementwise_cached(p: &Program) -> std::sync::Arc<KernelSource> {
    use std::hash::{Hash, Hasher};
    type Map = std::collections::HashMap<u64, Vec<Cached>>;
    static CACHE: std::sync::Mutex<Option<Map>> = std::sync::Mutex::new(None);
    let math = math_mode();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (math, p.rank, p.inputs, p.instrs, p.outputs).hash(&mut h);
    let hash = h.finish();
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(Map::new);
    if let Some(c) = cache.get(&hash).and_then(|v| v.iter().find(|c| c.is(p, math))) {
        return c.source.clone();
    }
    let source = std::sync::Arc::new(elementwise_in(p, math));
    // A bound on what is kept: a process that makes ever new programs starts over.
    if cache.len() >= 4096 {
        cache.clear();
    }
    let entry =
        Cached { math, rank: p.rank, inputs: p.inputs.to_vec(), instrs: p.instrs.to_vec(), outputs: p.outputs.to_vec(), source: source.clone() };
    cache.entry(hash).or_default().push(entry);
    source
}

/// [`elementwise_in`] with the CPU's functions (the default mode).
#[cfg(test)]
pub(crate) fn elementwise(p: &Program) -> KernelSource {
    elementwise_in(p, MathMode::CpuBits)
}

/// The CUDA C kernel of an elementwise program with the functions of `math`: one thread per
/// output element (grid-stride), every intermediate in registers. A program over contiguous
/// (or scalar) 4-byte inputs and outputs is [vectorized](vectorized).
pub(crate) fn elementwise_in(p: &Program, math: MathMode) -> KernelSource {
    if let Some(v) = vector_type(p) {
        return vectorized(p, v, math);
    }
    let mut body = String::new();
    loads(p, &mut body);
    instructions(p, &mut body, math);
    for (j, &o) in p.outputs.iter().enumerate() {
        writeln!(body, "        out{j}[i] = r{o};").expect("write");
    }
    let kernel =
        format!("(\n    {}) {{\n    for (long long i = {FIRST}; i < n; i += {STRIDE}) {{\n{body}    }}\n}}\n", parameters(p).join(",\n    "));
    KernelSource::new("tc_ew", &kernel)
}

/// A grid-stride loop's first index and its step.
const FIRST: &str = "(long long)blockIdx.x * blockDim.x + threadIdx.x";
const STRIDE: &str = "(long long)gridDim.x * blockDim.x";

fn parameters(p: &Program) -> Vec<String> {
    let mut params: Vec<String> = vec!["const long long n".into(), "const TcIndex ix".into()];
    for (k, (dtype, _)) in p.inputs.iter().enumerate() {
        params.push(format!("const {}* __restrict__ in{k}", c_type(*dtype)));
    }
    for (j, &o) in p.outputs.iter().enumerate() {
        params.push(format!("{}* __restrict__ out{j}", c_type(p.instrs[o].dtype)));
    }
    params
}

/// `const T rK = ...;` for each instruction, over `aK` (inputs) and earlier `rK`.
fn instructions(p: &Program, body: &mut String, math: MathMode) {
    for (k, instr) in p.instrs.iter().enumerate() {
        let args: Vec<String> = instr.args.iter().map(operand).collect();
        // Where's first operand is the bool condition; its type is the values'.
        let typed_arg = if matches!(instr.op, ElementwiseOp::Where) { &instr.args[1] } else { &instr.args[0] };
        let expr = expression(&instr.op, &args, operand_dtype(p, typed_arg), math);
        writeln!(body, "        const {} r{k} = {expr};", c_type(instr.dtype)).expect("write");
    }
}

/// The 16-byte vector type of a program whose inputs are contiguous or scalar and whose
/// contiguous inputs and outputs all have 4-byte elements of one kind (`float4`, `int4`),
/// unless `TENSOR_CORE_CUDA_VECTORIZE=0`.
fn vector_type(p: &Program) -> Option<&'static str> {
    static VECTORIZE: crate::switch::Switch = crate::switch::Switch::new("TENSOR_CORE_CUDA_VECTORIZE", true);
    if !VECTORIZE.on() {
        return None;
    }
    let mut wide = p.inputs.iter().filter(|(_, a)| *a == Access::Contiguous).map(|(d, _)| *d).peekable();
    wide.peek()?;
    if p.inputs.iter().any(|(_, a)| matches!(a, Access::Strided(_))) {
        return None;
    }
    let mut all = wide.chain(p.outputs.iter().map(|&o| p.instrs[o].dtype));
    match all.next()? {
        DType::F32 if all.all(|d| d == DType::F32) => Some("float4"),
        DType::I32 if all.all(|d| d == DType::I32) => Some("int4"),
        _ => None,
    }
}

/// The device function that computes one element of `p` from its inputs' values
/// (`tc_lane(a0, .., o0, ..)`): the vectorized and the batched kernels call it per element.
fn lane_function(p: &Program, math: MathMode) -> String {
    let mut lane_params: Vec<String> = p.inputs.iter().enumerate().map(|(k, (d, _))| format!("const {} a{k}", c_type(*d))).collect();
    lane_params.extend(p.outputs.iter().enumerate().map(|(j, &o)| format!("{}& o{j}", c_type(p.instrs[o].dtype))));
    let mut lane = String::new();
    instructions(p, &mut lane, math);
    for (j, &o) in p.outputs.iter().enumerate() {
        writeln!(lane, "        o{j} = r{o};").expect("write");
    }
    format!("static __device__ __forceinline__ void tc_lane({}) {{\n{lane}}}\n", lane_params.join(", "))
}

/// Four elements per thread with 16-byte loads and stores: a device function computes one
/// element from its inputs' values (`tc_lane`), the loop calls it for each lane of a vector,
/// and a scalar loop does the last `n % 4`. The four lanes are independent work for the
/// thread, and a wide access moves more bytes per instruction than four narrow ones.
fn vectorized(p: &Program, vector: &'static str, math: MathMode) -> KernelSource {
    let helpers = lane_function(p, math);
    let (mut setup, mut load, mut store) = (String::new(), String::new(), String::new());
    let arg = |k: usize, lane: &str| match p.inputs[k].1 {
        Access::Scalar => format!("s{k}"),
        _ if lane.is_empty() => format!("in{k}[i]"),
        _ => format!("v{k}.{lane}"),
    };
    for (k, (d, a)) in p.inputs.iter().enumerate() {
        match a {
            Access::Scalar => writeln!(setup, "    const {} s{k} = in{k}[0];", c_type(*d)),
            _ => writeln!(load, "        const {vector} v{k} = reinterpret_cast<const {vector}*>(in{k})[v];"),
        }
        .expect("write");
    }
    for j in 0..p.outputs.len() {
        writeln!(load, "        {vector} w{j};").expect("write");
        writeln!(store, "        reinterpret_cast<{vector}*>(out{j})[v] = w{j};").expect("write");
    }
    let call = |lane: &str| {
        let mut args: Vec<String> = (0..p.inputs.len()).map(|k| arg(k, lane)).collect();
        args.extend((0..p.outputs.len()).map(|j| if lane.is_empty() { format!("out{j}[i]") } else { format!("w{j}.{lane}") }));
        format!("tc_lane({});", args.join(", "))
    };
    let lanes: String = ["x", "y", "z", "w"].iter().map(|l| format!("        {}\n", call(l))).collect();
    let kernel = format!(
        "(\n    {params}) {{\n{setup}    const long long nv = n >> 2;\n    for (long long v = {FIRST}; v < nv; v += {STRIDE}) {{\n{load}{lanes}{store}    }}\n    for (long long i = (nv << 2) + {FIRST}; i < n; i += {STRIDE}) {{\n        {tail}\n    }}\n}}\n",
        params = parameters(p).join(",\n    "),
        tail = call(""),
    );
    KernelSource::with_helpers("tc_ew", &helpers, &kernel, 4)
}

/// `out[i] = (label of row i / classes) == (column i % classes)`, as `dtype` (`ix.dims[0]` is
/// the number of classes).
pub(crate) fn one_hot(label: DType, dtype: DType) -> KernelSource {
    let (l, t) = (c_type(label), c_type(dtype));
    let kernel = format!(
        "(const long long n, const TcIndex ix, const {l}* __restrict__ in0, {t}* __restrict__ out0) {{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {{
        const long long row = i / ix.dims[0], col = i % ix.dims[0];
        out0[i] = tc_cast<{t}>((tc_bool)((long long)in0[row] == col));
    }}
}}
"
    );
    KernelSource::new("tc_one_hot", &kernel)
}

/// The combining function, identity and final step of a reduction over `dtype`.
fn reduce_parts(op: ReduceOp, dtype: DType) -> (&'static str, String) {
    let extreme = |low: bool| match (dtype, low) {
        (DType::F32, true) => "__int_as_float(0xff800000)".to_string(),
        (DType::F32, false) => "__int_as_float(0x7f800000)".to_string(),
        (DType::F64, true) => "__longlong_as_double(0xfff0000000000000LL)".to_string(),
        (DType::F64, false) => "__longlong_as_double(0x7ff0000000000000LL)".to_string(),
        (DType::I32, true) => "((int)0x80000000)".to_string(),
        (DType::I32, false) => "((int)0x7fffffff)".to_string(),
        (_, true) => "((long long)0x8000000000000000ULL)".to_string(),
        (_, false) => "((long long)0x7fffffffffffffffULL)".to_string(),
    };
    match op {
        ReduceOp::Sum | ReduceOp::Mean => ("tc_add", format!("(({})0)", c_type(dtype))),
        ReduceOp::Max => ("tc_maximum", extreme(true)),
        ReduceOp::Min => ("tc_minimum", extreme(false)),
        ReduceOp::Prod => ("tc_mul", format!("(({})1)", c_type(dtype))),
    }
}

/// [`reduction`] (or [`reduction_serial`]), generated once per kind, dtype and ranks.
pub(crate) fn reduction_cached(op: ReduceOp, dtype: DType, kept_rank: usize, reduced_rank: usize, serial: bool) -> std::sync::Arc<KernelSource> {
    type Map = std::collections::HashMap<(ReduceOp, DType, usize, usize, bool), std::sync::Arc<KernelSource>>;
    static CACHE: std::sync::Mutex<Option<Map>> = std::sync::Mutex::new(None);
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(Map::new);
    let make = || match serial {
        true => reduction_serial(op, dtype, kept_rank, reduced_rank),
        false => reduction(op, dtype, kept_rank, reduced_rank),
    };
    cache.entry((op, dtype, kept_rank, reduced_rank, serial)).or_insert_with(|| std::sync::Arc::new(make())).clone()
}

/// Threads per block of a reduction kernel (a power of two: the tree below halves it).
pub(crate) const REDUCE_THREADS: u32 = 256;

/// Outputs that reduce at most this many elements each take one thread, not one block: a
/// block would leave most of its threads idle and pay its tree for nothing (a positional
/// embedding's gradient sums 4 elements into each of 32,768 outputs: 73 µs with a block
/// each on an H200).
pub(crate) const SERIAL_REDUCE_MAX: usize = 32;

/// The walk from output `o` and reduced element `r` to the input's offsets: kept dims are
/// `dims[0..kept_rank]` with `strides[0]`, reduced dims follow with `strides[1]`.
fn reduction_offsets(kept_rank: usize, reduced_rank: usize) -> (String, String) {
    let offset = |rank: usize, dims: &str, strides: &str, var: &str| -> String {
        let mut s = format!("        long long {var}_off = 0, {var}_rem = {var};\n");
        for d in (0..rank).rev() {
            writeln!(s, "        {var}_off += ({var}_rem % ix.dims[{dims}{d}]) * ix.strides[{strides}][{d}]; {var}_rem /= ix.dims[{dims}{d}];")
                .expect("write");
        }
        s
    };
    (offset(kept_rank, "", "0", "o"), offset(reduced_rank, &format!("{kept_rank} + "), "1", "r").replace("        ", "            "))
}

/// The CUDA C kernel of a reduction: one block per output element; each thread combines a
/// strided share of the reduced elements, then the block combines its threads' values in a
/// fixed tree. The order is fixed by the shape, so results repeat bit for bit; it is not the
/// CPU's order (within 1e-5 relative for sums, docs/GPU.md).
pub(crate) fn reduction(op: ReduceOp, dtype: DType, kept_rank: usize, reduced_rank: usize) -> KernelSource {
    let t = c_type(dtype);
    let (combine, identity) = reduce_parts(op, dtype);
    let finish = match op {
        ReduceOp::Mean => format!("tc_div(sh[0], ({t})n_red)"),
        _ => "sh[0]".to_string(),
    };
    let (kept, red) = reduction_offsets(kept_rank, reduced_rank);
    let kernel = format!(
        "(const long long n_out, const long long n_red, const TcIndex ix, const {t}* __restrict__ in0, {t}* __restrict__ out0) {{
    __shared__ {t} sh[{threads}];
    for (long long o = blockIdx.x; o < n_out; o += gridDim.x) {{
{kept}        {t} acc = {identity};
        for (long long r = threadIdx.x; r < n_red; r += blockDim.x) {{
{red}            acc = {combine}(acc, in0[o_off + r_off]);
        }}
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int s = {half}; s > 0; s >>= 1) {{
            if (threadIdx.x < s) sh[threadIdx.x] = {combine}(sh[threadIdx.x], sh[threadIdx.x + s]);
            __syncthreads();
        }}
        if (threadIdx.x == 0) out0[o] = {finish};
        __syncthreads();
    }}
}}
",
        threads = REDUCE_THREADS,
        half = REDUCE_THREADS / 2,
    );
    KernelSource::new("tc_reduce", &kernel)
}

/// The CUDA C kernel of a reduction whose outputs each reduce few elements (at most
/// [`SERIAL_REDUCE_MAX`]): one thread per output, combining its elements in order.
pub(crate) fn reduction_serial(op: ReduceOp, dtype: DType, kept_rank: usize, reduced_rank: usize) -> KernelSource {
    let t = c_type(dtype);
    let (combine, identity) = reduce_parts(op, dtype);
    let finish = match op {
        ReduceOp::Mean => format!("tc_div(acc, ({t})n_red)"),
        _ => "acc".to_string(),
    };
    let (kept, red) = reduction_offsets(kept_rank, reduced_rank);
    let kernel = format!(
        "(const long long n_out, const long long n_red, const TcIndex ix, const {t}* __restrict__ in0, {t}* __restrict__ out0) {{
    for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < n_out; o += (long long)gridDim.x * blockDim.x) {{
{kept}        {t} acc = {identity};
        for (long long r = 0; r < n_red; r++) {{
{red}            acc = {combine}(acc, in0[o_off + r_off]);
        }}
        out0[o] = {finish};
    }}
}}
"
    );
    KernelSource::new("tc_reduce_serial", &kernel)
}

mod batched;
mod movement;
mod rows;
#[cfg(test)]
pub(crate) use batched::elementwise_batched;
#[cfg_attr(not(feature = "cuda"), allow(unused_imports))]
pub(crate) use batched::{batch_capacity, elementwise_batched_in, SegmentTable, TABLE_WORDS};
#[cfg_attr(not(feature = "cuda"), allow(unused_imports))]
pub(crate) use movement::{copy, index_add, index_select};
#[cfg_attr(not(feature = "cuda"), allow(unused_imports))]
pub(crate) use rows::softmax;

#[cfg(test)]
mod fast_math_tests;
#[cfg(test)]
mod tests;
