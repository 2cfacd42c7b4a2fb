//! A hidden timing of [`super::sgemm`] beside the `gemm` crate (called as `matmul::gemm_raw`
//! calls it), on the workloads' product shapes, 1 and 2 threads, interleaved rounds:
//! `cargo test --release -p tensor-core --lib sgemm::timing -- --ignored --nocapture`.
//! Not a correctness test (`tests.rs` is); its table is in docs/PERFORMANCE.md.

use super::{sgemm, Dst, Product, Strided};
use std::time::Instant;

/// A product: `m x k` by `k x n`, each operand stored row-major as the flag says (`ta`: `a`
/// stored `[k, m]`; `tb`: `b` stored `[n, k]`).
struct Shape {
    name: &'static str,
    m: usize,
    n: usize,
    k: usize,
    ta: bool,
    tb: bool,
}

const fn shape(name: &'static str, m: usize, n: usize, k: usize, ta: bool, tb: bool) -> Shape {
    Shape { name, m, n, k, ta, tb }
}

const SHAPES: &[Shape] = &[
    shape("W3 x@W1", 128, 512, 784, false, false),
    shape("W3 xT@d1", 784, 512, 128, true, false),
    shape("W3 h1@W2", 128, 256, 512, false, false),
    shape("W3 h1T@d2", 512, 256, 128, true, false),
    shape("W3 d2@W2T", 128, 512, 256, false, true),
    shape("W7 qkv", 512, 768, 256, false, false),
    shape("W7 up", 512, 1024, 256, false, false),
    shape("W7 down", 512, 256, 1024, false, false),
    shape("W7 d@Wup^T", 512, 256, 1024, false, true),
    shape("W7 X^T@d up", 256, 1024, 512, true, false),
    shape("W7 H^T@d dn", 1024, 256, 512, true, false),
    shape("W7 QK^T", 128, 128, 64, false, true),
    shape("W7 PV", 128, 64, 128, false, false),
    shape("MNv2 pw 96x16", 96, 12544, 16, false, false),
    shape("MNv2 pw 576x96", 576, 196, 96, false, false),
    shape("RN18 l4 im2col", 512, 49, 4608, false, false),
    shape("RN18 l3 im2col", 256, 196, 2304, false, false),
    shape("RN18 l2 im2col", 128, 784, 1152, false, false),
    shape("MNv2 pw 960x160", 960, 49, 160, false, false),
    shape("MNv2 pw 1280x320", 1280, 49, 320, false, false),
    shape("MNv2 pw 144x24", 144, 3136, 24, false, false),
    shape("MNv2 pw 24x144", 24, 3136, 144, false, false),
    shape("1024^3", 1024, 1024, 1024, false, false),
];

fn operand(s: &Shape, a: &[f32], b: &[f32]) -> (Strided, Strided) {
    let a = if s.ta { Strided::row_major(a, s.m).t() } else { Strided::row_major(a, s.k) };
    let b = if s.tb { Strided::row_major(b, s.k).t() } else { Strided::row_major(b, s.n) };
    (a, b)
}

fn ours(s: &Shape, a: Strided, b: Strided, c: &mut [f32], threads: usize) {
    use super::vector::Avx512Tile as T;
    let (p, d) = (Product { m: s.m, n: s.n, k: s.k, a, b }, Dst { ptr: c.as_mut_ptr(), rs: s.n, accumulate: false });
    // SAFETY: the operands are the shape's buffers, c holds m x n.
    unsafe {
        // The tiles measured for the choice (SGEMM_TILE=12x32 ...); the default is the one used.
        match std::env::var("SGEMM_TILE").as_deref() {
            Ok("6x64") => super::split::<T<6, 4>>(p, d, threads),
            Ok("8x48") => super::split::<T<8, 3>>(p, d, threads),
            Ok("14x32") => super::split::<T<14, 2>>(p, d, threads),
            Ok("12x32") => super::split::<T<12, 2>>(p, d, threads),
            Ok("4x64") => super::split::<T<4, 4>>(p, d, threads),
            _ => sgemm(p, d, threads),
        }
    }
}

fn theirs(s: &Shape, a: Strided, b: Strided, c: &mut [f32], threads: usize) {
    let par = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    // SAFETY: as above (gemm takes column strides first).
    unsafe {
        gemm::gemm::<f32>(
            s.m,
            s.n,
            s.k,
            c.as_mut_ptr(),
            1,
            s.n as isize,
            false,
            a.ptr,
            a.cs,
            a.rs,
            b.ptr,
            b.cs,
            b.rs,
            0.0,
            1.0,
            false,
            false,
            false,
            par,
        )
    }
}

/// The best time per call (seconds) over batches of calls filling ~`budget` seconds.
fn best(mut f: impl FnMut(), budget: f64) -> f64 {
    f();
    let start = Instant::now();
    let mut best = f64::MAX;
    while start.elapsed().as_secs_f64() < budget {
        let t = Instant::now();
        let reps = 8;
        for _ in 0..reps {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    best
}

#[test]
#[ignore = "timing, release mode: --ignored --nocapture"]
fn sgemm_beside_gemm() {
    let rounds: usize = std::env::var("SGEMM_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let budget: f64 = std::env::var("SGEMM_BUDGET").ok().and_then(|v| v.parse().ok()).unwrap_or(0.15);
    println!("shape | threads | ours GFLOP/s per round | gemm GFLOP/s per round | ours/gemm (best)");
    let filter = std::env::var("SGEMM_FILTER").unwrap_or_default();
    let thread_counts: Vec<usize> = match std::env::var("SGEMM_THREADS").as_deref() {
        Ok("1") => vec![1],
        Ok("2") => vec![2],
        _ => vec![1, 2],
    };
    for s in SHAPES.iter().filter(|s| s.name.contains(filter.as_str())) {
        let a: Vec<f32> = crate::kernels::test_values(s.m * s.k, 1).iter().map(|&v| v as f32).collect();
        let b: Vec<f32> = crate::kernels::test_values(s.k * s.n, 2).iter().map(|&v| v as f32).collect();
        let (ao, bo) = operand(s, &a, &b);
        let mut c = vec![0f32; s.m * s.n];
        let flops = 2.0 * (s.m * s.n * s.k) as f64;
        for &threads in &thread_counts {
            let (mut us, mut them) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                us.push(flops / best(|| ours(s, ao, bo, &mut c, threads), budget) / 1e9);
                them.push(flops / best(|| theirs(s, ao, bo, &mut c, threads), budget) / 1e9);
            }
            let fmt = |v: &[f64]| v.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(" / ");
            let ratio = us.iter().cloned().fold(0.0, f64::max) / them.iter().cloned().fold(0.0, f64::max);
            println!(
                "{} [{}x{}x{}{}{}] | {threads} | {} | {} | {ratio:.2}",
                s.name,
                s.m,
                s.n,
                s.k,
                if s.ta { " aT" } else { "" },
                if s.tb { " bT" } else { "" },
                fmt(&us),
                fmt(&them)
            );
        }
    }
}
