//! Datasets: random permutations ([`Tensor::randperm`]) and a [`DataLoader`] that cuts a
//! dataset of tensors into batches, shuffled anew each epoch (PyTorch's `DataLoader` over a
//! `TensorDataset`, with `batch_size`, `shuffle` and `drop_last`).
//!
//! ```
//! use tensor_core::prelude::*;
//! use tensor_core::data::DataLoader;
//! let x = Tensor::randn(&[10, 3], DType::F32, 0);
//! let y = Tensor::arange(0i64, 10);
//! let loader = DataLoader::new(&[&x, &y], 4)?.shuffle(7).drop_last(true);
//! for epoch in 0..2 {
//!     for batch in loader.epoch()? {
//!         let batch = batch?;
//!         let (xb, yb) = (&batch[0], &batch[1]);
//!         assert_eq!((xb.dims().to_vec(), yb.dims().to_vec()), (vec![4, 3], vec![4]));
//!     }
//! }
//! assert_eq!(loader.len(), 2); // 10 samples: two batches of 4, the last 2 dropped
//! # Ok::<(), tensor_core::Error>(())
//! ```

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::random::Generator;
use crate::tensor::{seeded_rng, Tensor};
use rand::seq::SliceRandom;

impl Tensor {
    /// A random permutation of `0..n` as an i64 tensor `[n]`, from a host generator seeded
    /// with `seed` (the same seed, the same permutation), as PyTorch's `randperm`. Like
    /// [`Tensor::rand`], it is drawn on the host: inside a trace it is a constant of the
    /// graph; [`Tensor::randperm_gen`] draws a new one at every call.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let p = Tensor::randperm(5, 3).to_vec::<i64>()?;
    /// assert_eq!(p, Tensor::randperm(5, 3).to_vec::<i64>()?);
    /// let mut sorted = p.clone();
    /// sorted.sort();
    /// assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn randperm(n: usize, seed: u64) -> Tensor {
        let mut p: Vec<i64> = (0..n as i64).collect();
        p.shuffle(&mut seeded_rng(seed));
        Tensor::from_vec(p, &[n]).expect("n values for shape [n]")
    }

    /// A random permutation of `0..n` (i64 `[n]`) drawn from `generator`, which advances: the
    /// next call gives another permutation, eagerly and in a graph alike, with the same
    /// values from the same state. It ranks `n` uniform draws (ties by position).
    ///
    /// Eagerly the ranks come from a sort; in a traced graph from comparing all pairs, which
    /// takes `n^2` memory: for a large `n` in a graph, pass a permutation in as an argument.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let g = Generator::new(1);
    /// let a = Tensor::randperm_gen(6, &g)?.to_vec::<i64>()?;
    /// let b = Tensor::randperm_gen(6, &g)?.to_vec::<i64>()?;
    /// assert_ne!(a, b); // the generator moved on
    /// assert_eq!(Tensor::randperm_gen(6, &Generator::new(1))?.to_vec::<i64>()?, a);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn randperm_gen(n: usize, generator: &Generator) -> Result<Tensor> {
        let keys = Tensor::rand_gen(&[n], DType::F64, generator)?;
        if keys.is_symbolic() {
            ranks_by_comparison(&keys)
        } else {
            ranks_by_sort(&keys)
        }
    }
}

/// The rank of each key among all (ties broken by position), sorting on the host.
fn ranks_by_sort(keys: &Tensor) -> Result<Tensor> {
    let k = keys.to_vec::<f64>()?;
    let mut order: Vec<usize> = (0..k.len()).collect();
    order.sort_by(|&a, &b| k[a].total_cmp(&k[b]).then(a.cmp(&b)));
    let mut rank = vec![0i64; k.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r as i64;
    }
    Tensor::from_vec(rank, &[k.len()])
}

/// The same ranks with tensor ops: `rank[i] = #{j : k[j] < k[i] or (k[j] == k[i] and j < i)}`.
fn ranks_by_comparison(keys: &Tensor) -> Result<Tensor> {
    let n = keys.raw_dims()[0];
    let (row, col) = (keys.unsqueeze(1)?, keys.unsqueeze(0)?); // k[i] down, k[j] across
    let position = Tensor::arange(0i64, n as i64);
    let before = position.unsqueeze(0)?.lt(&position.unsqueeze(1)?)?.cast(DType::I64)?;
    let less = col.lt(&row)?.cast(DType::I64)?;
    let tied = col.eq(&row)?.cast(DType::I64)?.mul(&before)?;
    less.add(&tied)?.sum_axes(&[1], false)
}

/// Batches of a dataset of tensors that share their leading dim (the samples), in order or
/// shuffled anew each epoch, as PyTorch's `DataLoader(TensorDataset(...))`.
///
/// [`epoch`](Self::epoch) gives an iterator over one pass; each item is the batch, one tensor
/// per dataset tensor, holding `batch_size` samples (the last batch fewer, unless
/// [`drop_last`](Self::drop_last)). Shuffling draws a permutation from a [`Generator`] each
/// epoch, so a seed makes the whole sequence of epochs reproducible.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::data::DataLoader;
/// let x = Tensor::arange(0.0f32, 5.0);
/// let loader = DataLoader::new(&[&x], 2)?;
/// let batches: Vec<Vec<f32>> = loader.epoch()?.map(|b| b?[0].to_vec::<f32>()).collect::<Result<_>>()?;
/// assert_eq!(batches, vec![vec![0.0, 1.0], vec![2.0, 3.0], vec![4.0]]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DataLoader {
    tensors: Vec<Tensor>,
    samples: usize,
    batch_size: usize,
    shuffle: Option<Generator>,
    drop_last: bool,
}

