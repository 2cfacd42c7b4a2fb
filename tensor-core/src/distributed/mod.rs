//! Data-parallel training across processes, over MPI: each process (rank) takes a shard of
//! every batch, and the gradients are averaged across the ranks before the optimizer step.
//!
//! - Collectives as ops: [`all_reduce`] (sum, mean), [`broadcast`], [`all_gather`]. Eagerly
//!   they run at once; inside a `#[graph_fn]` they are graph nodes the executor runs, so a
//!   traced training step holds its own gradient all-reduce ([`average_gradients`]). They
//!   have gradients.
//! - Same bits on every rank: the reduction is done by every rank, in rank order
//!   (`((x₀ + x₁) + x₂) + …`, then `/ n` for the mean), on bytes the transport gathered, so
//!   every rank performs the same float operations.
//! - [`DataParallel`]: broadcasts the initial parameters from rank 0, then averages the
//!   gradients in buckets, each bucket's all-reduce started by a hook the moment its last
//!   gradient is accumulated, so communication overlaps the rest of backward; it measures
//!   the overlap.
//! - [`ShardSampler`]: which part of a data set or of a global batch is this rank's.
//! - Failures are `Err`s ([`Error::Distributed`](crate::Error::Distributed)): no
//!   communicator, a panic in the MPI bindings, or a rank that does not answer within the
//!   timeout (`TENSOR_CORE_MPI_TIMEOUT`, seconds; 300 by default).
//!
//! MPI itself is behind the crate feature `mpi` (the system's OpenMPI, via the `mpi` crate);
//! without it, [`init_single`] gives a one-rank world, which runs the same code paths.
//!
//! ```
//! use tensor_core::distributed::{self, Reduce};
//! use tensor_core::prelude::*;
//! let _world = distributed::init_single(); // under mpirun with the `mpi` feature: distributed::init()?
//! let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
//! assert_eq!(distributed::all_reduce(&x, Reduce::Mean)?.to_vec::<f32>()?, vec![1.0, 2.0]);
//! assert_eq!(distributed::all_gather(&x)?.dims(), vec![2 * distributed::size()]);
//! # Ok::<(), tensor_core::Error>(())
//! ```

mod data_parallel;
#[cfg(feature = "mpi")]
mod mpi_transport;
mod sampler;

pub use data_parallel::{DataParallel, StepStats};
pub use sampler::ShardSampler;

use crate::error::Result;
use crate::ops::collective::collective;
use crate::ops::{set_transport, transport, CollectiveOp, Transport};
use crate::tensor::Tensor;
use std::sync::Arc;
use std::time::Duration;

/// How [`all_reduce`] combines the ranks' tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The elementwise sum.
    Sum,
    /// The elementwise sum divided by the number of ranks.
    Mean,
}

/// The job this process belongs to, while it lives: dropping it removes the communicator
/// (and with MPI, finalizes MPI — keep it until the program ends).
#[must_use = "the world ends when this is dropped"]
pub struct World {
    #[cfg(feature = "mpi")]
    mpi: Option<Arc<mpi_transport::MpiTransport>>,
}

impl World {
    /// This process's rank.
    pub fn rank(&self) -> usize {
        rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        size()
    }

    /// How long a collective waits for the other ranks before it fails with an `Err` (a job
    /// of one never waits).
    pub fn set_timeout(&self, timeout: Duration) {
        #[cfg(feature = "mpi")]
        if let Some(mpi) = &self.mpi {
            mpi.set_timeout(timeout);
        }
        let _ = timeout;
    }
}

impl Drop for World {
    fn drop(&mut self) {
        set_transport(None);
        #[cfg(feature = "mpi")]
        if let Some(mpi) = self.mpi.take() {
            mpi.shutdown();
        }
    }
}

/// Joins the MPI job this process was started in (`mpirun -np N program`), with the timeout
/// from `TENSOR_CORE_MPI_TIMEOUT` (seconds, default 300). Started without mpirun, it is a
/// job of one.
#[cfg(feature = "mpi")]
pub fn init() -> Result<World> {
    let seconds = std::env::var("TENSOR_CORE_MPI_TIMEOUT").ok().and_then(|s| s.parse::<f64>().ok()).filter(|s| *s > 0.0).unwrap_or(300.0);
    init_with_timeout(Duration::from_secs_f64(seconds))
}

/// [`init`] with a timeout of its own: a collective that gets no answer from the other
/// ranks in this time fails with an `Err` naming it.
#[cfg(feature = "mpi")]
pub fn init_with_timeout(timeout: Duration) -> Result<World> {
    let mpi = Arc::new(mpi_transport::MpiTransport::start(timeout)?);
    set_transport(Some(mpi.clone()));
    Ok(World { mpi: Some(mpi) })
}

