//! Tracing: eager and graph bit for bit, tprint!, graph snapshots, state by reference, cond and while_loop.

mod cond_gradient_bits;
mod control_flow;
mod differential;
mod print;
mod snapshot;
mod state;
