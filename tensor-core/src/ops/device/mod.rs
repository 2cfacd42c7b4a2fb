//! Ops on GPU tensors (feature `cuda`): each op mapped onto the CUDA backend. The shape and
//! dtype rule is the op's own (`Op::infer`), so a GPU op accepts and refuses exactly what the
//! CPU op does; elementwise ops are one-instruction programs of the generator that also
//! builds fused kernels, reductions have their own kernel, products go to cuBLAS, and layout
//! ops are free (a reshape), one gather kernel or region copies (`movement`), and softmax
//! and cross-entropy are composed of the others (`composed`). An op without a GPU path yet is an `Err`
//! that names it and says `.to_cpu()`.

mod composed;
mod movement;

use super::dispatch::types_of;
use super::{IndexOp, LayoutOp, LinalgOp, NnOp, Op, ReductionOp};
use crate::cuda::source::{self, Access, KernelSource, Program, TcIndex, MAX_RANK, MAX_STRIDED};
use crate::cuda::{self as backend, DeviceStorage, GemmShape};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::math::{ElementwiseOp, Instr, Operand, ReduceOp};
use crate::shape::Shape;
use crate::tensor::{Tensor, Value};
use smallvec::SmallVec;

/// Where an op on `inputs` runs: `None` for the CPU, else the GPU all of them are on. A 0-d
/// CPU tensor goes along with GPU operands (PyTorch's rule for scalars); any other mix is an
/// `Err` naming both devices.
pub(crate) fn placement(op: &'static str, inputs: &[&Tensor]) -> Result<Option<Device>> {
    let mut gpu: Option<(usize, Device)> = None;
    let mut cpu: Option<usize> = None;
    for (i, t) in inputs.iter().enumerate() {
        match t.device() {
            Device::Cpu if t.0.shape.rank() == 0 => {}
            Device::Cpu => cpu = cpu.or(Some(i)),
            d => match gpu {
                Some((j, e)) if e != d => return Err(Error::DeviceMismatch { op, first: e, first_index: j, second: d, second_index: i }),
                None => gpu = Some((i, d)),
                _ => {}
            },
        }
    }
    match (gpu, cpu) {
        (Some((j, d)), Some(i)) => Err(Error::DeviceMismatch { op, first: d, first_index: j, second: Device::Cpu, second_index: i }),
        (gpu, _) => Ok(gpu.map(|(_, d)| d)),
    }
}

/// Runs `op` on `device`: its dtype, shape and the result's device data.
pub(crate) fn run(op: &Op, inputs: &[&Tensor], device: Device) -> Result<(DType, Shape, Value)> {
    let (dtype, shape) = op.infer(&types_of(inputs))?;
    let data = inputs.iter().map(|t| device_data(t, op.name(), device)).collect::<Result<SmallVec<[DeviceStorage; 3]>>>()?;
    let refs: SmallVec<[&DeviceStorage; 3]> = data.iter().collect();
    let out = compute(op, &refs, dtype, &shape)?;
    Ok((dtype, shape, Value::Device(out)))
}

/// `t`'s data on `device` (a CPU tensor is copied there).
pub(crate) fn device_data(t: &Tensor, op: &'static str, device: Device) -> Result<DeviceStorage> {
    match &*t.read_value() {
        Value::Device(d) => Ok(d.clone()),
        Value::Concrete(s) => backend::upload(s, device),
        Value::Symbolic(sym) => Err(sym.value_error(op)),
    }
}

/// Runs `op` on device data, after its shape and dtype rule (a graph's step on the GPU).
pub(crate) fn compute_on(op: &Op, inputs: &[&DeviceStorage]) -> Result<DeviceStorage> {
    let types: SmallVec<[super::TypeRef; 3]> = inputs.iter().map(|d| super::TypeRef { dtype: d.dtype, shape: &d.shape }).collect();
    let (dtype, shape) = op.infer(&types)?;
    compute(op, inputs, dtype, &shape)
}

