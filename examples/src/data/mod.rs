//! Data sets for the examples, as LeNet-5 wants them: 1x28x28 gray images with pixels in
//! `[0, 1]` and labels 0..9.
//!
//! - [`digits`]: the UCI optical digits (8x8, shipped in `examples/data/digits/`), upscaled to
//!   28x28, with a fixed train/test split. The default data of the `lenet5` example.
//! - [`idx`]: MNIST's IDX files (raw or gzip), for `lenet5 --data DIR`.

pub mod digits;
pub mod idx;

use tensor_core::{Result, Tensor};

/// The side of a LeNet-5 input image.
pub const SIDE: usize = 28;

/// Pixels per image (`1 x 28 x 28`).
pub const PIXELS: usize = SIDE * SIDE;

/// The number of classes (digits 0..9).
pub const CLASSES: usize = 10;

/// Images and labels held in memory: `images` is `len * 784` floats in `[0, 1]`, row-major
/// per image; `labels` are class indices `0..10`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dataset {
    pub images: Vec<f32>,
    pub labels: Vec<i64>,
}

impl Dataset {
    /// The number of examples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no examples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The pixels of example `i`.
    pub fn image(&self, i: usize) -> &[f32] {
        &self.images[i * PIXELS..(i + 1) * PIXELS]
    }

    /// The first `n` examples (all of them if there are fewer).
    pub fn take(&self, n: usize) -> Dataset {
        let n = n.min(self.len());
        Dataset { images: self.images[..n * PIXELS].to_vec(), labels: self.labels[..n].to_vec() }
    }

    /// The examples at `indices`, in that order.
    pub fn select(&self, indices: &[usize]) -> Dataset {
        let mut out = Dataset { images: Vec::with_capacity(indices.len() * PIXELS), labels: Vec::with_capacity(indices.len()) };
        for &i in indices {
            out.images.extend_from_slice(self.image(i));
            out.labels.push(self.labels[i]);
        }
        out
    }

    /// The examples at `indices` as tensors: images `[n, 1, 28, 28]` f32 and labels `[n]` i64.
    pub fn batch(&self, indices: &[usize]) -> Result<(Tensor, Tensor)> {
        self.select(indices).tensors()
    }

    /// The whole set as tensors: images `[n, 1, 28, 28]` f32 and labels `[n]` i64.
    pub fn tensors(self) -> Result<(Tensor, Tensor)> {
        let n = self.len();
        Ok((Tensor::from_vec(self.images, &[n, 1, SIDE, SIDE])?, Tensor::from_vec(self.labels, &[n])?))
    }

    /// How many examples each class has.
    pub fn class_counts(&self) -> [usize; CLASSES] {
        let mut counts = [0; CLASSES];
        for &l in &self.labels {
            counts[l as usize] += 1;
        }
        counts
    }
}

/// A training set and a test set, with a name for printing.
#[derive(Clone, Debug)]
pub struct Split {
    pub name: String,
    pub train: Dataset,
    pub test: Dataset,
}

/// Why a data set could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// A gzip stream is corrupt or cut short.
    #[error("{what}: bad gzip data: {source}")]
    Gzip { what: String, source: std::io::Error },
    /// The contents do not follow the format.
    #[error("{what}: {problem}")]
    Format { what: String, problem: String },
    /// A directory given with `--data` lacks one of MNIST's files.
    #[error("{dir} has no {file} (nor {file}.gz); expected MNIST's IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, raw or gzipped")]
    Missing { dir: String, file: String },
}

impl DataError {
    pub(crate) fn format(what: impl Into<String>, problem: impl Into<String>) -> DataError {
        DataError::Format { what: what.into(), problem: problem.into() }
    }
}

/// Decompresses gzip data, naming `what` in the error.
pub(crate) fn gunzip(bytes: &[u8], what: &str) -> std::result::Result<Vec<u8>, DataError> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).map_err(|source| DataError::Gzip { what: what.to_string(), source })?;
    Ok(out)
}

/// A small, value-stable random generator (SplitMix64) for shuffles that must never change:
/// the fixed train/test split and the epoch orders do not depend on any crate's version.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`), by Lemire's multiply-shift (the bias is below 2^-40 for
    /// the sizes used here).
    fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// `0..n` shuffled by a [`SplitMix64`] seeded with `seed`.
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    SplitMix64::new(seed).shuffle(&mut order);
    order
}