/// A world of one rank, in this process (no MPI needed): every collective is the identity
/// (`all_reduce` sums one tensor, `all_gather` gathers one).
///
/// ```
/// let world = tensor_core::distributed::init_single();
/// assert_eq!((world.rank(), world.size()), (0, 1));
/// ```
pub fn init_single() -> World {
    set_transport(Some(Arc::new(SingleProcess)));
    World {
        #[cfg(feature = "mpi")]
        mpi: None,
    }
}

/// The transport of a one-rank world.
struct SingleProcess;

impl Transport for SingleProcess {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn all_gather(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        Ok(bytes.to_vec())
    }
    fn broadcast(&self, _bytes: &mut [u8], _root: usize) -> Result<()> {
        Ok(())
    }
}

/// This process's rank (0 when there is no communicator).
///
/// ```
/// assert_eq!(tensor_core::distributed::rank(), 0);
/// ```
pub fn rank() -> usize {
    transport("rank").map(|t| t.rank()).unwrap_or(0)
}

/// The number of ranks (1 when there is no communicator).
///
/// ```
/// assert_eq!(tensor_core::distributed::size(), 1);
/// ```
pub fn size() -> usize {
    transport("size").map(|t| t.size()).unwrap_or(1)
}

/// Every rank's `x` summed (or averaged) elementwise; every rank gets the same bits. Float
/// tensors only. Its gradient is the all-reduce of the output gradient.
///
/// ```
/// use tensor_core::distributed::{self, Reduce};
/// use tensor_core::prelude::*;
/// let _world = distributed::init_single();
/// let x = Tensor::from_vec(vec![1.5f64, -2.0], &[2])?.requires_grad_(true)?;
/// let y = distributed::all_reduce(&x, Reduce::Sum)?;
/// y.sum()?.backward()?;
/// assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![1.0, 1.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn all_reduce(x: &Tensor, how: Reduce) -> Result<Tensor> {
    let world = transport("all_reduce")?.size();
    collective(CollectiveOp::AllReduce { mean: how == Reduce::Mean, world }, x)
}

/// Rank `root`'s `x`, on every rank. The root's gradient is the sum of every rank's output
/// gradient; the others get zeros.
///
/// ```
/// use tensor_core::prelude::*;
/// let _world = tensor_core::distributed::init_single();
/// let x = Tensor::from_vec(vec![7i64, 8], &[2])?;
/// assert_eq!(tensor_core::distributed::broadcast(&x, 0)?.to_vec::<i64>()?, vec![7, 8]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn broadcast(x: &Tensor, root: usize) -> Result<Tensor> {
    let world = transport("broadcast")?.size();
    collective(CollectiveOp::Broadcast { root, world }, x)
}

/// Every rank's `x` concatenated along axis 0, in rank order. A rank's gradient is its
/// rows of the summed output gradients.
///
/// ```
/// use tensor_core::prelude::*;
/// let _world = tensor_core::distributed::init_single();
/// let x = Tensor::ones(&[2, 3], DType::F32);
/// assert_eq!(tensor_core::distributed::all_gather(&x)?.dims(), vec![2, 3]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn all_gather(x: &Tensor) -> Result<Tensor> {
    let world = transport("all_gather")?.size();
    collective(CollectiveOp::AllGather { world }, x)
}

/// Replaces each parameter's `.grad` by its mean over the ranks: one `all_reduce` op per
/// parameter, so inside a `#[graph_fn]` training step they are nodes of the graph. Parameters
/// without a gradient are left alone (every rank must agree on which those are).
///
/// ```
/// use tensor_core::prelude::*;
/// let _world = tensor_core::distributed::init_single();
/// let w = Tensor::from_vec(vec![2.0f32], &[1])?.requires_grad_(true)?;
/// w.mul(3.0)?.sum()?.backward()?;
/// tensor_core::distributed::average_gradients(&[w.clone()])?;
/// assert_eq!(w.grad().unwrap().to_vec::<f32>()?, vec![3.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn average_gradients(params: &[Tensor]) -> Result<()> {
    for p in params {
        if let Some(g) = p.grad() {
            let mean = crate::autograd::no_grad(|| all_reduce(&g, Reduce::Mean))?;
            p.zero_grad()?;
            p.accumulate_grad(&mean)?;
        }
    }
    Ok(())
}

/// Sets every parameter to rank `root`'s value, in place (so all ranks start equal).
///
/// ```
/// use tensor_core::prelude::*;
/// let _world = tensor_core::distributed::init_single();
/// let w = Tensor::ones(&[2], DType::F32).requires_grad_(true)?;
/// tensor_core::distributed::broadcast_parameters(&[w.clone()], 0)?;
/// assert_eq!(w.to_vec::<f32>()?, vec![1.0, 1.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn broadcast_parameters(params: &[Tensor], root: usize) -> Result<()> {
    crate::autograd::no_grad(|| {
        params.iter().try_for_each(|p| {
            let value = broadcast(&p.detach(), root)?;
            p.assign_(&value)
        })
    })
}