fn compute(op: &Op, inputs: &[&DeviceStorage], dtype: DType, shape: &Shape) -> Result<DeviceStorage> {
    if shape.rank() > MAX_RANK || inputs.iter().any(|i| i.shape.rank() > MAX_RANK) {
        return Err(no_kernel(op, "tensors of more than 8 dims"));
    }
    match op {
        Op::Elementwise(e) => elementwise(e, inputs, dtype, shape),
        Op::Reduction(ReductionOp::Reduce { op: r, axes, .. }) => reduce(*r, inputs[0], axes, shape),
        Op::Linalg(LinalgOp::Matmul { transpose_a, transpose_b }) => matmul(inputs, *transpose_a, *transpose_b, shape),
        Op::Layout(LayoutOp::Reshape(_)) => Ok(inputs[0].with_shape(shape.clone())),
        Op::Layout(LayoutOp::Permute(axes)) => movement::permute(inputs[0], axes, shape),
        Op::Layout(LayoutOp::BroadcastTo(_)) => movement::broadcast(inputs[0], shape),
        Op::Layout(LayoutOp::SumTo(_)) => sum_to(inputs[0], shape),
        Op::Layout(LayoutOp::Narrow { axis, start, .. }) => movement::narrow(inputs[0], *axis, *start, shape),
        Op::Layout(LayoutOp::Pad { axis, before, .. }) => movement::pad(inputs[0], *axis, *before, shape),
        Op::Layout(LayoutOp::Concat { axis }) => movement::concat(inputs, *axis, shape),
        Op::Nn(NnOp::Softmax { axis }) => composed::softmax(inputs[0], *axis, false),
        Op::Nn(NnOp::LogSoftmax { axis }) => composed::softmax(inputs[0], *axis, true),
        Op::Nn(NnOp::CrossEntropy) => composed::cross_entropy(inputs[0], inputs[1]),
        Op::Index(IndexOp::IndexSelect { axis }) => movement::index_select(inputs[0], inputs[1], *axis, shape),
        Op::Index(IndexOp::IndexAdd { axis, .. }) => movement::index_add(inputs[0], inputs[1], *axis, shape),
        Op::Index(IndexOp::OneHot { classes, dtype }) => movement::one_hot(inputs[0], *classes, *dtype),
        other => Err(no_kernel(other, "this op")),
    }
}

fn no_kernel(op: &Op, what: &str) -> Error {
    Error::Device { op: op.name(), reason: format!("{what} has no GPU kernel yet; run it on the CPU with .to_cpu()") }
}

/// Row-major strides of `shape`, in elements.
fn strides(shape: &Shape) -> SmallVec<[i64; 8]> {
    let mut s: SmallVec<[i64; 8]> = SmallVec::from_elem(1, shape.rank());
    for d in (0..shape.rank().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1] as i64;
    }
    s
}

/// The strides that read `input` broadcast to `out` (NumPy's rule: dims aligned at the end;
/// a dim of 1, or a missing one, repeats: stride 0).
fn broadcast_strides(input: &Shape, out: &Shape) -> SmallVec<[i64; 8]> {
    let own = strides(input);
    let skip = out.rank() - input.rank();
    (0..out.rank()).map(|d| if d < skip || input[d - skip] == 1 { 0 } else { own[d - skip] }).collect()
}

fn index_of(shape: &Shape, strided: &[SmallVec<[i64; 8]>]) -> TcIndex {
    let mut ix = TcIndex::default();
    for (d, &n) in shape.dims().iter().enumerate() {
        ix.dims[d] = n as i64;
    }
    for (k, s) in strided.iter().enumerate() {
        ix.strides[k][..s.len()].copy_from_slice(s);
    }
    ix
}

/// One elementwise op: a program of one instruction over the op's inputs.
fn elementwise(e: &ElementwiseOp, inputs: &[&DeviceStorage], dtype: DType, shape: &Shape) -> Result<DeviceStorage> {
    let mut strided: Vec<SmallVec<[i64; 8]>> = Vec::new();
    let access: SmallVec<[(DType, Access); 3]> = inputs.iter().map(|i| (i.dtype, access_of(&i.shape, shape, &mut strided))).collect();
    let instr = Instr { op: e.clone(), args: (0..inputs.len()).map(Operand::Input).collect(), dtype };
    let program = Program { rank: shape.rank(), inputs: &access, instrs: std::slice::from_ref(&instr), outputs: &[0] };
    launch(&source::elementwise_cached(&program), &index_of(shape, &strided), inputs, dtype, shape)
}

