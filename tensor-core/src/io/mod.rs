//! Saving and loading tensors: a model's named tensors (its state dict) and checkpoints in
//! **safetensors**, the format PyTorch, candle, burn and the model hubs use.
//!
//! Every [`GraphArg`](crate::GraphArg) value — a `#[derive(GraphArg)]` model, any `nn`
//! layer, a `Vec` of layers, a tensor — has a state dict through [`StateDict`]: its tensor
//! leaves named by the fields that hold them (`fc1.weight`, `layers.0.bias`; nested structs,
//! `Vec`s, `Option`s and `nn::Sequential`s included, `body.0.weight`), the names its graph
//! functions' signatures use too. Loading checks every name, dtype and shape before it
//! changes anything, and replaces the values of the model's own tensors, so handles to them
//! (an optimizer's, a captured one's) stay valid. A load is strict — missing or unexpected
//! names are an `Err` listing them — unless asked to be non-strict
//! ([`load_safetensors_non_strict`], [`StateDict::load_state_dict_non_strict`]), which
//! returns them instead.
//!
//! ```
//! use tensor_core::prelude::*;
//! use tensor_core::io::{self, StateDict};
//!
//! #[derive(GraphArg)]
//! struct Mlp {
//!     fc1: Dense,
//!     fc2: Dense,
//! }
//! #[derive(GraphArg)]
//! struct Dense {
//!     weight: Tensor,
//!     bias: Option<Tensor>,
//! }
//! let dense = |seed| Dense { weight: Tensor::randn(&[2, 2], DType::F32, seed), bias: Some(Tensor::zeros(&[2], DType::F32)) };
//! let model = Mlp { fc1: dense(1), fc2: dense(2) };
//! let names: Vec<String> = model.state_dict()?.into_iter().map(|(name, _)| name).collect();
//! assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
//!
//! let path = std::env::temp_dir().join(format!("io-doc-{}.safetensors", std::process::id()));
//! io::save_safetensors(&model, &path)?;
//! let mut other = Mlp { fc1: dense(3), fc2: dense(4) };
//! io::load_safetensors(&mut other, &path)?;
//! assert_eq!(other.fc2.weight.to_vec::<f32>()?, model.fc2.weight.to_vec::<f32>()?);
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), tensor_core::Error>(())
//! ```
//!
//! Optimizers save their state (momentum buffers, Adam's moments and step counts) the same
//! way: [`Adam::state_dict`](crate::optim::Adam::state_dict). A checkpoint holding a model,
//! its optimizer and more is one file of named tensors: [`save_tensors`] with names made by
//! [`prefixed`], read back with [`load_tensors`] and [`unprefixed`].

mod bytes;
mod safetensors_file;
mod state_dict;

pub(crate) use bytes::to_le_bytes;
pub use safetensors_file::{load_safetensors, load_safetensors_non_strict, load_tensors, save_safetensors, save_tensors};
pub(crate) use safetensors_file::{read_tensors as read_safetensors, views_of};
pub(crate) use state_dict::assign_named;
pub use state_dict::{prefixed, unprefixed, IncompatibleKeys, StateDict};

/// A path as error messages print it.
pub(crate) fn path_text(path: &std::path::Path) -> String {
    path.display().to_string()
}
