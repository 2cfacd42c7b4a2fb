//! Autograd: PyTorch's semantics and every gradient against finite differences.

mod gradcheck;
mod semantics;
