//! CUDA C for softmax and log-softmax along the last axis: one block per row, the max and the
//! sum of exponentials combined in the reductions' fixed tree, the scalar functions from the
//! tables. The same steps, in the same order, as the composed kernels (a max reduction, a
//! subtraction, `exp`, a sum reduction, a division or `log` and a subtraction), in one launch.

use super::{binary_fn, c_type, reduce_parts, unary_fn, KernelSource, REDUCE_THREADS};
use crate::dtype::DType;
use crate::math::{BinaryOp, ReduceOp, UnaryOp};

/// `ix.dims[0]` is the row length; `n` the number of elements.
pub(crate) fn softmax(dtype: DType, log: bool) -> KernelSource {
    let t = c_type(dtype);
    let (max, lowest) = reduce_parts(ReduceOp::Max, dtype);
    let (sum, zero) = reduce_parts(ReduceOp::Sum, dtype);
    let (exp, ln) = (unary_fn(UnaryOp::Exp, dtype), unary_fn(UnaryOp::Log, dtype));
    let (sub, div) = (binary_fn(BinaryOp::Sub), binary_fn(BinaryOp::Div));
    let finish = match log {
        true => format!("{sub}({sub}(x[c], m), {ln}(s))"),
        false => format!("{div}({exp}({sub}(x[c], m)), s)"),
    };
    let tree = |combine: &str| {
        format!(
            "        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int h = {half}; h > 0; h >>= 1) {{
            if (threadIdx.x < h) sh[threadIdx.x] = {combine}(sh[threadIdx.x], sh[threadIdx.x + h]);
            __syncthreads();
        }}
",
            half = REDUCE_THREADS / 2
        )
    };
    let kernel = format!(
        "(const long long n, const TcIndex ix, const {t}* __restrict__ in0, {t}* __restrict__ out0) {{
    __shared__ {t} sh[{threads}];
    const long long len = ix.dims[0], rows = n / len;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {{
        const {t}* x = in0 + row * len;
        {t}* y = out0 + row * len;
        {t} acc = {lowest};
        for (long long c = threadIdx.x; c < len; c += blockDim.x) acc = {max}(acc, x[c]);
{max_tree}        const {t} m = sh[0];
        __syncthreads();
        acc = {zero};
        for (long long c = threadIdx.x; c < len; c += blockDim.x) acc = {sum}(acc, {exp}({sub}(x[c], m)));
{sum_tree}        const {t} s = sh[0];
        __syncthreads();
        for (long long c = threadIdx.x; c < len; c += blockDim.x) y[c] = {finish};
    }}
}}
",
        threads = REDUCE_THREADS,
        max_tree = tree(max),
        sum_tree = tree(sum),
    );
    KernelSource::new(if log { "tc_log_softmax" } else { "tc_softmax" }, &kernel)
}
