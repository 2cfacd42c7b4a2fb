//! Which items are this rank's: a data set split across ranks (each rank a disjoint,
//! equal share), and a global batch split into per-rank shards.

use crate::error::{Error, Result};
use std::ops::Range;

/// Splits data across the `world` ranks of a job, as rank `rank` sees it.
///
/// ```
/// use tensor_core::distributed::ShardSampler;
/// let s = ShardSampler::new(1, 2)?;
/// assert_eq!(s.indices(7), vec![1, 3, 5]); // every second item from 1; equal counts per rank
/// assert_eq!(s.batch_range(8)?, 4..8); // the second half of a global batch of 8
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSampler {
    rank: usize,
    world: usize,
}

impl ShardSampler {
    /// The sampler of rank `rank` in a job of `world`.
    pub fn new(rank: usize, world: usize) -> Result<ShardSampler> {
        if world == 0 || rank >= world {
            return Err(Error::invalid("ShardSampler::new", "rank", format!("rank {rank} is not in a job of {world} ranks")));
        }
        Ok(ShardSampler { rank, world })
    }

    /// The sampler of this process in the current job (rank 0 of 1 without one).
    ///
    /// ```
    /// assert_eq!(tensor_core::distributed::ShardSampler::current().indices(3), vec![0, 1, 2]);
    /// ```
    pub fn current() -> ShardSampler {
        ShardSampler { rank: super::rank(), world: super::size() }
    }

    /// This rank's items of a data set of `len` (after it is shuffled the same way on every
    /// rank): every `world`-th index from `rank`, with the tail that does not fill a round
    /// dropped so that every rank gets the same number of items (and so the same number of
    /// steps).
    pub fn indices(&self, len: usize) -> Vec<usize> {
        let per_rank = len / self.world;
        (0..per_rank).map(|i| i * self.world + self.rank).collect()
    }

    /// This rank's rows of a global batch of `batch` rows: a contiguous `batch / world` rows,
    /// rank 0 first. Fails when the batch does not split evenly (the ranks' shard means would
    /// then not average to the batch mean).
    pub fn batch_range(&self, batch: usize) -> Result<Range<usize>> {
        if !batch.is_multiple_of(self.world) {
            return Err(Error::invalid(
                "ShardSampler::batch_range",
                "batch",
                format!("a global batch of {batch} does not split evenly over {} ranks", self.world),
            ));
        }
        let n = batch / self.world;
        Ok(self.rank * n..(self.rank + 1) * n)
    }
}