impl DataLoader {
    /// A loader over `tensors` (at least one; each of rank >= 1, all with the same leading
    /// dim), in batches of `batch_size` (>= 1), in order, keeping a short last batch.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::data::DataLoader;
    /// let (x, y) = (Tensor::zeros(&[4, 2], DType::F32), Tensor::zeros(&[3], DType::I64));
    /// let e = DataLoader::new(&[&x, &y], 2).unwrap_err().to_string();
    /// assert!(e.contains("tensors[1]") && e.contains("4 samples"), "{e}");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(tensors: &[&Tensor], batch_size: usize) -> Result<DataLoader> {
        let op = "DataLoader::new";
        if batch_size == 0 {
            return Err(Error::invalid(op, "batch_size", "0; use a batch size of at least 1"));
        }
        let Some(first) = tensors.first() else {
            return Err(Error::invalid(op, "tensors", "no tensors; pass the dataset's tensors, e.g. &[&inputs, &labels]"));
        };
        let samples =
            first.raw_dims().first().copied().ok_or_else(|| Error::invalid(op, "tensors", "tensors[0] is a scalar; samples run along axis 0"))?;
        for (k, t) in tensors.iter().enumerate() {
            if t.raw_dims().first() != Some(&samples) {
                let reason = format!(
                    "tensors[{k}] has shape {}, but tensors[0] holds {samples} samples (its leading dim): every tensor needs {samples} along axis 0",
                    t.raw_shape()
                );
                return Err(Error::invalid(op, "tensors", reason));
            }
        }
        let tensors = tensors.iter().map(|t| (*t).clone()).collect();
        Ok(DataLoader { tensors, samples, batch_size, shuffle: None, drop_last: false })
    }

    /// Shuffles each epoch with a permutation from a [`Generator`] seeded with `seed`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::data::DataLoader;
    /// let x = Tensor::arange(0i64, 6);
    /// let first = |l: &DataLoader| -> Result<Vec<i64>> { l.epoch()?.next().unwrap()?[0].to_vec::<i64>() };
    /// let (a, b) = (DataLoader::new(&[&x], 6)?.shuffle(3), DataLoader::new(&[&x], 6)?.shuffle(3));
    /// assert_eq!(first(&a)?, first(&b)?); // the same seed, the same order
    /// assert_ne!(first(&a)?, first(&a)?); // a new order each epoch
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn shuffle(self, seed: u64) -> DataLoader {
        self.shuffle_gen(&Generator::new(seed))
    }

    /// Shuffles each epoch with a permutation drawn from `generator` (a handle: the loader
    /// advances the caller's generator).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::data::DataLoader;
    /// let g = Generator::new(0);
    /// let loader = DataLoader::new(&[&Tensor::arange(0i64, 4)], 2)?.shuffle_gen(&g);
    /// loader.epoch()?;
    /// assert_eq!(g.state().to_vec::<i64>()?, vec![0, 1]); // one permutation drawn
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn shuffle_gen(mut self, generator: &Generator) -> DataLoader {
        self.shuffle = Some(generator.clone());
        self
    }

    /// Drops the last batch of an epoch when it is short (`drop_last = true`), so every batch
    /// has `batch_size` samples.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::data::DataLoader;
    /// let x = Tensor::zeros(&[5, 2], DType::F32);
    /// assert_eq!(DataLoader::new(&[&x], 2)?.len(), 3);
    /// assert_eq!(DataLoader::new(&[&x], 2)?.drop_last(true).len(), 2);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn drop_last(mut self, drop: bool) -> DataLoader {
        self.drop_last = drop;
        self
    }

    /// The number of batches in an epoch.
    pub fn len(&self) -> usize {
        if self.drop_last {
            self.samples / self.batch_size
        } else {
            self.samples.div_ceil(self.batch_size)
        }
    }

    /// True when an epoch has no batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of samples in the dataset.
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// One pass over the dataset: an iterator of batches. When shuffling, this draws the
    /// epoch's permutation (so each call gives a new order).
    pub fn epoch(&self) -> Result<Batches<'_>> {
        let order = match &self.shuffle {
            Some(g) => Some(Tensor::randperm_gen(self.samples, g)?),
            None => None,
        };
        Ok(Batches { loader: self, order, next: 0 })
    }
}

/// The batches of one epoch of a [`DataLoader`]; each item is one tensor per dataset tensor.
#[derive(Debug)]
pub struct Batches<'a> {
    loader: &'a DataLoader,
    order: Option<Tensor>,
    next: usize,
}

impl Iterator for Batches<'_> {
    type Item = Result<Vec<Tensor>>;

    fn next(&mut self) -> Option<Result<Vec<Tensor>>> {
        let l = self.loader;
        if self.next >= l.len() {
            return None;
        }
        let start = self.next * l.batch_size;
        let size = l.batch_size.min(l.samples - start);
        self.next += 1;
        Some(self.batch(start, size))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.loader.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Batches<'_> {}

impl Batches<'_> {
    /// The samples `start..start + size` of the epoch's order.
    fn batch(&self, start: usize, size: usize) -> Result<Vec<Tensor>> {
        let picks = match &self.order {
            Some(order) => Some(order.narrow(0, start, size)?),
            None => None,
        };
        let take = |t: &Tensor| match &picks {
            Some(p) => t.index_select(0, p),
            None => t.narrow(0, start, size),
        };
        self.loader.tensors.iter().map(take).collect()
    }
}
