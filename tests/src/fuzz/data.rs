//! Program inputs: their type, how their values are drawn, and the tensors made from them.
//! Each input draws two data sets from its seed: the one the graph is traced with and a
//! fresh one of the same signature.

use super::rng::Rng;
use tensor_core::{DType, Tensor};

/// How an input's values are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    /// Standard normal (floats; integers get them rounded).
    Normal,
    /// A few exact values with many ties (`-2, -1, -0.5, 0, 0.5, 1, 2`): ties decide which
    /// element a max, an argmax or a pooling window picks, and which gets its gradient.
    Ties,
    /// Normal values mixed with `0`, `-0`, `±inf`, NaN, huge and tiny ones.
    Special,
    /// Integers uniform in `lo..hi` (index tensors, labels, counts).
    Ints(i64, i64),
    /// Booleans.
    Bools,
}

/// One input of a program: a tensor argument of the traced function, or a tensor it
/// captures from outside.
///
/// ```
/// use tensor_core::prelude::*;
/// use tests::fuzz::{Dist, InputSpec};
/// let spec = InputSpec::new(DType::I64, &[3], Dist::Ints(0, 4), 1);
/// let t = spec.tensor(0);
/// assert!(t.to_vec::<i64>()?.iter().all(|&i| (0..4).contains(&i)));
/// assert_ne!(t.to_vec::<i64>()?, spec.tensor(1).to_vec::<i64>()?);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct InputSpec {
    /// The element type.
    pub dtype: DType,
    /// The dims.
    pub dims: Vec<usize>,
    /// How values are drawn.
    pub dist: Dist,
    /// The seed of both data sets.
    pub seed: u64,
    /// A leaf that requires grad.
    pub requires_grad: bool,
    /// Captured by the function rather than passed to it.
    pub capture: bool,
}

impl InputSpec {
    /// An argument that does not require grad.
    pub fn new(dtype: DType, dims: &[usize], dist: Dist, seed: u64) -> InputSpec {
        InputSpec { dtype, dims: dims.to_vec(), dist, seed, requires_grad: false, capture: false }
    }

    /// The same input, requiring grad.
    pub fn requires_grad(mut self) -> InputSpec {
        self.requires_grad = true;
        self
    }

    /// The same input, captured by the function instead of passed to it.
    pub fn captured(mut self) -> InputSpec {
        self.capture = true;
        self
    }

    /// Data set `set` (0: the one traced with, 1: fresh) as a new tensor (no grad).
    pub fn tensor(&self, set: u64) -> Tensor {
        let mut rng = Rng::derive(self.seed, set);
        let n: usize = self.dims.iter().product();
        let values: Vec<f64> = (0..n).map(|_| draw(&mut rng, self.dist)).collect();
        from_f64(self.dtype, &self.dims, &values)
    }
}

fn draw(rng: &mut Rng, dist: Dist) -> f64 {
    match dist {
        Dist::Normal => rng.normal(),
        Dist::Ties => *rng.pick(&[-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0]),
        Dist::Special => {
            if rng.chance(0.6) {
                rng.normal()
            } else {
                *rng.pick(&[0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e30, -1e30, 1e-30, 3e-39, 88.0, -104.0, 1.0])
            }
        }
        Dist::Ints(lo, hi) => (lo + rng.below((hi - lo).max(1) as usize) as i64) as f64,
        Dist::Bools => rng.below(2) as f64,
    }
}

/// A tensor of `dtype` from f64 values (rounded as `as` does; bool: nonzero).
pub fn from_f64(dtype: DType, dims: &[usize], v: &[f64]) -> Tensor {
    let made = match dtype {
        DType::F32 => Tensor::from_vec(v.iter().map(|&x| x as f32).collect(), dims),
        DType::F64 => Tensor::from_vec(v.to_vec(), dims),
        DType::I32 => Tensor::from_vec(v.iter().map(|&x| x.round() as i32).collect(), dims),
        DType::I64 => Tensor::from_vec(v.iter().map(|&x| x.round() as i64).collect(), dims),
        DType::Bool => Tensor::from_vec(v.iter().map(|&x| x != 0.0).collect(), dims),
    };
    made.expect("the values match the dims")
}
