//! CUDA C for the kernels that move data without computing on it: a strided copy between
//! regions of two buffers (narrow, pad, concat), and the row selection of `index_select`
//! with its adjoint `index_add`.

use super::{c_type, KernelSource, MAX_RANK};
use crate::dtype::DType;
use std::fmt::Write;

/// `out[to + Σ c[d]·ix.strides[1][d]] = in[from + Σ c[d]·ix.strides[0][d]]` for every
/// coordinate `c` of `ix.dims[..rank]`: a region of one buffer copied into a region of another.
/// Narrow reads a window of its input; pad and concat write each input into a window of
/// their output.
pub(crate) fn copy(dtype: DType, rank: usize) -> KernelSource {
    assert!(rank <= MAX_RANK, "ranks above {MAX_RANK} are refused before codegen");
    let t = c_type(dtype);
    let mut walk = String::new();
    for d in (0..rank).rev() {
        writeln!(
            walk,
            "        {{ const long long c = rem % ix.dims[{d}]; rem /= ix.dims[{d}]; src += c * ix.strides[0][{d}]; dst += c * ix.strides[1][{d}]; }}"
        )
        .expect("write to String");
    }
    let kernel = format!(
        "(const long long n, const TcIndex ix, const long long from, const long long to, const {t}* __restrict__ in0, {t}* __restrict__ out0) {{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {{
        long long rem = i, src = from, dst = to;
{walk}        out0[dst] = in0[src];
    }}
}}
"
    );
    KernelSource::new("tc_copy", &kernel)
}

/// `out[o, j, r] = in[o, index[j], r]` over `[outer, n, inner]` (`ix.dims` = `[n, inner,
/// size]`, `size` the input's length along the axis). An index outside `0..size` gives 0:
/// the indices live on the GPU, where checking them would wait for the device.
pub(crate) fn index_select(dtype: DType, index: DType) -> KernelSource {
    let (t, i) = (c_type(dtype), c_type(index));
    let kernel = format!(
        "(const long long n, const TcIndex ix, const {t}* __restrict__ in0, const {i}* __restrict__ in1, {t}* __restrict__ out0) {{
    const long long len = ix.dims[0], inner = ix.dims[1], size = ix.dims[2];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {{
        const long long r = i % inner, j = (i / inner) % len, o = i / (inner * len);
        const long long k = (long long)in1[j];
        out0[i] = (k >= 0 && k < size) ? in0[(o * size + k) * inner + r] : ({t})0;
    }}
}}
"
    );
    KernelSource::new("tc_index_select", &kernel)
}

/// `out[o, k, r] = Σ in[o, j, r]` over the `j` with `index[j] == k`, in the order of `j`
/// (`ix.dims` = `[n, inner, size]`, `n` the index's length, `size` the output's along the
/// axis). Each output element sums its own terms in index order, the CPU's order, so the
/// result is the CPU's bit for bit and repeats (no atomics).
pub(crate) fn index_add(dtype: DType, index: DType) -> KernelSource {
    let (t, i) = (c_type(dtype), c_type(index));
    let kernel = format!(
        "(const long long n, const TcIndex ix, const {t}* __restrict__ in0, const {i}* __restrict__ in1, {t}* __restrict__ out0) {{
    const long long len = ix.dims[0], inner = ix.dims[1], size = ix.dims[2];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {{
        const long long r = i % inner, k = (i / inner) % size, o = i / (inner * size);
        {t} acc = ({t})0;
        for (long long j = 0; j < len; ++j) {{
            if ((long long)in1[j] == k) acc = tc_add(acc, in0[(o * len + j) * inner + r]);
        }}
        out0[i] = acc;
    }}
}}
"
    );
    KernelSource::new("tc_index_add", &kernel)
}