/// The kernels not generated from a program (region copies, row selections, softmax rows,
/// `one_hot`): each made once per kind and dtypes, so a launch after the first only looks it
/// up, as [`source::elementwise_cached`] does for programs.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Fixed {
    Copy(DType, usize),
    IndexSelect(DType, DType),
    IndexAdd(DType, DType),
    Softmax(DType, bool),
    OneHot(DType, DType),
}

fn fixed(k: Fixed) -> std::sync::Arc<KernelSource> {
    type Map = std::collections::HashMap<Fixed, std::sync::Arc<KernelSource>>;
    static CACHE: std::sync::Mutex<Option<Map>> = std::sync::Mutex::new(None);
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let made = || match k {
        Fixed::Copy(d, rank) => source::copy(d, rank),
        Fixed::IndexSelect(d, i) => source::index_select(d, i),
        Fixed::IndexAdd(d, i) => source::index_add(d, i),
        Fixed::Softmax(d, log) => source::softmax(d, log),
        Fixed::OneHot(label, d) => source::one_hot(label, d),
    };
    guard.get_or_insert_with(Map::new).entry(k).or_insert_with(|| std::sync::Arc::new(made())).clone()
}

fn launch(src: &KernelSource, ix: &TcIndex, inputs: &[&DeviceStorage], dtype: DType, shape: &Shape) -> Result<DeviceStorage> {
    let mut outs = backend::elementwise(src, ix, inputs, &[dtype], shape)?;
    Ok(outs.pop().expect("one output"))
}

/// Reduces `input` over `axes` into `shape` (the op's output shape, kept dims or not).
fn reduce(r: ReduceOp, input: &DeviceStorage, axes: &[usize], shape: &Shape) -> Result<DeviceStorage> {
    let own = strides(&input.shape);
    let kept: SmallVec<[usize; 8]> = (0..input.shape.rank()).filter(|d| !axes.contains(d)).collect();
    let mut ix = TcIndex::default();
    for (j, &d) in kept.iter().chain(axes).enumerate() {
        ix.dims[j] = input.shape[d] as i64;
    }
    for (j, &d) in kept.iter().enumerate() {
        ix.strides[0][j] = own[d];
    }
    for (j, &d) in axes.iter().enumerate() {
        ix.strides[1][j] = own[d];
    }
    let n_red: usize = axes.iter().map(|&d| input.shape[d]).product();
    let serial = n_red <= source::SERIAL_REDUCE_MAX;
    let src = source::reduction_cached(r, input.dtype, kept.len(), axes.len(), serial);
    backend::reduce(&src, &ix, input, shape.numel(), n_red, shape, serial)
}

/// Sums the dims `input` was broadcast along, back to `shape`.
fn sum_to(input: &DeviceStorage, shape: &Shape) -> Result<DeviceStorage> {
    let skip = input.shape.rank() - shape.rank();
    let axes: SmallVec<[usize; 8]> = (0..input.shape.rank()).filter(|&d| d < skip || (shape[d - skip] == 1 && input.shape[d] != 1)).collect();
    reduce(ReduceOp::Sum, input, &axes, shape)
}

fn matmul(inputs: &[&DeviceStorage], transpose_a: bool, transpose_b: bool, shape: &Shape) -> Result<DeviceStorage> {
    let (a, b) = (inputs[0], inputs[1]);
    let rank = shape.rank();
    let batch_shape = Shape::from(shape.dims()[..rank - 2].to_vec());
    let batch = batch_shape.numel();
    let (m, n) = (shape[rank - 2], shape[rank - 1]);
    let k = if transpose_a { a.shape[a.shape.rank() - 2] } else { a.shape[a.shape.rank() - 1] };
    if batch > 1 && batch_of(&b.shape) == 1 && !transpose_a && batch_of(&a.shape) == batch {
        // A batch of row-major matrices against one matrix is one product of all their rows
        // (`[batch · m, k] @ [k, n]`, a linear layer on a sequence): one GEMM large enough
        // to fill the GPU, not `batch` small ones.
        let gs = GemmShape { batch: 1, m: batch * m, n, k, transpose_a, transpose_b, stride_a: 0, stride_b: 0 };
        return backend::gemm(a, b, gs, shape);
    }
    let a = full_batch(a, &batch_shape)?;
    let b = full_batch(b, &batch_shape)?;
    let stride = |s: &DeviceStorage| if batch_of(&s.shape) == 1 { 0 } else { s.shape[s.shape.rank() - 2] * s.shape[s.shape.rank() - 1] };
    let gs = GemmShape { batch, m, n, k, transpose_a, transpose_b, stride_a: stride(&a), stride_b: stride(&b) };
    backend::gemm(&a, &b, gs, shape)
}

