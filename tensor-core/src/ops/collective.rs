//! Collective ops: `all_reduce` (sum, mean), `broadcast` and `all_gather` across the processes
//! of a data-parallel job. They are ops like any other, so eagerly they run at once and in a
//! traced graph they are nodes the executor runs — a `#[graph_fn]` training step holds its own
//! gradient all-reduce — and they have gradients.
//!
//! The data moves through a [`Transport`] that a higher layer installs (the `distributed`
//! module, over MPI, through the transport seam of `seams.rs`); this layer only needs "every rank's bytes, in rank order" and "the root's
//! bytes". The reduction is done here, on every rank, in rank order 0, 1, …, n-1, so every
//! rank computes the very same float additions and ends with the same bits, whatever
//! algorithm the transport uses to move the bytes.

use super::dispatch::apply;
use super::seams::transport;
use super::{Family, InputGrads, Saves, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::math::op_names;
use crate::shape::Shape;
use crate::storage::{Array, Storage};
use crate::tensor::grad_node::BackwardCtx;
use crate::tensor::Tensor;
use ndarray::IxDyn;
use smallvec::smallvec;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// Moves bytes between the ranks of a job. Every rank calls each method in the same order
/// with buffers of the same length.
pub trait Transport: Send + Sync {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    /// The number of processes.
    fn size(&self) -> usize;
    /// Every rank's `bytes` (all of one length), concatenated in rank order.
    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<u8>>;
    /// Overwrites `bytes` with rank `root`'s.
    fn broadcast(&self, bytes: &mut [u8], root: usize) -> Result<()>;
    /// Starts `all_gather` and returns at once; the answer is waited for with
    /// [`Pending::wait`]. By default it runs at once, on this thread.
    fn start_all_gather(&self, bytes: Vec<u8>) -> Pending {
        let start = Instant::now();
        Pending::ready(self.all_gather(&bytes), start.elapsed())
    }
}

/// What a job hands back: the bytes, and how long the transport took to move them.
type Answer = (Result<Vec<u8>>, Duration);

/// A collective under way: its answer, when it comes.
pub struct Pending {
    op: &'static str,
    timeout: Duration,
    answer: std::result::Result<Answer, Receiver<Answer>>,
}

impl Pending {
    /// A collective that has already finished.
    pub fn ready(result: Result<Vec<u8>>, took: Duration) -> Pending {
        Pending { op: "collective", timeout: Duration::ZERO, answer: Ok((result, took)) }
    }

    /// A collective that could not start.
    pub fn failed(error: Error) -> Pending {
        Pending::ready(Err(error), Duration::ZERO)
    }

    /// The gathered bytes and the time the transport spent on them, waiting at most the
    /// timeout: a rank that stops answering gives an `Err`, not a hang.
    pub fn wait(self) -> Result<(Vec<u8>, Duration)> {
        let (result, took) = match self.answer {
            Ok(answer) => answer,
            Err(receiver) => match receiver.recv_timeout(self.timeout) {
                Ok(answer) => answer,
                Err(RecvTimeoutError::Timeout) => return Err(Error::Distributed { op: self.op, reason: timeout_reason(self.timeout) }),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::Distributed { op: self.op, reason: "the communication thread stopped (MPI failed or was finalized)".into() });
                }
            },
        };
        result.map(|bytes| (bytes, took))
    }
}

fn timeout_reason(timeout: Duration) -> String {
    format!(
        "no answer from the other ranks within {:.1} s: a rank has probably died, hangs, or called different collectives \
         (set TENSOR_CORE_MPI_TIMEOUT=<seconds> to wait longer)",
        timeout.as_secs_f64()
    )
}

/// The transport's end of a [`Pending`]: where the answer goes (made by the MPI transport).
pub struct Job(Sender<Answer>);

#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
impl Job {
    /// A job for `op` and the `Pending` that waits for it at most `timeout`.
    pub fn new(op: &'static str, timeout: Duration) -> (Job, Pending) {
        let (sender, receiver) = channel();
        (Job(sender), Pending { op, timeout, answer: Err(receiver) })
    }

    /// Hands the answer over (dropped if the waiter has given up).
    pub fn finish(self, result: Result<Vec<u8>>, took: Duration) {
        let _ = self.0.send((result, took));
    }
}

/// A collective op and its attributes. `world` is the number of ranks when the op was made.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CollectiveOp {
    /// Every rank gets the elementwise sum (or mean) of every rank's tensor.
    AllReduce {
        /// Divide the sum by `world`.
        mean: bool,
        /// Ranks in the job.
        world: usize,
    },
    /// Every rank gets rank `root`'s tensor.
    Broadcast {
        /// The rank whose tensor is sent.
        root: usize,
        /// Ranks in the job.
        world: usize,
    },
    /// Every rank gets every rank's tensor, concatenated along axis 0 in rank order.
    AllGather {
        /// Ranks in the job.
        world: usize,
    },
}

