//! The NVIDIA GPU backend (feature `cuda`): device buffers, kernels generated as CUDA C from
//! the scalar-function table and compiled by NVRTC, products through cuBLAS. Like `kernels`
//! it knows values, not ops: `ops::device` maps each op onto what this module offers.
//!
//! The source generator (`source`) is always built, so its output is tested on machines
//! without a GPU. Everything that touches the driver is behind the feature; without it,
//! [`DeviceStorage`] cannot be made and every entry point is an `Err` saying how to get one.

// Built without the feature too, so that its golden tests run everywhere.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod fast_math;
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) mod source;
// Pure data, tested without the feature too.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) mod arena_plan;
mod storage;

#[cfg(feature = "cuda")]
mod arena;
#[cfg(feature = "cuda")]
mod buffer;

#[cfg(feature = "cuda")]
mod runtime;
#[cfg(all(feature = "cuda", test))]
pub(crate) use runtime::compile;
#[cfg(feature = "cuda")]
pub(crate) use runtime::{address, capture, copy_from, empty, lanes_wait_for, record_on_lane, CaptureMemory, CapturedGraph, CAPTURE_LANES};
#[cfg(feature = "cuda")]
pub(crate) use runtime::{
    copy_regions, download, elementwise, elementwise_batched, gemm, gpu_name, load_kernel, reduce, rows, synchronize, time_on_gpu, upload, GemmShape,
    Region, Segment,
};

#[cfg(not(feature = "cuda"))]
mod unavailable;
#[cfg(not(feature = "cuda"))]
pub(crate) use unavailable::{download, gpu_name, synchronize, time_on_gpu, upload};

#[cfg(feature = "cuda")]
pub use fast_math::set_cuda_fast_math;
#[cfg(feature = "cuda")]
pub(crate) use fast_math::{math_mode, MathMode};
pub(crate) use storage::DeviceStorage;
