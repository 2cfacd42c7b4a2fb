//! Autograd: PyTorch's semantics and every gradient against finite differences.

mod calls;
mod deep;
mod gradcheck;
mod semantics;
