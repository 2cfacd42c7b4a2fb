//! Activation layers.

use super::module::Module;
use crate::error::Result;
use crate::tensor::Tensor;

/// `max(x, 0)` elementwise, as a layer (PyTorch's `nn.ReLU`). No parameters (a
/// [`GraphArg`](crate::GraphArg) with no leaves).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{Module, ReLU};
/// let y = ReLU.forward(&Tensor::from_vec(vec![-1.0f32, 0.5], &[2])?)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![0.0, 0.5]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, crate::GraphArg)]
pub struct ReLU;

impl Module for ReLU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.relu()
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }
}
