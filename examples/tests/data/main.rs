//! The data loaders lenet5 trains on: the shipped digits and MNIST IDX files.

mod digits;
mod idx;
