//! Tracing: eager and graph bit for bit, tprint!, graph snapshots, state by reference, cond and while_loop.

mod control_flow;
mod control_gradient_bits;
mod differential;
mod print;
mod snapshot;
mod state;
