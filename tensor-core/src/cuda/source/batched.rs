//! CUDA C for a batch of independent runs of one elementwise program ("multi-tensor apply",
//! as PyTorch's fused Adam and XLA's horizontal loop fusion): each run is a segment with its
//! own pointers and element count, and one launch covers every segment. Each block finds
//! its segment in a table passed by value as the kernel's one parameter, and each element
//! runs the same device function (`tc_lane`) as the program's own kernel, so its bits are
//! unchanged: only the launches are fewer.
//!
//! The table (`TcTable`, [`TABLE_WORDS`] 64-bit words): `w[0]` is the number of segments
//! `S`; `w[1 + s]` the first block of segment `s` (they ascend); then, from `w[1 + S]`, each
//! segment's element count, its input pointers and its output pointers
//! (`1 + inputs + outputs` words a segment).

use super::{c_type, lane_function, vector_type, Access, KernelSource, MathMode, Program};
use std::fmt::Write;

/// The words of a batched kernel's table: 3,968 bytes, under the 4 KiB every CUDA version
/// takes as kernel parameters.
pub(crate) const TABLE_WORDS: usize = 496;

/// The table's C struct (`WORDS` replaced by [`TABLE_WORDS`]), in every kernel's header.
pub(super) const TABLE_STRUCT: &str = "struct TcTable { unsigned long long w[WORDS]; };\n";

/// The host's twin of `struct TcTable`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentTable {
    pub words: [u64; TABLE_WORDS],
}

impl SegmentTable {
    /// The table of segments, each `(element count, pointers: inputs then outputs)`, with
    /// `per_block` elements a block; with the number of blocks the launch needs. `None` if
    /// the segments do not fit (more than [`batch_capacity`] of them).
    pub(crate) fn new(segments: &[(usize, &[u64])], per_block: usize) -> Option<(SegmentTable, usize)> {
        let count = segments.len();
        let stride = segments.first().map_or(1, |(_, p)| 1 + p.len());
        if count == 0 || 1 + count * (1 + stride) > TABLE_WORDS || segments.iter().any(|(_, p)| 1 + p.len() != stride) {
            return None;
        }
        let mut words = [0u64; TABLE_WORDS];
        words[0] = count as u64;
        let mut blocks = 0usize;
        for (s, (n, pointers)) in segments.iter().enumerate() {
            words[1 + s] = blocks as u64;
            blocks += n.div_ceil(per_block);
            let at = 1 + count + s * stride;
            words[at] = *n as u64;
            words[at + 1..at + stride].copy_from_slice(pointers);
        }
        Some((SegmentTable { words }, blocks))
    }
}

/// How many segments of a program with `pointers` inputs and outputs one table holds.
pub(crate) fn batch_capacity(pointers: usize) -> usize {
    (TABLE_WORDS - 1) / (2 + pointers)
}

/// [`elementwise_batched_in`] with the CPU's functions (the default mode).
#[cfg(test)]
pub(crate) fn elementwise_batched(p: &Program) -> KernelSource {
    elementwise_batched_in(p, MathMode::CpuBits)
}

/// The batched kernel of `p`, whose inputs are all contiguous or scalar (a strided input's
/// index needs its own shape: such programs are not batched), with the functions of `math`
/// (the program's own kernel's in that mode, so each element keeps its bits). A program the
/// single kernel vectorizes is vectorized here too (four elements a thread, the last `n % 4`
/// by the thread after the last full vector); else one element a thread. Blocks of 256
/// threads.
pub(crate) fn elementwise_batched_in(p: &Program, math: MathMode) -> KernelSource {
    debug_assert!(p.inputs.iter().all(|(_, a)| !matches!(a, Access::Strided(_))), "batched programs read no strided input");
    let stride = 1 + p.inputs.len() + p.outputs.len();
    let mut pointers = String::new();
    for (k, (d, _)) in p.inputs.iter().enumerate() {
        let t = c_type(*d);
        writeln!(pointers, "    const {t}* __restrict__ in{k} = (const {t}*)seg[{}];", 1 + k).expect("write");
    }
    for (j, &o) in p.outputs.iter().enumerate() {
        let t = c_type(p.instrs[o].dtype);
        writeln!(pointers, "    {t}* __restrict__ out{j} = ({t}*)seg[{}];", 1 + p.inputs.len() + j).expect("write");
    }
    let (work, per_thread) = match vector_type(p) {
        Some(vector) => (vector_work(p, vector), 4),
        None => (format!("    if (q < n) {{\n        const long long i = q;\n        {}\n    }}\n", call(p, "")), 1),
    };
    let kernel = format!(
        "(const __grid_constant__ TcTable t) {{
    // The segment of this block: the last whose first block is at most blockIdx.x.
    const unsigned long long segments = t.w[0];
    unsigned long long s = 0, hi = segments - 1;
    while (s < hi) {{
        const unsigned long long mid = (s + hi + 1) >> 1;
        if (t.w[1 + mid] <= blockIdx.x) s = mid; else hi = mid - 1;
    }}
    const unsigned long long* seg = t.w + 1 + segments + s * {stride};
    const long long n = (long long)seg[0];
    const long long q = (long long)(blockIdx.x - t.w[1 + s]) * blockDim.x + threadIdx.x;
{pointers}{work}}}
"
    );
    KernelSource::with_helpers("tc_batch", &lane_function(p, math), &kernel, per_thread)
}

/// Thread `q` of a segment: the `q`-th vector of four elements, or (the thread after the
/// last full vector) the last `n % 4` elements one by one.
fn vector_work(p: &Program, vector: &str) -> String {
    let (mut load, mut store) = (String::new(), String::new());
    for (k, (d, a)) in p.inputs.iter().enumerate() {
        match a {
            Access::Scalar => writeln!(load, "        const {} s{k} = in{k}[0];", c_type(*d)),
            _ => writeln!(load, "        const {vector} v{k} = reinterpret_cast<const {vector}*>(in{k})[q];"),
        }
        .expect("write");
    }
    for j in 0..p.outputs.len() {
        writeln!(load, "        {vector} w{j};").expect("write");
        writeln!(store, "        reinterpret_cast<{vector}*>(out{j})[q] = w{j};").expect("write");
    }
    let lanes: String = ["x", "y", "z", "w"].iter().map(|l| format!("        {}\n", call(p, l))).collect();
    format!(
        "    const long long nv = n >> 2;
    if (q < nv) {{
{load}{lanes}{store}    }} else if (q == nv) {{
        for (long long i = nv << 2; i < n; i++) {{
            {}
        }}
    }}
",
        call(p, "")
    )
}

/// `tc_lane(..)` on lane `lane` of the vectors (`x`..`w`), or on element `i` (`""`).
fn call(p: &Program, lane: &str) -> String {
    let mut args: Vec<String> = p
        .inputs
        .iter()
        .enumerate()
        .map(|(k, (_, a))| match (a, lane.is_empty()) {
            (Access::Scalar, false) => format!("s{k}"),
            (Access::Scalar, true) => format!("in{k}[0]"),
            (_, true) => format!("in{k}[i]"),
            (_, false) => format!("v{k}.{lane}"),
        })
        .collect();
    args.extend((0..p.outputs.len()).map(|j| if lane.is_empty() { format!("out{j}[i]") } else { format!("w{j}.{lane}") }));
    format!("tc_lane({});", args.join(", "))
}
