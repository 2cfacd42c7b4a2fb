//! Data-parallel gradient averaging in buckets, overlapped with backward (PyTorch's
//! DistributedDataParallel, eagerly).
//!
//! The parameters are grouped into buckets of about `bucket_bytes`, in reverse order (the
//! order backward produces their gradients). A hook on gradient accumulation counts each
//! bucket's gradients; when a bucket's last one arrives, the bucket's gradients are packed and
//! its all-gather is handed to the communication thread, and backward goes on with the
//! layers below while the bytes move. [`DataParallel::finish`] then waits for the buckets,
//! sums each in rank order, divides by the number of ranks (the same bits as
//! `all_reduce(Mean)` of each gradient) and writes the means into `.grad`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::collective::{reduce_ranks, to_bytes};
use crate::ops::seams::{set_grad_hook, GradHook};
use crate::ops::{transport, Pending};
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Averages the gradients of a model's parameters across the ranks, bucket by bucket, as
/// backward produces them. Only one may be active at a time (it owns the gradient hook).
///
/// ```
/// use tensor_core::distributed::{self, DataParallel};
/// use tensor_core::prelude::*;
/// let _world = distributed::init_single();
/// let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
/// let ddp = DataParallel::new(vec![w.clone()], 1 << 20)?; // broadcasts w from rank 0
/// w.mul(&w)?.sum()?.backward()?; // the bucket's all-reduce starts inside backward
/// let stats = ddp.finish()?; // waits, and writes the mean gradients
/// assert_eq!(w.grad().unwrap().to_vec::<f32>()?, vec![2.0, 4.0]);
/// assert_eq!((stats.buckets, stats.started_in_backward), (1, 1));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct DataParallel {
    state: Arc<Mutex<Buckets>>,
    previous: Option<GradHook>,
}

/// What one step's gradient averaging cost.
#[derive(Clone, Copy, Debug, Default)]
pub struct StepStats {
    /// Buckets all-reduced.
    pub buckets: usize,
    /// Of those, the ones started by the hook during backward (the rest started in `finish`).
    pub started_in_backward: usize,
    /// Time the transport spent moving the buckets (summed over buckets).
    pub communication: Duration,
    /// Time `finish` was blocked waiting for them: the communication not hidden behind
    /// backward.
    pub waited: Duration,
    /// All of `finish`: the wait, summing the ranks' buckets and writing the means.
    pub finish: Duration,
}

impl StepStats {
    /// The share of the communication time hidden behind backward: `1 - waited / communication`
    /// (0 when nothing was sent).
    pub fn overlap(&self) -> f64 {
        match self.communication.is_zero() {
            true => 0.0,
            false => (1.0 - self.waited.as_secs_f64() / self.communication.as_secs_f64()).clamp(0.0, 1.0),
        }
    }
}

struct Buckets {
    params: Vec<Tensor>,
    index: HashMap<u64, usize>,
    bucket_of: Vec<usize>,
    members: Vec<Vec<usize>>,
    seen: Vec<bool>,
    remaining: Vec<usize>,
    pending: Vec<Option<Pending>>,
    started_in_backward: usize,
    late: Option<usize>,
    dtype: DType,
}

impl DataParallel {
    /// Sets every parameter to rank 0's value (so all ranks start equal) and starts listening
    /// for their gradients. All parameters must be float tensors of one dtype.
    pub fn new(params: Vec<Tensor>, bucket_bytes: usize) -> Result<DataParallel> {
        let dtype = params.first().map(|p| p.dtype()).unwrap_or(DType::F32);
        if let Some(p) = params.iter().find(|p| p.dtype() != dtype || !dtype.is_float()) {
            return Err(Error::invalid("DataParallel::new", "params", format!("all must be f32 or all f64, found {} and {}", dtype, p.dtype())));
        }
        super::broadcast_parameters(&params, 0)?;
        let (bucket_of, members) = plan_buckets(&params, bucket_bytes.max(1));
        let n = members.len();
        let state = Buckets {
            index: params.iter().enumerate().map(|(i, p)| (p.id(), i)).collect(),
            seen: vec![false; params.len()],
            remaining: members.iter().map(|m| m.len()).collect(),
            pending: (0..n).map(|_| None).collect(),
            params,
            bucket_of,
            members,
            started_in_backward: 0,
            late: None,
            dtype,
        };
        let state = Arc::new(Mutex::new(state));
        let listener = state.clone();
        let hook: GradHook = Arc::new(move |t: &Tensor| {
            if let Ok(mut s) = listener.try_lock() {
                s.on_gradient(t);
            }
        });
        let previous = set_grad_hook(Some(hook));
        Ok(DataParallel { state, previous })
    }

    /// How the parameters are bucketed: for each bucket, the parameters' indices.
    pub fn buckets(&self) -> Vec<Vec<usize>> {
        self.lock().members.clone()
    }

