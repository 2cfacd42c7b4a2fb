//! Ops that move data on the GPU: permutes and broadcasts (one gather kernel), narrow, pad and
//! concat (region copies), and the row selections of `index_select`, its adjoint `index_add`
//! and `one_hot`.

use super::{broadcast_strides, fixed, index_of, launch, strides, Fixed};
use crate::cuda::source::{self, Access, KernelSource, Program, TcIndex};
use crate::cuda::{self as backend, DeviceStorage, Region};
use crate::dtype::DType;
use crate::error::Result;
use crate::math::{ElementwiseOp, Instr, Operand};
use crate::shape::Shape;
use smallvec::SmallVec;
use std::sync::Arc;

/// A copy of `input` read with `strides` (a permutation or a broadcast), in row-major order.
pub(super) fn gather(input: &DeviceStorage, strides: &[i64], shape: &Shape) -> Result<DeviceStorage> {
    let access = [(input.dtype, Access::Strided(0))];
    let instr = Instr { op: ElementwiseOp::Cast(input.dtype), args: [Operand::Input(0)].into_iter().collect(), dtype: input.dtype };
    let program = Program { rank: shape.rank(), inputs: &access, instrs: std::slice::from_ref(&instr), outputs: &[0] };
    launch(&source::elementwise_cached(&program), &index_of(shape, &[strides.iter().copied().collect()]), &[input], input.dtype, shape)
}

pub(super) fn permute(input: &DeviceStorage, axes: &[usize], shape: &Shape) -> Result<DeviceStorage> {
    let own = strides(&input.shape);
    let s: SmallVec<[i64; 8]> = axes.iter().map(|&a| own[a]).collect();
    gather(input, &s, shape)
}

pub(super) fn broadcast(input: &DeviceStorage, shape: &Shape) -> Result<DeviceStorage> {
    gather(input, &broadcast_strides(&input.shape, shape), shape)
}

/// One region to copy: `input`'s elements over the coordinates of `walk`, read with
/// `read` strides from element `from`, written with `write` strides from element `to`.
struct Piece<'a> {
    input: &'a DeviceStorage,
    walk: &'a Shape,
    read: &'a [i64],
    write: &'a [i64],
    from: i64,
    to: i64,
}

/// A new `shape` buffer of `input`'s dtype (zeros where no piece writes, when `zero`) with
/// each piece copied in.
fn assemble(dtype: DType, shape: &Shape, zero: bool, pieces: &[Piece]) -> Result<DeviceStorage> {
    let kernels: Vec<Arc<KernelSource>> = pieces.iter().map(|p| fixed(Fixed::Copy(dtype, p.walk.rank()))).collect();
    let regions: Vec<Region> = pieces
        .iter()
        .zip(&kernels)
        .map(|(p, k)| {
            let mut index = TcIndex::default();
            for d in 0..p.walk.rank() {
                index.dims[d] = p.walk[d] as i64;
                index.strides[0][d] = p.read[d];
                index.strides[1][d] = p.write[d];
            }
            Region { kernel: k, index, input: p.input, from: p.from, to: p.to, n: p.walk.numel() }
        })
        .collect();
    let device = pieces.first().map_or(crate::device::Device::Cuda(0), |p| p.input.device);
    backend::copy_regions(device, dtype, shape, zero, &regions)
}

/// Entries `start..start + shape[axis]` of `input` along `axis`.
pub(super) fn narrow(input: &DeviceStorage, axis: usize, start: usize, shape: &Shape) -> Result<DeviceStorage> {
    let (own, out) = (strides(&input.shape), strides(shape));
    let piece = Piece { input, walk: shape, read: &own, write: &out, from: start as i64 * own[axis], to: 0 };
    assemble(input.dtype, shape, false, &[piece])
}

/// `input` with `before` zeros in front of it along `axis` (and zeros after, to `shape`).
pub(super) fn pad(input: &DeviceStorage, axis: usize, before: usize, shape: &Shape) -> Result<DeviceStorage> {
    let (own, out) = (strides(&input.shape), strides(shape));
    let piece = Piece { input, walk: &input.shape, read: &own, write: &out, from: 0, to: before as i64 * out[axis] };
    assemble(input.dtype, shape, true, &[piece])
}

/// The inputs one after the other along `axis`.
pub(super) fn concat(inputs: &[&DeviceStorage], axis: usize, shape: &Shape) -> Result<DeviceStorage> {
    let out = strides(shape);
    let owns: Vec<SmallVec<[i64; 8]>> = inputs.iter().map(|i| strides(&i.shape)).collect();
    let mut at = 0;
    let mut pieces = Vec::with_capacity(inputs.len());
    for (input, own) in inputs.iter().zip(&owns) {
        pieces.push(Piece { input, walk: &input.shape, read: own, write: &out, from: 0, to: at as i64 * out[axis] });
        at += input.shape[axis];
    }
    assemble(inputs[0].dtype, shape, false, &pieces)
}

/// `[len along the index, elements after the axis, size along the axis]`: the dims every
/// row-selection kernel takes.
fn row_index(len: usize, inner: &Shape, axis: usize, size: usize) -> TcIndex {
    let mut ix = TcIndex::default();
    ix.dims[0] = len as i64;
    ix.dims[1] = inner.dims()[axis + 1..].iter().product::<usize>() as i64;
    ix.dims[2] = size as i64;
    ix
}

/// The entries of `input` along `axis` at `index` (1-d, i64 or i32).
pub(super) fn index_select(input: &DeviceStorage, index: &DeviceStorage, axis: usize, shape: &Shape) -> Result<DeviceStorage> {
    let src = fixed(Fixed::IndexSelect(input.dtype, index.dtype));
    let ix = row_index(index.shape.numel(), &input.shape, axis, input.shape[axis]);
    launch(&src, &ix, &[input, index], input.dtype, shape)
}

/// Zeros of `shape` with each entry `g[.., j, ..]` added at `index[j]` along `axis`.
pub(super) fn index_add(g: &DeviceStorage, index: &DeviceStorage, axis: usize, shape: &Shape) -> Result<DeviceStorage> {
    let src = fixed(Fixed::IndexAdd(g.dtype, index.dtype));
    let ix = row_index(index.shape.numel(), &g.shape, axis, shape[axis]);
    launch(&src, &ix, &[g, index], g.dtype, shape)
}

/// `[n] -> [n, classes]`: 1 where the column is the row's label (an out-of-range label gives
/// a row of zeros here; the CPU op refuses it).
pub(super) fn one_hot(labels: &DeviceStorage, classes: usize, dtype: DType) -> Result<DeviceStorage> {
    let shape = Shape::from(vec![labels.shape.numel(), classes]);
    let src = fixed(Fixed::OneHot(labels.dtype, dtype));
    let mut ix = TcIndex::default();
    ix.dims[0] = classes as i64;
    launch(&src, &ix, &[labels], dtype, &shape)
}
