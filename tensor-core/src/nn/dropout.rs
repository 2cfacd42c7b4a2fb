//! `Dropout`: zeroes random elements while training.

use super::module::Module;
use crate::error::{Error, Result};
use crate::random::Generator;
use crate::tensor::Tensor;

/// Dropout as a layer (PyTorch's `nn.Dropout`): in training mode (the default) each element
/// is zeroed with probability `p` and the others scaled by `1 / (1 - p)`, with masks drawn
/// from the layer's [`Generator`]; in evaluation mode it passes its input through.
///
/// As a `#[graph_fn]` argument (or a field of one) the generator's state is a leaf the graph
/// advances on every call, and `p` and the mode are keyed by value, so switching modes
/// retraces.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{Dropout, Module};
/// let mut drop = Dropout::new(0.5, &Generator::new(0))?;
/// let x = Tensor::ones(&[100], DType::F32);
/// assert!(drop.forward(&x)?.to_vec::<f32>()?.contains(&0.0));
/// drop.set_training(false);
/// assert_eq!(drop.forward(&x)?.to_vec::<f32>()?, vec![1.0; 100]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, crate::GraphArg)]
pub struct Dropout {
    p: f64,
    generator: Generator,
    training: bool,
}

impl Dropout {
    /// A dropout layer with probability `p` in `[0, 1]`, drawing from `generator` (a handle
    /// to the same state).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(tensor_core::nn::Dropout::new(-0.1, &Generator::new(0)).is_err());
    /// ```
    pub fn new(p: f64, generator: &Generator) -> Result<Dropout> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::invalid("Dropout", "p", format!("must be a probability in [0, 1], found {p}")));
        }
        Ok(Dropout { p, generator: generator.clone(), training: true })
    }

    /// Switches between training (dropping) and evaluation (identity).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let mut d = tensor_core::nn::Dropout::new(0.1, &Generator::new(0))?;
    /// d.set_training(false);
    /// assert!(!d.training());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn set_training(&mut self, training: bool) {
        self.training = training;
    }

    /// True in training mode.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert!(tensor_core::nn::Dropout::new(0.1, &Generator::new(0))?.training());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn training(&self) -> bool {
        self.training
    }

    /// The drop probability.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(tensor_core::nn::Dropout::new(0.1, &Generator::new(0))?.p(), 0.1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn p(&self) -> f64 {
        self.p
    }

    /// The generator the masks are drawn from (a handle to the same state).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let g = Generator::new(4);
    /// let d = tensor_core::nn::Dropout::new(0.1, &g)?;
    /// assert!(d.generator().state().same_as(g.state()));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn generator(&self) -> &Generator {
        &self.generator
    }
}

impl Module for Dropout {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if self.training {
            x.dropout(self.p, &self.generator)
        } else {
            Ok(x.clone())
        }
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }
}