    /// Waits for every bucket's all-reduce (starting those backward did not complete), and
    /// replaces each parameter's `.grad` by its mean over the ranks. Call it after
    /// `backward`, before the optimizer step, on every rank.
    pub fn finish(&self) -> Result<StepStats> {
        let start = Instant::now();
        let mut s = self.lock();
        if let Some(p) = s.late.take() {
            s.reset();
            return Err(Error::Distributed {
                op: "DataParallel::finish",
                reason: format!("parameter {p} got a second gradient after its bucket was sent: call finish after each backward"),
            });
        }
        let mut stats = StepStats { buckets: s.members.len(), started_in_backward: s.started_in_backward, ..StepStats::default() };
        for b in 0..s.members.len() {
            if s.pending[b].is_none() {
                s.launch(b);
            }
        }
        let world = transport("DataParallel::finish")?.size();
        let mut means = Vec::new();
        for b in 0..s.members.len() {
            let waiting = Instant::now();
            let (bytes, took) = s.pending[b].take().expect("launched above").wait()?;
            stats.waited += waiting.elapsed();
            stats.communication += took;
            means.push(match s.dtype {
                DType::F32 => Means::F32(reduce_ranks::<f32, 4>(&bytes, world, true, f32::from_ne_bytes)),
                _ => Means::F64(reduce_ranks::<f64, 8>(&bytes, world, true, f64::from_ne_bytes)),
            });
        }
        let writes: Result<()> = crate::autograd::no_grad(|| {
            for (b, mean) in means.into_iter().enumerate() {
                let mut offset = 0;
                for &i in &s.members[b] {
                    let p = &s.params[i];
                    let n = p.raw_shape().numel();
                    let value = mean.tensor(offset, n, &p.raw_dims())?;
                    offset += n;
                    match p.grad() {
                        Some(g) => g.assign_(&value)?,
                        None => crate::ops::dispatch::accumulate_into(p, &value)?,
                    }
                }
            }
            Ok(())
        });
        s.reset();
        writes?;
        stats.finish = start.elapsed();
        Ok(stats)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for DataParallel {
    fn drop(&mut self) {
        set_grad_hook(self.previous.take());
    }
}

/// A bucket's mean gradients, flat.
enum Means {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Means {
    fn tensor(&self, offset: usize, n: usize, dims: &[usize]) -> Result<Tensor> {
        match self {
            Means::F32(v) => Tensor::from_vec(v[offset..offset + n].to_vec(), dims),
            Means::F64(v) => Tensor::from_vec(v[offset..offset + n].to_vec(), dims),
        }
    }
}

impl Buckets {
    /// A parameter's gradient arrived: its bucket starts when it was the last one.
    fn on_gradient(&mut self, t: &Tensor) {
        let Some(&i) = self.index.get(&t.id()) else { return };
        let b = self.bucket_of[i];
        if self.seen[i] {
            if self.pending[b].is_some() {
                self.late = Some(i);
            }
            return;
        }
        self.seen[i] = true;
        self.remaining[b] -= 1;
        if self.remaining[b] == 0 {
            self.launch(b);
            self.started_in_backward += 1;
        }
    }

    /// Packs bucket `b`'s gradients (zeros for a parameter without one) and starts its
    /// all-gather.
    fn launch(&mut self, b: usize) {
        let mut bytes = Vec::new();
        for &i in &self.members[b] {
            let p = &self.params[i];
            match p.grad().map(|g| g.to_storage()) {
                Some(Ok(s)) => bytes.extend(to_bytes(&s)),
                Some(Err(e)) => {
                    self.pending[b] = Some(Pending::failed(e));
                    return;
                }
                None => bytes.extend(std::iter::repeat_n(0u8, p.raw_shape().numel() * self.dtype.size_of())),
            }
        }
        self.pending[b] = Some(match transport("DataParallel") {
            Ok(t) => t.start_all_gather(bytes),
            Err(e) => Pending::failed(e),
        });
    }

    /// Ready for the next step.
    fn reset(&mut self) {
        self.seen.iter_mut().for_each(|s| *s = false);
        self.remaining = self.members.iter().map(|m| m.len()).collect();
        self.pending.iter_mut().for_each(|p| *p = None);
        self.started_in_backward = 0;
        self.late = None;
    }
}

/// Buckets of about `bucket_bytes`, filled from the last parameter back (the order backward
/// produces gradients in): each parameter's bucket, and each bucket's parameters.
fn plan_buckets(params: &[Tensor], bucket_bytes: usize) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut members: Vec<Vec<usize>> = Vec::new();
    let mut bucket_of = vec![0; params.len()];
    let mut filled = usize::MAX;
    for i in (0..params.len()).rev() {
        let bytes = params[i].raw_shape().numel() * params[i].dtype().size_of();
        if filled >= bucket_bytes {
            members.push(Vec::new());
            filled = 0;
        }
        members.last_mut().expect("pushed").push(i);
        bucket_of[i] = members.len() - 1;
        filled += bytes;
    }
    (bucket_of, members)
}
