//! Layers, losses and initializers, with PyTorch's names and semantics.
//!
//! A layer is a [`Module`]: `forward` maps a tensor to a tensor with ordinary tensor ops (so
//! it runs eagerly and traces into graphs alike), and `parameters` hands out the handles of
//! its trainable tensors — leaves with `requires_grad`, which an optimizer from
//! [`crate::optim`] updates in place. Layers are built from explicit dims, a dtype and a
//! random generator, so a model is reproducible from a seed:
//!
//! ```
//! use tensor_core::prelude::*;
//! use tensor_core::nn::{self, Linear, Module, ReLU, Sequential};
//! let g = Generator::new(0);
//! let model = Sequential::new()
//!     .add(Linear::new(2, 16, DType::F32, &g)?)
//!     .add(ReLU)
//!     .add(Linear::new(16, 3, DType::F32, &g)?);
//! let x = Tensor::randn(&[8, 2], DType::F32, 1);
//! let labels = Tensor::from_vec(vec![0i64, 1, 2, 0, 1, 2, 0, 1], &[8])?;
//! let loss = nn::cross_entropy(&model.forward(&x)?, &labels)?;
//! loss.backward()?;
//! assert!(model.parameters().iter().all(|p| p.grad().is_some()));
//! # Ok::<(), tensor_core::Error>(())
//! ```

mod activation;
mod attention;
mod conv;
mod conv_more;
mod dropout;
mod embedding;
mod flatten;
mod gelu;
pub mod init;
mod layer_norm;
mod linear;
mod loss;
mod module;
mod norm;
mod pool;
mod sequential;

pub use activation::ReLU;
pub use attention::CausalSelfAttention;
pub use conv::Conv2d;
pub use conv_more::{Conv1d, ConvTranspose2d};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use flatten::Flatten;
pub use gelu::Gelu;
pub use layer_norm::LayerNorm;
pub use linear::Linear;
pub use loss::{bce_with_logits, cross_entropy, l1_loss, mse_loss, nll_loss, smooth_l1_loss, Reduction};
pub use module::Module;
pub use norm::{BatchNorm2d, GroupNorm};
pub use pool::{AdaptiveAvgPool2d, AvgPool2d, MaxPool2d};
pub use sequential::Sequential;