impl CollectiveOp {
    fn world(&self) -> usize {
        match self {
            CollectiveOp::AllReduce { world, .. } | CollectiveOp::Broadcast { world, .. } | CollectiveOp::AllGather { world } => *world,
        }
    }
}

/// Runs a collective on `x` through the dispatcher (eagerly or into the traced graph).
pub(crate) fn collective(op: CollectiveOp, x: &Tensor) -> Result<Tensor> {
    apply(op, &[x])
}

impl Family for CollectiveOp {
    op_names! { CollectiveOp {
        AllReduce { mean, world } => if *mean { "all_reduce_mean" } else { "all_reduce_sum" }, "AllReduceBackward", format!("world={world}");
        Broadcast { root, world } => "broadcast", "BroadcastBackward", format!("root={root} world={world}");
        AllGather { world } => "all_gather", "AllGatherBackward", format!("world={world}");
    }}

    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        let x = inputs[0];
        if self.world() == 0 {
            return Err(Error::invalid(self.name(), "world", "a job has at least one rank"));
        }
        match self {
            CollectiveOp::AllReduce { .. } => super::need_float(self.name(), x.dtype).map(|_| (x.dtype, x.shape.clone())),
            CollectiveOp::Broadcast { root, world } => match root < world {
                true => Ok((x.dtype, x.shape.clone())),
                false => Err(Error::invalid("broadcast", "root", format!("rank {root} is not in a job of {world}"))),
            },
            CollectiveOp::AllGather { world } => {
                if x.shape.rank() == 0 {
                    return Err(Error::invalid("all_gather", "input", "gathers along axis 0: give a tensor of rank 1 or more"));
                }
                let mut dims = x.shape.dims().to_vec();
                dims[0] = if dims[0] == crate::shape::UNKNOWN { dims[0] } else { dims[0] * world };
                Ok((x.dtype, Shape::new(&dims)))
            }
        }
    }

    fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        let t = transport(self.name())?;
        if t.size() != self.world() {
            return Err(Error::Distributed {
                op: self.name(),
                reason: format!("made for {} ranks but the job has {}: trace it again in this job", self.world(), t.size()),
            });
        }
        let x = inputs[0];
        match self {
            CollectiveOp::AllReduce { mean, world } => all_reduce(t.as_ref(), x, *mean, *world),
            CollectiveOp::Broadcast { root, .. } => {
                let mut bytes = to_bytes(x);
                t.broadcast(&mut bytes, *root)?;
                from_bytes(&bytes, x, x.shape().dims())
            }
            CollectiveOp::AllGather { world } => {
                let gathered = t.all_gather(&to_bytes(x))?;
                let mut dims = x.shape().dims().to_vec();
                dims[0] *= world;
                from_bytes(&gathered, x, &dims)
            }
        }
    }

    fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
        if !ctx.needs_grad(0) {
            return Ok(smallvec![None]);
        }
        let world = self.world();
        let grad = match self {
            // y_r = Σ_s x_s (or its mean): dL/dx_s = Σ_r g_r (or its mean).
            CollectiveOp::AllReduce { mean, .. } => collective(CollectiveOp::AllReduce { mean: *mean, world }, g)?,
            // y_r = x_root: the root's input gets Σ_r g_r, the others none.
            CollectiveOp::Broadcast { root, .. } => {
                let sum = collective(CollectiveOp::AllReduce { mean: false, world }, g)?;
                match transport("broadcast")?.rank() == *root {
                    true => sum,
                    // Kept alive by the product: the all-reduce must run on every rank.
                    false => sum.mul(0.0)?,
                }
            }
            // y = concat_r x_r: x_s's gradient is chunk s of Σ_r g_r.
            CollectiveOp::AllGather { .. } => {
                let sum = collective(CollectiveOp::AllReduce { mean: false, world }, g)?;
                let rows = ctx.input_shape(0)[0];
                sum.narrow(0, transport("all_gather")?.rank() * rows, rows)?
            }
        };
        Ok(smallvec![Some(grad)])
    }

    fn saves(&self) -> Saves {
        Saves::default()
    }

    fn is_differentiable(&self) -> bool {
        true
    }
}

