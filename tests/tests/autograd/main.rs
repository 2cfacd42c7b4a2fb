//! Autograd: PyTorch's semantics and every gradient against finite differences.

mod deep;
mod gradcheck;
mod semantics;
