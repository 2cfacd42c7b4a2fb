//! `Flatten`: keeps the batch dim and flattens the rest.

use super::module::Module;
use crate::error::Result;
use crate::tensor::Tensor;

/// Flattens every dim after the first (PyTorch's `nn.Flatten()`, `start_dim = 1`):
/// `[n, c, h, w]` becomes `[n, c*h*w]`. No parameters (a [`GraphArg`](crate::GraphArg) with
/// no leaves).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{Flatten, Module};
/// let y = Flatten.forward(&Tensor::zeros(&[2, 3, 4, 5], DType::F32))?;
/// assert_eq!(y.dims(), vec![2, 60]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, crate::GraphArg)]
pub struct Flatten;

impl Module for Flatten {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.flatten_from(1)
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }
}
