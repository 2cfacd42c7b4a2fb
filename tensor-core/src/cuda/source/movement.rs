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
/// axis). One block per output row `(o, k)`: its threads first list the `j` that hit `k`, in
/// ascending order (a ballot per warp and the warps' counts in shared memory), then each
/// column sums its terms over that list. The CPU's order, so the CPU's bits, and no atomics;
/// a row with more hits than the list holds sums over the whole index instead.
pub(crate) fn index_add(dtype: DType, index: DType) -> KernelSource {
    let (t, i) = (c_type(dtype), c_type(index));
    let kernel = format!(
        "(const long long n, const TcIndex ix, const {t}* __restrict__ in0, const {i}* __restrict__ in1, {t}* __restrict__ out0) {{
    __shared__ int hits[{cap}];
    __shared__ int per_warp[32];
    const long long len = ix.dims[0], inner = ix.dims[1], size = ix.dims[2], rows = n / inner;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {{
        const long long k = row % size, o = row / size;
        long long found = 0;
        for (long long j0 = 0; j0 < len; j0 += blockDim.x) {{
            const long long j = j0 + threadIdx.x;
            const bool hit = j < len && (long long)in1[j] == k;
            const unsigned int ballot = __ballot_sync(0xffffffffu, hit);
            if (lane == 0) per_warp[warp] = __popc(ballot);
            __syncthreads();
            long long at = found + __popc(ballot & ((1u << lane) - 1u));
            long long chunk = 0;
            for (int w = 0; w < warps; ++w) {{
                if (w < warp) at += per_warp[w];
                chunk += per_warp[w];
            }}
            if (hit && at < {cap}) hits[at] = (int)j;
            found += chunk;
            __syncthreads();
        }}
        for (long long r = threadIdx.x; r < inner; r += blockDim.x) {{
            {t} acc = ({t})0;
            if (found <= {cap}) {{
                for (long long h = 0; h < found; ++h) acc = tc_add(acc, in0[(o * len + hits[h]) * inner + r]);
            }} else {{
                for (long long j = 0; j < len; ++j) {{
                    if ((long long)in1[j] == k) acc = tc_add(acc, in0[(o * len + j) * inner + r]);
                }}
            }}
            out0[row * inner + r] = acc;
        }}
        __syncthreads();
    }}
}}
",
        cap = INDEX_ADD_HITS
    );
    KernelSource::new("tc_index_add", &kernel)
}

/// The hits of one output row an `index_add` block lists in shared memory.
const INDEX_ADD_HITS: usize = 2048;
