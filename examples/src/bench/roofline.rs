//! The machine's own limits, measured in-process, and each workload's work per call, so a
//! bench line says how close a run came to what the machine can do: f32 FMA throughput
//! (independent vector FMA chains on every thread) and stream bandwidth (copy and triad over
//! arrays far larger than the caches, as STREAM counts them: the bytes read and written,
//! without the write-allocate read). The work per call is counted from each workload's
//! definition (docs/WORKLOADS.md gives the formulas).

use std::time::Instant;
use tensor_core::kernels::simd;

/// What the machine does at most, with `threads` threads.
#[derive(Clone, Debug)]
pub struct Machine {
    pub cpu: String,
    /// The SIMD level tensor-core's loops run at (`avx512`, `avx2`, `baseline`).
    pub simd: &'static str,
    /// The level of the hand-written convolution tiles (`simd::tile_level`): `avx2` also on
    /// a CPU that runs AVX-512 at half rate (AMD's Zen 4).
    pub tiles: &'static str,
    pub threads: usize,
    pub fma_gflops: f64,
    pub copy_gbps: f64,
    pub triad_gbps: f64,
}

impl Machine {
    /// Measures the limits with `threads` threads (about half a second).
    pub fn measure(threads: usize) -> Machine {
        let threads = threads.max(1);
        let (copy_gbps, triad_gbps) = bandwidth(threads);
        let (simd, tiles) = (level_name(simd::level()), level_name(simd::tile_level()));
        Machine { cpu: cpu_model(), simd, tiles, threads, fma_gflops: fma_gflops(threads), copy_gbps, triad_gbps }
    }

    /// The fields a bench line gains: the machine, the workload's work per call, and what a
    /// call of `median_us` achieved against the limits.
    pub fn json_fields(&self, work: Option<Work>, median_us: f64) -> String {
        let mut s = format!(
            ",\"cpu\":\"{}\",\"simd\":\"{}\",\"tiles\":\"{}\",\"peak_gflops\":{:.1},\"peak_copy_gbps\":{:.1},\"peak_triad_gbps\":{:.1}",
            self.cpu.replace('"', "'"),
            self.simd,
            self.tiles,
            self.fma_gflops,
            self.copy_gbps,
            self.triad_gbps
        );
        if let Some(w) = work.filter(|_| median_us > 0.0) {
            let (gflops, gbps) = (w.flops / median_us / 1e3, w.bytes / median_us / 1e3);
            s += &format!(
                ",\"flops_per_call\":{:.0},\"bytes_per_call\":{:.0},\"gflops\":{gflops:.2},\"gbps\":{gbps:.2},\"frac_peak_flops\":{:.3},\"frac_peak_triad\":{:.3}",
                w.flops,
                w.bytes,
                gflops / self.fma_gflops,
                gbps / self.triad_gbps
            );
        }
        s
    }
}

/// The CPU's model name (`/proc/cpuinfo`), or the architecture where there is none.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

fn level_name(level: simd::Level) -> &'static str {
    use simd::Level;
    match level {
        Level::Avx512 => "avx512",
        Level::Avx2 => "avx2",
        Level::Baseline => "baseline",
    }
}

// ------------------------------------------------------------------------------ FMA peak

/// Independent accumulators per thread: enough FMAs in flight to cover their latency on two
/// ports (4 cycles × 2), and few enough to stay in registers.
const CHAINS: usize = 12;

/// f32 GFLOP/s (an FMA is two) of `threads` threads each running [`CHAINS`] FMA chains.
pub fn fma_gflops(threads: usize) -> f64 {
    let iters: u64 = 4_000_000;
    // The best of three: the first also warms the clocks up.
    (0..3)
        .map(|_| {
            let start = Instant::now();
            let flops: f64 = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads).map(|_| s.spawn(move || fma_chains(iters))).collect();
                handles.into_iter().map(|h| h.join().expect("FMA thread")).sum()
            });
            flops / start.elapsed().as_secs_f64() / 1e9
        })
        .fold(0.0, f64::max)
}

/// Runs the chains for `iters` rounds on the widest vectors the CPU has; returns the flops.
fn fma_chains(iters: u64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512 F, checked above.
            let sum = unsafe { fma_avx512(iters) };
            return f64::from(std::hint::black_box(sum).min(0.0)) + (iters * CHAINS as u64 * 16 * 2) as f64;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA, checked above.
            let sum = unsafe { fma_avx2(iters) };
            return f64::from(std::hint::black_box(sum).min(0.0)) + (iters * CHAINS as u64 * 8 * 2) as f64;
        }
    }
    let mut acc = [1.0f32; CHAINS];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = std::hint::black_box(*a) * 0.999_999 + 1e-7;
        }
    }
    f64::from(std::hint::black_box(acc.iter().sum::<f32>()).min(0.0)) + (iters * CHAINS as u64 * 2) as f64
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn fma_avx512(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
    let mut acc = [_mm512_set1_ps(1.0); CHAINS];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(*x, a, b);
        }
    }
    acc.iter().map(|&x| _mm512_reduce_add_ps(x)).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_avx2(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
    let mut acc = [_mm256_set1_ps(1.0); CHAINS];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm256_fmadd_ps(*x, a, b);
        }
    }
    let mut lanes = [0.0f32; 8];
    acc.iter().fold(0.0, |s, &x| {
        // SAFETY: `lanes` holds 8 floats.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), x) };
        s + lanes.iter().sum::<f32>()
    })
}

