//! Ops: values against hand-computed ones, broadcasting, shapes, dtypes and errors.

mod broadcast_prop;
mod cnn_forms;
mod conv_pool_nd;
mod depthwise;
mod elementwise;
mod indexing_forms;
mod layout_index;
mod matmul_forms;
mod matmul_transposed;
mod nn_conv;
mod reduce_linalg;
mod resample_forms;
mod small_ops;
mod smoke;
mod staples;
mod tensor_basics;
