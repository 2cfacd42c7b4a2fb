//! `Gelu`: the Gaussian error linear unit as a layer.

use super::module::Module;
use crate::error::Result;
use crate::tensor::Tensor;

/// GELU as a layer (PyTorch's `nn.GELU`): the exact form `0.5 x (1 + erf(x / sqrt(2)))`
/// from [`Gelu::new`], or GPT-2's tanh form from [`Gelu::tanh`]. No parameters.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{Gelu, Module};
/// let x = Tensor::from_vec(vec![-3.0f64, 0.0, 3.0], &[3])?;
/// let (exact, tanh) = (Gelu::new().forward(&x)?.to_vec::<f64>()?, Gelu::tanh().forward(&x)?.to_vec::<f64>()?);
/// assert!(exact.iter().zip(&tanh).all(|(a, b)| (a - b).abs() < 1e-3));
/// # Ok::<(), tensor_core::Error>(())
/// ```
///
/// As a `GraphArg` (derived) the form is keyed by value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, crate::GraphArg)]
pub struct Gelu {
    tanh: bool,
}

impl Gelu {
    /// The exact (erf) form.
    ///
    /// ```
    /// assert!(!tensor_core::nn::Gelu::new().is_tanh());
    /// ```
    pub fn new() -> Gelu {
        Gelu { tanh: false }
    }

    /// The tanh form, `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    ///
    /// ```
    /// assert!(tensor_core::nn::Gelu::tanh().is_tanh());
    /// ```
    pub fn tanh() -> Gelu {
        Gelu { tanh: true }
    }

    /// True for the tanh form.
    ///
    /// ```
    /// assert!(!tensor_core::nn::Gelu::default().is_tanh());
    /// ```
    pub fn is_tanh(&self) -> bool {
        self.tanh
    }
}

impl Module for Gelu {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if self.tanh {
            x.gelu_tanh()
        } else {
            x.gelu()
        }
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }
}
