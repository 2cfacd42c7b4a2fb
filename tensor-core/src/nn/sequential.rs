//! `Sequential`: layers applied one after another.

use super::module::Module;
use crate::error::Result;
use crate::function::{Flattener, GraphArg};
use crate::tensor::Tensor;

/// A chain of layers: `forward` feeds each layer's output to the next, and `parameters`
/// lists every layer's parameters in order (PyTorch's `nn.Sequential`).
///
/// A `Sequential` is a [`GraphArg`]: each layer flattens under its position, counting the
/// layers without parameters too, so a field `body` holding one has state dict entries
/// `body.0.weight`, `body.2.bias` (PyTorch's names), and a `#[graph_fn]` taking it (or a
/// struct holding it) reads its parameters as inputs. Each layer's type is part of the
/// signature, so chains that differ only in a parameterless layer trace apart.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::{Flatten, Linear, Module, ReLU, Sequential};
/// let g = Generator::new(0);
/// let model = Sequential::new()
///     .add(Flatten)
///     .add(Linear::new(12, 8, DType::F32, &g)?)
///     .add(ReLU)
///     .add(Linear::new(8, 2, DType::F32, &g)?);
/// assert_eq!(model.len(), 4);
/// assert_eq!(model.parameters().len(), 4);
/// assert_eq!(model.forward(&Tensor::zeros(&[5, 3, 4], DType::F32))?.dims(), vec![5, 2]);
/// let names: Vec<String> = model.state_dict()?.into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["1.weight", "1.bias", "3.weight", "3.bias"]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Default)]
pub struct Sequential {
    layers: Vec<Box<dyn Module + Send + Sync>>,
    /// Each layer's type name, for the signature (a `dyn Module` cannot say it).
    kinds: Vec<&'static str>,
}

impl Sequential {
    /// An empty chain (its `forward` returns the input).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Module, Sequential};
    /// let x = Tensor::scalar(1.0f32);
    /// assert!(Sequential::new().forward(&x)?.same_as(&x));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// The chain with `layer` appended.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::nn::{Module, ReLU, Sequential};
    /// let model = Sequential::new().add(ReLU).add(ReLU);
    /// assert_eq!(model.len(), 2);
    /// ```
    #[allow(clippy::should_implement_trait)] // a builder step (as PyTorch's add_module), not `+`
    pub fn add<L: Module + Send + Sync + 'static>(mut self, layer: L) -> Sequential {
        self.layers.push(Box::new(layer));
        self.kinds.push(std::any::type_name::<L>());
        self
    }

    /// The number of layers.
    ///
    /// ```
    /// assert_eq!(tensor_core::nn::Sequential::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// True when the chain has no layers.
    ///
    /// ```
    /// assert!(tensor_core::nn::Sequential::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// The layers, in order.
    ///
    /// ```
    /// use tensor_core::nn::{Module, ReLU, Sequential};
    /// let model = Sequential::new().add(ReLU);
    /// assert!(model.layers()[0].parameters().is_empty());
    /// ```
    pub fn layers(&self) -> &[Box<dyn Module + Send + Sync>] {
        &self.layers
    }
}

impl Module for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        for layer in &self.layers {
            y = layer.forward(&y)?;
        }
        Ok(y)
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.layers.iter().flat_map(|l| l.parameters()).collect()
    }
}

/// The layers by position (`0.weight`), each keyed by its type and then by what it flattens.
impl GraphArg for Sequential {
    fn flatten(&self, f: &mut Flattener) {
        f.len(self.layers.len());
        for (i, (layer, kind)) in self.layers.iter().zip(&self.kinds).enumerate() {
            f.element(i);
            f.type_name(kind);
            layer.flatten(f);
            f.end_field();
        }
    }
}
