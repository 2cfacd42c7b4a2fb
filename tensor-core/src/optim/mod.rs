//! Optimizers: SGD and Adam.
