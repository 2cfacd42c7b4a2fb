//! Autograd: PyTorch's semantics and every gradient against finite differences; `nn` layers
//! and `optim` optimizers, eagerly and traced.

mod calls;
mod deep;
mod gradcheck;
mod nn_optim;
mod semantics;
