//! CPU kernels on ndarray, shared by eager dispatch and the graph executor: the same function
//! computes an op in both modes, so both give the same bits.

pub mod conv;
pub mod elementwise;
pub mod fastmath;
pub mod fused;
pub mod index;
pub mod layout;
pub mod math;
pub mod matmul;
pub mod parallel;
pub mod pool;
pub mod reduce;
pub mod simd;
pub mod softmax;