fn batch_of(s: &Shape) -> usize {
    s.dims()[..s.rank() - 2].iter().product()
}

/// An operand whose batch dims differ from the product's (and are not one matrix for all)
/// is broadcast to them first; the rest are read in place with a batch stride (or 0).
fn full_batch(x: &DeviceStorage, batch: &Shape) -> Result<DeviceStorage> {
    let n = batch_of(&x.shape);
    if n == 1 || n == batch.numel() {
        return Ok(x.clone());
    }
    let r = x.shape.rank();
    let mut dims = batch.dims().to_vec();
    dims.extend_from_slice(&x.shape.dims()[r - 2..]);
    let to = Shape::from(dims);
    movement::broadcast(x, &to)
}

// Keep MAX_STRIDED in reach of readers of `index_of`: a one-op program has at most three
// strided inputs (where), far below it.
const _: () = assert!(MAX_STRIDED >= 3);

/// Runs a fused elementwise program (a graph's `Fused` node) as one generated CUDA kernel on
/// the GPU its inputs live on: the seed of the GPU executable. Not part of the public API.
#[doc(hidden)]
pub fn run_fused(program: &crate::math::FusedProgram, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    let device = placement("fused", inputs)?.ok_or_else(|| Error::Device { op: "fused", reason: "no input is on a GPU".into() })?;
    let data = inputs.iter().map(|t| device_data(t, "fused", device)).collect::<Result<Vec<DeviceStorage>>>()?;
    let outs = fused_on(program, &data.iter().collect::<Vec<_>>())?;
    Ok(outs.into_iter().map(|d| Tensor::from_value(Value::Device(d.clone()), d.dtype, d.shape.clone())).collect())
}

/// A fused program as one generated kernel over device data: its outputs.
pub(crate) fn fused_on(program: &crate::math::FusedProgram, inputs: &[&DeviceStorage]) -> Result<Vec<DeviceStorage>> {
    // A program traced with a dim unknown runs on the inputs' broadcast shape (the shape rules
    // of its ops checked it when they were traced for the dims that were known).
    let broadcast = || inputs.iter().try_fold(Shape::scalar(), |s, i| crate::shape::broadcast_shapes(&s, &i.shape));
    let shape = &match program.shape.is_known() {
        true => program.shape.clone(),
        false => broadcast().ok_or_else(|| Error::Device { op: "fused", reason: "the inputs of a fused program do not broadcast".into() })?,
    };
    if shape.rank() > MAX_RANK {
        return Err(Error::Device { op: "fused", reason: "a fused program over more than 8 dims has no GPU kernel yet".into() });
    }
    let mut strided: Vec<SmallVec<[i64; 8]>> = Vec::new();
    let access: Vec<(DType, Access)> = inputs.iter().map(|d| (d.dtype, access_of(&d.shape, shape, &mut strided))).collect();
    if strided.len() > MAX_STRIDED {
        return Err(Error::Device { op: "fused", reason: format!("a fused program with {} broadcast inputs has no GPU kernel yet", strided.len()) });
    }
    let source = source::elementwise_cached(&Program { rank: shape.rank(), inputs: &access, instrs: &program.instrs, outputs: &program.outputs });
    let dtypes: Vec<DType> = program.outputs.iter().map(|&o| program.instrs[o].dtype).collect();
    backend::elementwise(&source, &index_of(shape, &strided), inputs, &dtypes, shape)
}