/// Every rank's values summed in rank order (so every rank adds the same floats in the same
/// order and gets the same bits), divided by `world` for the mean.
fn all_reduce(t: &dyn Transport, x: &Storage, mean: bool, world: usize) -> Result<Storage> {
    let mine = to_bytes(x);
    let gathered = t.all_gather(&mine)?;
    if gathered.len() != mine.len() * world {
        return Err(Error::Distributed {
            op: "all_reduce",
            reason: format!(
                "received {} bytes from {world} ranks for a {:?} {}: the ranks passed tensors of different shapes",
                gathered.len(),
                x.dtype(),
                x.shape()
            ),
        });
    }
    let dims = x.shape().dims().to_vec();
    Ok(match x {
        Storage::F32(_) => Storage::F32(array(&dims, reduce_ranks::<f32, 4>(&gathered, world, mean, f32::from_ne_bytes))),
        Storage::F64(_) => Storage::F64(array(&dims, reduce_ranks::<f64, 8>(&gathered, world, mean, f64::from_ne_bytes))),
        _ => return Err(Error::UnsupportedDType { op: "all_reduce", dtype: x.dtype(), needs: "a float dtype (f32 or f64)" }),
    })
}

/// Sums the `world` equal chunks of `bytes` elementwise, chunk 0 first.
pub(crate) fn reduce_ranks<T, const N: usize>(bytes: &[u8], world: usize, mean: bool, read: fn([u8; N]) -> T) -> Vec<T>
where
    T: Copy + std::ops::Add<Output = T> + std::ops::Div<Output = T> + FromUsize,
{
    let n = bytes.len() / N / world;
    let value = |i: usize| read(bytes[i * N..(i + 1) * N].try_into().expect("N bytes"));
    let mut acc: Vec<T> = (0..n).map(value).collect();
    for r in 1..world {
        for (i, a) in acc.iter_mut().enumerate() {
            *a = *a + value(r * n + i);
        }
    }
    if mean {
        let w = T::from_usize(world);
        acc.iter_mut().for_each(|a| *a = *a / w);
    }
    acc
}

/// A rank count as a float.
pub(crate) trait FromUsize {
    /// `n` as this float.
    fn from_usize(n: usize) -> Self;
}
impl FromUsize for f32 {
    fn from_usize(n: usize) -> f32 {
        n as f32
    }
}
impl FromUsize for f64 {
    fn from_usize(n: usize) -> f64 {
        n as f64
    }
}

fn array<T>(dims: &[usize], data: Vec<T>) -> Array<T> {
    Array::from_shape_vec(IxDyn(dims), data).expect("the data fills the shape")
}

/// The values in logical (row-major) order as native-endian bytes.
pub(crate) fn to_bytes(x: &Storage) -> Vec<u8> {
    match x {
        Storage::F32(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Storage::F64(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Storage::I32(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Storage::I64(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Storage::Bool(a) => a.iter().map(|&v| v as u8).collect(),
    }
}

/// Values of `like`'s dtype read from `bytes`, shaped `dims`.
fn from_bytes(bytes: &[u8], like: &Storage, dims: &[usize]) -> Result<Storage> {
    if bytes.len() != dims.iter().product::<usize>() * like.dtype().size_of() {
        return Err(Error::Distributed {
            op: "collective",
            reason: format!("received {} bytes for a {:?} {dims:?}: the ranks called different collectives", bytes.len(), like.dtype()),
        });
    }
    fn read<T, const N: usize>(bytes: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
        bytes.chunks_exact(N).map(|c| f(c.try_into().expect("N bytes"))).collect()
    }
    Ok(match like {
        Storage::F32(_) => Storage::F32(array(dims, read(bytes, f32::from_ne_bytes))),
        Storage::F64(_) => Storage::F64(array(dims, read(bytes, f64::from_ne_bytes))),
        Storage::I32(_) => Storage::I32(array(dims, read(bytes, i32::from_ne_bytes))),
        Storage::I64(_) => Storage::I64(array(dims, read(bytes, i64::from_ne_bytes))),
        Storage::Bool(_) => Storage::Bool(array(dims, bytes.iter().map(|&b| b != 0).collect())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transport whose other rank sent `extra` more or fewer bytes than this one.
    struct Uneven(isize);

    impl Transport for Uneven {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            2
        }
        fn all_gather(&self, bytes: &[u8]) -> Result<Vec<u8>> {
            let mut all = bytes.to_vec();
            all.resize((2 * bytes.len() as isize + self.0) as usize, 0);
            Ok(all)
        }
        fn broadcast(&self, _: &mut [u8], _: usize) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn all_reduce_of_tensors_of_different_shapes_is_an_error() {
        let x = Storage::F32(Array::from_shape_vec(IxDyn(&[3]), vec![1.0f32, 2.0, 3.0]).expect("3 values"));
        for extra in [-4, 4, 8] {
            let e = all_reduce(&Uneven(extra), &x, true, 2).expect_err("the other rank sent another shape");
            assert!(e.to_string().contains("the ranks passed tensors of different shapes"), "{e}");
        }
        let same = all_reduce(&Uneven(0), &x, false, 2).expect("equal shapes");
        assert!(matches!(same, Storage::F32(a) if a.iter().copied().collect::<Vec<_>>() == [1.0, 2.0, 3.0]));
    }
}
