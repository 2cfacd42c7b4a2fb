//! Tracing: eager and graph bit for bit, tprint!, graph snapshots, state by reference, cond and
//! while_loop; what traced graphs and models are saved as (checkpoints, PyTorch's state
//! dicts, exported graphs, ONNX run in tract-onnx); and every `Error` variant triggered.

mod checkpoint;
mod control_flow;
mod control_gradient_bits;
mod differential;
mod errors;
mod export;
mod export_relaxed;
mod onnx;
mod onnx_finetune;
mod onnx_import;
mod print;
mod pytorch_fixtures;
mod snapshot;
mod state;