/// Independent runs of fused programs with one generated kernel (the same instructions,
/// input dtypes and access; sizes may differ) as batched launches
/// ([`elementwise_batched_in`](source::elementwise_batched_in)), as many runs a launch as its table
/// holds: each run's outputs, with the bits of [`fused_on`]. Runs that are not alike (a
/// strided input, an unknown or empty shape, another kernel than the first run's) run one
/// kernel each instead, so the caller's grouping is an optimization, never an assumption.
pub(crate) fn fused_batch_on(runs: &[(&crate::math::FusedProgram, SmallVec<[&DeviceStorage; 4]>)]) -> Result<Vec<Vec<DeviceStorage>>> {
    let one_by_one = || runs.iter().map(|(p, inputs)| fused_on(p, inputs)).collect::<Result<Vec<_>>>();
    let Some(((first, first_inputs), _)) = runs.split_first().filter(|(_, rest)| !rest.is_empty()) else {
        return one_by_one();
    };
    let accesses = |p: &crate::math::FusedProgram, inputs: &[&DeviceStorage]| -> Option<Vec<(DType, Access)>> {
        let mut strided = Vec::new();
        let ok = p.shape.is_known() && p.shape.numel() > 0 && inputs.iter().all(|d| d.shape.is_known());
        let access: Vec<(DType, Access)> = inputs.iter().map(|d| (d.dtype, access_of(&d.shape, &p.shape, &mut strided))).collect();
        (ok && strided.is_empty()).then_some(access)
    };
    let Some(access) = accesses(first, first_inputs) else {
        return one_by_one();
    };
    let alike = |(p, inputs): &(&crate::math::FusedProgram, SmallVec<[&DeviceStorage; 4]>)| {
        p.instrs == first.instrs && p.outputs == first.outputs && accesses(p, inputs).as_ref() == Some(&access)
    };
    if !runs.iter().all(alike) {
        return one_by_one();
    }
    let src = batched_source(first, &access);
    let dtypes: Vec<DType> = first.outputs.iter().map(|&o| first.instrs[o].dtype).collect();
    let mut outs = Vec::with_capacity(runs.len());
    for chunk in runs.chunks(source::batch_capacity(access.len() + dtypes.len())) {
        let segments: Vec<backend::Segment> = chunk.iter().map(|(p, inputs)| backend::Segment { inputs, shape: &p.shape }).collect();
        outs.extend(backend::elementwise_batched(&src, &segments, &dtypes)?);
    }
    Ok(outs)
}

/// The batched kernel of `p` in the [`math_mode`](crate::cuda::math_mode) of now, as each
/// run's own kernel ([`source::elementwise_cached`]) is.
fn batched_source(p: &crate::math::FusedProgram, access: &[(DType, Access)]) -> KernelSource {
    let program = Program { rank: 0, inputs: access, instrs: &p.instrs, outputs: &p.outputs };
    source::elementwise_batched_in(&program, crate::cuda::math_mode())
}

/// Compiles and loads on `device` the batched kernel that runs of `p` (with the shapes it
/// was traced with) launch, so that a capture recording them loads no module (which a stream
/// that captures does not allow). A program a batched kernel cannot run needs none.
pub(crate) fn prepare_batch(p: &crate::math::FusedProgram, device: Device) -> Result<()> {
    let mut strided = Vec::new();
    let access: Vec<(DType, Access)> = p.inputs.iter().map(|(d, s)| (*d, access_of(s, &p.shape, &mut strided))).collect();
    match strided.is_empty() && p.shape.is_known() {
        true => backend::load_kernel(device, &batched_source(p, &access)),
        false => Ok(()),
    }
}

/// How a kernel over `out` reads an input of `shape` (a strided one adds its strides).
fn access_of(shape: &Shape, out: &Shape, strided: &mut Vec<SmallVec<[i64; 8]>>) -> Access {
    if shape == out {
        Access::Contiguous
    } else if shape.numel() == 1 {
        Access::Scalar
    } else {
        strided.push(broadcast_strides(shape, out));
        Access::Strided(strided.len() - 1)
    }
}