// ------------------------------------------------------------------------------ bandwidth

/// Elements per array: 128 MiB of f32, far beyond any cache.
const STREAM_LEN: usize = 1 << 25;

/// Copy (`a = b`, 8 bytes per element) and triad (`a = b + s·c`, 12 bytes per element)
/// GB/s with `threads` threads, each on its own share of the arrays; the best of three.
pub fn bandwidth(threads: usize) -> (f64, f64) {
    let mut a = vec![0.0f32; STREAM_LEN];
    let b = vec![1.0f32; STREAM_LEN];
    let c = vec![2.0f32; STREAM_LEN];
    let share = STREAM_LEN.div_ceil(threads);
    let best = |f: &mut dyn FnMut()| {
        f(); // first touch of the pages
        (0..3)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let copy = best(&mut || {
        std::thread::scope(|s| {
            for (x, y) in a.chunks_mut(share).zip(b.chunks(share)) {
                s.spawn(move || x.copy_from_slice(y));
            }
        })
    });
    let triad = best(&mut || {
        std::thread::scope(|s| {
            for ((x, y), z) in a.chunks_mut(share).zip(b.chunks(share)).zip(c.chunks(share)) {
                s.spawn(move || x.iter_mut().zip(y).zip(z).for_each(|((x, y), z)| *x = y + 3.0 * z));
            }
        })
    });
    std::hint::black_box(&a);
    let bytes = STREAM_LEN as f64 * 4.0;
    (2.0 * bytes / copy / 1e9, 3.0 * bytes / triad / 1e9)
}

// ------------------------------------------------------------------------------ work per call

/// What one call of a workload must do: its floating-point operations (an FMA is two; a
/// transcendental function counts as one) and the bytes it must move to and from memory at
/// least (its inputs, outputs and state, each once).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Work {
    pub flops: f64,
    pub bytes: f64,
}

/// A product's flops: `2·m·n·k`.
fn mm(m: u64, n: u64, k: u64) -> u64 {
    2 * m * n * k
}

/// The work of one call of `workload` (W1–W8, and W9's cases as `W9:<case>`), from
/// docs/WORKLOADS.md's definitions.
pub fn work(workload: &str) -> Option<Work> {
    let (flops, bytes): (u64, u64) = match workload {
        // 100 × (mul, add) on 16 floats; x read and written once.
        "W1" => (200 * 16, 2 * 16 * 4),
        // 7 ops per element (two muls, an add, tanh, sigmoid, a mul, a sub); x read, y written.
        "W2" => (7 * N2, 2 * 4 * N2),
        // Forward products, then each weight's gradient and each input's but the first.
        "W3" => {
            let layers = [(784, 512), (512, 256), (256, 10)];
            let fwd: Vec<u64> = layers.iter().map(|&(i, o)| mm(128, o, i)).collect();
            let params: u64 = layers.iter().map(|&(i, o)| i * o + o).sum();
            (fwd[0] * 2 + fwd[1] * 3 + fwd[2] * 3, 4 * (128 * 784 + 2 * params) + 8 * 128)
        }
        // Convolutions and dense layers: forward, then the weights' and inputs' gradients
        // (not the image's); Adam reads and writes each parameter and its two moments.
        "W4" => {
            let fwd = lenet_forward_flops(64);
            (3 * fwd - 2 * 64 * 6 * 784 * 25, 4 * 64 * 784 + 8 * 64 + 24 * LENET_PARAMS)
        }
        "W5" => (mm(1024, 1024, 1024), 3 * 4 * 1024 * 1024),
        "W6" => (1, 2 * 4),
        // Forward, then every gradient (about twice the forward); AdamW reads the gradient
        // and reads and writes each parameter and its two moments.
        "W7" => (3 * gpt_forward_flops(), 28 * GPT_PARAMS + 2 * 8 * 512),
        "W8" => (lenet_forward_flops(1), 4 * (LENET_PARAMS + 784 + 10)),
        // Conv and Gemm products of the imported models (their batchnorms folded into the
        // convs by the export), per image; the weights, the images and the logits once.
        "W9:resnet18_b1" => w9(RESNET18_FLOPS, RESNET18_PARAMS, 1),
        "W9:resnet18_b8" => w9(RESNET18_FLOPS, RESNET18_PARAMS, 8),
        "W9:mobilenet_v2_b1" => w9(MOBILENET_V2_FLOPS, MOBILENET_V2_PARAMS, 1),
        _ => return None,
    };
    Some(Work { flops: flops as f64, bytes: bytes as f64 })
}

const N2: u64 = 4_194_304;

/// W9's models as scripts/onnx_real_models.py exports them: Conv and Gemm flops per
/// 224×224 image (a multiply-add counted as two) and the initializers' element count.
const RESNET18_FLOPS: u64 = 3_628_146_688;
const RESNET18_PARAMS: u64 = 11_684_712;
const MOBILENET_V2_FLOPS: u64 = 601_548_544;
const MOBILENET_V2_PARAMS: u64 = 3_487_816;

/// A W9 case's flops and bytes at `batch` images.
fn w9(flops_per_image: u64, params: u64, batch: u64) -> (u64, u64) {
    (batch * flops_per_image, 4 * (params + batch * (3 * 224 * 224 + 1000)))
}

/// LeNet-5's parameters: two convolutions and three dense layers, with biases.
const LENET_PARAMS: u64 = (6 * 25 + 6) + (16 * 6 * 25 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10);

fn lenet_forward_flops(batch: u64) -> u64 {
    let conv1 = 2 * batch * 6 * 28 * 28 * 25;
    let conv2 = 2 * batch * 16 * 10 * 10 * 6 * 25;
    conv1 + conv2 + mm(batch, 120, 400) + mm(batch, 84, 120) + mm(batch, 10, 84)
}

/// W7's parameters: embeddings, two blocks (two layer norms, qkv, projection, MLP), the final
/// layer norm and the output projection.
const GPT_PARAMS: u64 = {
    let (d, v, t, h) = (256, 1024, 128, 1024);
    let block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * h + h) + (h * d + d);
    v * d + t * d + 2 * block + 2 * d + d * v
};

/// W7's forward products: per block qkv, scores, weighted values, projection and the MLP;
/// then the output projection. (Elementwise work is under 1% of it.)
fn gpt_forward_flops() -> u64 {
    let (rows, d, h, v, t, heads, hd) = (512, 256, 1024, 1024, 128, 4, 64);
    let attention = 4 * heads * (mm(t, t, hd) + mm(t, hd, t));
    let block = mm(rows, 3 * d, d) + attention + mm(rows, d, d) + mm(rows, h, d) + mm(rows, d, h);
    2 * block + mm(rows, v, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_per_call_is_counted_from_the_definitions() {
        // Hand-computed: 2·128·(784·512·2 + 512·256·3 + 256·10·3).
        assert_eq!(work("W3").unwrap().flops, 308_150_272.0);
        assert_eq!(work("W5").unwrap().flops, 2_147_483_648.0);
        assert_eq!(work("W2").unwrap().bytes, 33_554_432.0);
        // 3 × (2 blocks × 872,415,232 + 268,435,456): about 6.0 GFLOP.
        assert_eq!(work("W7").unwrap().flops, 6_039_797_760.0);
        assert_eq!(GPT_PARAMS, 2_137_088);
        assert_eq!(LENET_PARAMS, 61_706);
        // One image through LeNet-5: 235,200 + 480,000 + 117,840.
        assert_eq!(work("W8").unwrap().flops, 833_040.0);
        assert_eq!(work("W9"), None);
        // W9 per case: 8 images of ResNet-18; one image's weights, pixels and logits.
        assert_eq!(work("W9:resnet18_b8").unwrap().flops, 29_025_173_504.0);
        assert_eq!(work("W9:resnet18_b1").unwrap().bytes, 4.0 * (11_684_712.0 + 150_528.0 + 1000.0));
        assert_eq!(work("W10"), None);
    }

    #[test]
    fn a_line_reports_the_fraction_of_the_peak() {
        let m = Machine {
            cpu: "a \"quoted\" CPU".into(),
            simd: "avx512",
            tiles: "avx2",
            threads: 2,
            fma_gflops: 200.0,
            copy_gbps: 20.0,
            triad_gbps: 25.0,
        };
        // W5 in 10 ms: 214.7 GFLOP/s, over the 200 of this made-up peak.
        let line = m.json_fields(work("W5"), 10_000.0);
        assert!(line.contains("\"cpu\":\"a 'quoted' CPU\",\"simd\":\"avx512\",\"tiles\":\"avx2\""), "{line}");
        assert!(line.contains("\"gflops\":214.75"), "{line}");
        assert!(line.contains("\"frac_peak_flops\":1.074"), "{line}");
        assert!(line.contains("\"gbps\":1.26,\"frac_peak_flops\""), "{line}");
        assert!(!m.json_fields(None, 10.0).contains(",\"gflops\":"), "no work, no rates");
    }

    #[test]
    fn the_fma_chains_count_their_flops_by_vector_width() {
        let lanes = match () {
            #[cfg(target_arch = "x86_64")]
            _ if std::arch::is_x86_feature_detected!("avx512f") => 16.0,
            #[cfg(target_arch = "x86_64")]
            _ if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") => 8.0,
            _ => 1.0,
        };
        assert_eq!(fma_chains(1000), 1000.0 * CHAINS as f64 * lanes * 2.0);
    }
}
