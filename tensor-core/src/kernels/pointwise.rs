//! The pointwise convolution: a 1x1 kernel with stride 1 and no padding, whose image
//! `[c, h * w]` is its own im2col columns. The output is cut into blocks, and each (image,
//! block) is one task: one GEMM with the image read in place, the block's bias, then the
//! caller's hook on the block while it is in that core's cache. Tasks run in parallel, so a
//! batch of one keeps every thread on the product and on what follows it (the hook is an
//! epilogue's activation); a single task gives its GEMM the threads.
//!
//! A block is either some output channels over the whole image, or every output channel over
//! some positions. gemm packs the part of the image a task reads, so blocks of channels each
//! pack the whole image again, while blocks of positions pack each position once (and all the
//! filters once per task). Where the image's channels outnumber the filters (a bottleneck's
//! projection, 384 -> 64), positions win; where the filters are many (an expansion, 160 ->
//! 960), channels do, and blocks of positions would also hand the epilogue one short row per
//! channel. On planes of 56x56 and larger positions win whatever the channels: a block of a
//! few hundred positions keeps its part of the image and of the output in the core's L2 cache
//! (`Blocks::of`, measured per layer of MobileNetV2).
//!
//! The blocks depend on the geometry alone, and gemm's result for an element does not depend
//! on the threads it is given, so the bits do not depend on the thread count.
//!
//! On CPUs whose tile level is AVX2 (`simd::tile_level`), a layer of filters in multiples of
//! 16 on a plane of at most 49 positions (MobileNetV2's 7x7 ones, batch 1) goes to
//! `conv_blocked` instead when its operands are finite: vectors of output channels, with no
//! lanes idle on 49 positions, and that kernel's bits (`conv_blocked::try_pointwise`); so do
//! the projections on planes of at most 14x14 where the CPU has AVX-512 (at half rate, AMD's
//! Zen 4), whose wide tiles read the image in place. Layers
//! of at most 96 input channels on planes from 14x14 up go to `pointwise_direct` there, with
//! the bits gemm gave them.

use super::channel_bias;
use super::clamp::Clamp;
use super::conv::ConvGeom;
use super::matmul::{gemm_into, gemm_into_ptr, MatRef};
use super::parallel::num_threads;
use super::shared_out::SharedOut;
use crate::math::Float;
use crate::storage::{standard, Array};
use rayon::prelude::*;

/// True for a 1x1 kernel with stride 1 and no padding.
pub(crate) fn applies(g: &ConvGeom) -> bool {
    g.kh == 1 && g.kw == 1 && g.stride == [1, 1] && g.padding == [0, 0]
}

/// Output channels per task: about an eighth of them, in multiples of 16 (gemm's register
/// blocks), from 16 to 128.
fn block_rows(o: usize) -> usize {
    (o.div_ceil(8).div_ceil(16) * 16).clamp(16, 128)
}

/// How the output of one image is cut into tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Blocks {
    /// This many output channels (the last block fewer) over the whole image.
    Channels(usize),
    /// Every output channel over this many positions (the last block fewer).
    Positions(usize),
}

/// Planes of at least this many positions (56x56) are cut into blocks of positions whatever
/// the channels: every filter over a few hundred positions keeps a task's part of the image
/// and of the output in its core's L2 cache, where blocks of channels each pack the whole
/// image and leave an output block of 0.2-0.8 MB to the epilogue.
const LARGE_PLANE: usize = 3136;

impl Blocks {
    /// On large planes ([`LARGE_PLANE`]), an even number of blocks of at most 512 positions
    /// (in multiples of 16, the last one shorter), so two threads get about equal shares.
    /// Otherwise positions where the
    /// image has at least twice as many channels as there are filters (at least 64 of them,
    /// over at least 32 positions): blocks of 256 positions on planes of 1024 or more, else
    /// halves. Channels otherwise.
    ///
    /// Measured on MobileNetV2's layers alone (`tests::timing`, best of 20, 2 threads):
    /// 144 -> 24 and 96 -> 24 at 56x56 1.5x faster by positions than by channels, 24 -> 144
    /// 1.4x, 32 -> 16 at 112x112 1.3x, 16 -> 96 1.08x; on one thread level to 1.2x faster.
    /// Unbalanced blocks (1024 positions: three and a short one on 56x56) lost 1.3-1.5x
    /// again. On 28x28 planes channels stay faster (1.1-1.4x).
    fn of(g: &ConvGeom) -> Blocks {
        let plane = g.out_plane();
        if plane >= LARGE_PLANE {
            let blocks = 2 * plane.div_ceil(1024);
            return Blocks::Positions(plane.div_ceil(blocks).next_multiple_of(16));
        }
        if g.o < 64 || g.c < 2 * g.o || plane < 32 {
            return Blocks::Channels(block_rows(g.o));
        }
        let len = if plane >= 1024 { 256 } else { plane.div_ceil(2).div_ceil(16) * 16 };
        Blocks::Positions(len)
    }
}

/// The pointwise convolution of `x` `[n, c, h, w]` with `w` `[o, c, 1, 1]`, plus `bias` `[o]`
/// if given.
#[cfg(test)]
pub(crate) fn conv2d<T: Float>(x: &Array<T>, w: &Array<T>, bias: Option<&Array<T>>, g: &ConvGeom) -> Array<T> {
    // NaN where the kernel writes nothing, so a test sees an element it skips.
    let mut out = vec![T::zero().div(T::zero()); g.n * g.o * g.out_plane()];
    conv2d_into(x, w, bias, g, &mut out, None, &|_, _| {});
    Array::from_shape_vec(ndarray::IxDyn(&[g.n, g.o, g.h, g.w]), out).expect("length matches dims")
}

/// [`conv2d`] into `out` (row-major `[n, o, h, w]`), calling `after(start, len)` as soon as
/// output elements `start..start + len` are final, on the thread that made them. With
/// `clamp` (f32 only), the outputs are clamped before `after` sees them: in registers by
/// `pointwise_direct`, by a pass over each part otherwise.
pub(crate) fn conv2d_into<T: Float>(
    x: &Array<T>,
    w: &Array<T>,
    bias: Option<&Array<T>>,
    g: &ConvGeom,
    out: &mut [T],
    clamp: Option<Clamp>,
    after: &(dyn Fn(usize, usize) + Sync),
) {
    debug_assert!(applies(g));
    let (x, w, bias) = (standard(x), standard(w), bias.map(standard));
    let (xs, ws, bs) = (slice_of(&x), slice_of(&w), bias.as_ref().map(slice_of));
    let clamped = Clamp::before(clamp, out.as_mut_ptr(), out.len(), after);
    if super::conv_blocked::try_pointwise(xs, &w, bs, g, out, &clamped) || super::pointwise_direct::try_conv2d_into(xs, ws, bs, g, out, clamp, after)
    {
        return;
    }
    by_blocks(xs, ws, bs, g, Blocks::of(g), out, &clamped);
}

/// The layer by gemm, as it ran before another kernel took it (for timings beside that one).
#[cfg(test)]
pub(super) fn by_gemm<T: Float>(xs: &[T], ws: &[T], bs: Option<&[T]>, g: &ConvGeom, out: &mut [T]) {
    by_blocks(xs, ws, bs, g, Blocks::of(g), out, &|_, _| {});
}

/// The product by `blocks`, the bias added.
fn by_blocks<T: Float>(xs: &[T], ws: &[T], bs: Option<&[T]>, g: &ConvGeom, blocks: Blocks, out: &mut [T], after: &(dyn Fn(usize, usize) + Sync)) {
    match blocks {
        Blocks::Channels(rows) => by_channels(xs, ws, bs, g, rows, out, after),
        Blocks::Positions(len) => by_positions(xs, ws, bs, g, len, out, after),
    }
}

/// Tasks of `rows` output channels over a whole image each.
fn by_channels<T: Float>(xs: &[T], ws: &[T], bs: Option<&[T]>, g: &ConvGeom, rows: usize, out: &mut [T], after: &(dyn Fn(usize, usize) + Sync)) {
    let (plane, image) = (g.out_plane(), g.c * g.h * g.w);
    // (image, first output channel, its block of the output)
    let mut tasks: Vec<(usize, usize, &mut [T])> = Vec::new();
    for (i, o) in out.chunks_mut(g.o * plane).enumerate() {
        tasks.extend(o.chunks_mut(rows * plane).enumerate().map(|(b, block)| (i, b * rows, block)));
    }
    let threads = if tasks.len() == 1 { num_threads() } else { 1 };
    let run = |(i, o0, block): (usize, usize, &mut [T])| {
        let m = block.len() / plane;
        gemm_into(MatRef::new(&ws[o0 * g.c..][..m * g.c], m, g.c), MatRef::new(&xs[i * image..][..image], g.c, plane), block, false, threads);
        if let Some(b) = bs {
            channel_bias::add(block, &b[o0..o0 + m], plane);
        }
        after((i * g.o + o0) * plane, block.len());
    };
    run_tasks(tasks, run);
}

/// Tasks of every output channel over `len` positions of one image each.
fn by_positions<T: Float>(xs: &[T], ws: &[T], bs: Option<&[T]>, g: &ConvGeom, len: usize, out: &mut [T], after: &(dyn Fn(usize, usize) + Sync)) {
    let (plane, image) = (g.out_plane(), g.c * g.h * g.w);
    assert!(out.len() >= g.n * g.o * plane, "pointwise: the output holds every image");
    let tasks: Vec<(usize, usize)> = (0..g.n).flat_map(|i| (0..plane).step_by(len).map(move |q| (i, q))).collect();
    let threads = if tasks.len() == 1 { num_threads() } else { 1 };
    let dst = SharedOut::new(out);
    let run = |(i, q): (usize, usize)| {
        let n = len.min(plane - q);
        let x = MatRef { data: &xs[i * image + q..], rows: g.c, cols: n, row_stride: plane as isize, col_stride: 1 };
        let first = (i * g.o) * plane + q;
        // SAFETY: this task alone touches positions q..q+n of image i's channels, which lie
        // inside `out` (checked above); rows are `plane` apart.
        unsafe { gemm_into_ptr(MatRef::new(ws, g.o, g.c), x, dst.at(first), plane, false, threads) };
        for oc in 0..g.o {
            let start = first + oc * plane;
            if let Some(b) = bs {
                // SAFETY: the same elements as the product's row `oc` above, this task's own.
                let row = unsafe { std::slice::from_raw_parts_mut(dst.at(start), n) };
                channel_bias::add(row, &b[oc..oc + 1], n);
            }
            after(start, n);
        }
    };
    run_tasks(tasks, run);
}

/// Runs `run` on each task, in parallel where there are several and threads to take them.
fn run_tasks<I: Send>(tasks: Vec<I>, run: impl Fn(I) + Sync + Send) {
    if tasks.len() > 1 && num_threads() > 1 {
        tasks.into_par_iter().for_each(run);
    } else {
        tasks.into_iter().for_each(run);
    }
}

fn slice_of<T>(a: &Array<T>) -> &[T] {
    a.as_slice().expect("standard layout")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_of_sixteen_up_to_an_eighth() {
        assert_eq!([16, 96, 144, 960, 1280].map(block_rows), [16, 16, 32, 128, 128]);
    }

    #[test]
    fn blocks_of_positions_on_large_planes_and_where_the_images_channels_outnumber_the_filters() {
        let g = |o, c, h, w| ConvGeom { n: 1, c, h, w, o, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        assert_eq!(Blocks::of(&g(40, 3, 1, 2)), Blocks::Channels(16));
        assert_eq!(Blocks::of(&g(64, 384, 14, 14)), Blocks::Positions(112));
        assert_eq!(Blocks::of(&g(160, 960, 7, 7)), Blocks::Positions(32));
        assert_eq!(Blocks::of(&g(64, 128, 32, 32)), Blocks::Positions(256));
        assert_eq!(Blocks::of(&g(960, 160, 7, 7)), Blocks::Channels(128), "an expansion");
        assert_eq!(Blocks::of(&g(32, 16, 28, 28)), Blocks::Channels(16), "an expansion");
        // Large planes: 26 blocks of 496 positions (the last 144), 8 of 400 (the last 336).
        assert_eq!(Blocks::of(&g(96, 16, 112, 112)), Blocks::Positions(496), "an expansion on 112x112");
        assert_eq!(Blocks::of(&g(16, 32, 112, 112)), Blocks::Positions(496));
        assert_eq!(Blocks::of(&g(24, 144, 56, 56)), Blocks::Positions(400), "a projection on 56x56");
        assert_eq!(Blocks::of(&g(32, 192, 28, 28)), Blocks::Channels(16), "32 filters");
        assert_eq!(Blocks::of(&g(64, 384, 4, 4)), Blocks::Channels(16), "16 positions");
    }

    /// Checks `conv2d` against the sum written out (small integers, so every sum is exact), and
    /// that the hook sees every element once.
    fn each_output_is_its_channels_dot_product_plus_the_bias(g: ConvGeom) {
        let (plane, c) = (g.h * g.w, g.c);
        let x: Vec<f64> = (0..g.n * c * plane).map(|i| (i % 5) as f64 - 2.0).collect();
        let w: Vec<f64> = (0..g.o * c).map(|i| (i % 7) as f64 - 3.0).collect();
        let b: Vec<f64> = (0..g.o).map(|i| i as f64).collect();
        let arr = |v: &[f64], d: &[usize]| Array::from_shape_vec(ndarray::IxDyn(d), v.to_vec()).unwrap();
        let (xd, wd) = ([g.n, c, g.h, g.w], [g.o, c, 1, 1]);
        let y = conv2d(&arr(&x, &xd), &arr(&w, &wd), Some(&arr(&b, &[g.o])), &g);
        for (n, o, p) in (0..g.n).flat_map(|n| (0..g.o).flat_map(move |o| (0..plane).map(move |p| (n, o, p)))) {
            let want: f64 = (0..c).map(|k| w[o * c + k] * x[(n * c + k) * plane + p]).sum::<f64>() + b[o];
            assert_eq!(y[[n, o, p / g.w, p % g.w]], want, "image {n} channel {o} position {p} of {g:?}");
        }
        let total = g.n * g.o * plane;
        let seen = std::sync::Mutex::new(vec![0; total]);
        let mut out = vec![0.0; total];
        conv2d_into(&arr(&x, &xd), &arr(&w, &wd), None, &g, &mut out, None, &|s, l| seen.lock().unwrap()[s..s + l].iter_mut().for_each(|v| *v += 1));
        assert_eq!(seen.into_inner().unwrap(), vec![1; total], "{g:?}");
    }

    #[test]
    fn each_output_is_its_channels_dot_product_plus_the_bias_in_blocks_of_channels() {
        // Two images at 2 positions, 40 filters: three blocks of 16, 16 and 8 channels.
        let g = ConvGeom { n: 2, c: 3, h: 1, w: 2, o: 40, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        assert_eq!(Blocks::of(&g), Blocks::Channels(16));
        each_output_is_its_channels_dot_product_plus_the_bias(g);
    }

    #[test]
    fn each_output_is_its_channels_dot_product_plus_the_bias_in_blocks_of_positions() {
        // Two images of 150 channels at 45 positions, 70 filters: blocks of 32 and 13 positions.
        let g = ConvGeom { n: 2, c: 150, h: 5, w: 9, o: 70, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        assert_eq!(Blocks::of(&g), Blocks::Positions(32));
        each_output_is_its_channels_dot_product_plus_the_bias(g);
    }

    /// Times MobileNetV2's pointwise layers on large planes by the blocks `Blocks::of` chooses
    /// (first), by blocks of channels and of positions of several lengths, interleaved, the best of 20
    /// rounds: `cargo test --release -p tensor-core --lib pointwise::tests::timing -- --ignored
    /// --nocapture` (the pool's threads; `RAYON_NUM_THREADS=1` for one).
    #[test]
    #[ignore]
    fn timing() {
        let pw = |c, hw, o| ConvGeom { n: 1, c, h: hw, w: hw, o, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        let layers = [pw(144, 56, 24), pw(96, 56, 24), pw(32, 112, 16), pw(16, 112, 96), pw(24, 56, 144), pw(192, 28, 32), pw(32, 28, 192)];
        for g in layers {
            let values = |len: usize, seed: u64| -> Vec<f32> { crate::kernels::test_values(len, seed).into_iter().map(|v| v as f32).collect() };
            let (x, w, b) = (values(g.c * g.h * g.w, 1), values(g.o * g.c, 2), values(g.o, 3));
            let mut out = vec![0.0f32; g.o * g.out_plane()];
            let mut choices = vec![Blocks::of(&g), Blocks::Channels(block_rows(g.o))];
            choices.extend([256, 512, 1024].map(Blocks::Positions));
            let mut best = vec![f64::MAX; choices.len()];
            for round in 0..20 {
                for (c, best) in choices.iter().zip(best.iter_mut()) {
                    let t = std::time::Instant::now();
                    by_blocks(&x, &w, Some(&b), &g, *c, &mut out, &|_, _| {});
                    if round > 1 {
                        *best = best.min(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
            }
            let line: Vec<String> = choices.iter().zip(best).map(|(c, t)| format!("{c:?} {t:.3}")).collect();
            println!("{} -> {} at {}x{}: {}", g.c, g.o, g.h, g.w, line.join(", "));
        }
    }

    /// MobileNetV2's 19 kinds of pointwise layer (batch 1) through the op's own path, each
    /// the best of 20 calls, with its GFLOP/s and the layer count in the model:
    /// `cargo test --release -p tensor-core --lib pointwise::tests::model_layers_timing --
    /// --ignored --nocapture` (`RAYON_NUM_THREADS=1` for one thread).
    #[test]
    #[ignore]
    fn model_layers_timing() {
        let pw = |c, hw, o| ConvGeom { n: 1, c, h: hw, w: hw, o, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        #[rustfmt::skip]
        let layers = [
            (pw(32, 112, 16), 1), (pw(16, 112, 96), 1), (pw(96, 56, 24), 1), (pw(24, 56, 144), 2), (pw(144, 56, 24), 1),
            (pw(144, 28, 32), 1), (pw(32, 28, 192), 3), (pw(192, 28, 32), 2), (pw(192, 14, 64), 1), (pw(64, 14, 384), 4),
            (pw(384, 14, 64), 3), (pw(384, 14, 96), 1), (pw(96, 14, 576), 3), (pw(576, 14, 96), 2), (pw(576, 7, 160), 1),
            (pw(160, 7, 960), 3), (pw(960, 7, 160), 2), (pw(960, 7, 320), 1), (pw(320, 7, 1280), 1),
        ];
        let values = |len: usize, seed: u64| -> Vec<f32> { crate::kernels::test_values(len, seed).into_iter().map(|v| v as f32).collect() };
        let arr = |v: Vec<f32>, d: &[usize]| Array::from_shape_vec(ndarray::IxDyn(d), v).unwrap();
        let (mut total, mut flops) = (0.0, 0.0);
        for (g, count) in layers {
            let x = arr(values(g.c * g.h * g.w, 1), &[1, g.c, g.h, g.w]);
            let (w, b) = (arr(values(g.o * g.c, 2), &[g.o, g.c, 1, 1]), arr(values(g.o, 3), &[g.o]));
            let mut out = vec![0.0f32; g.o * g.out_plane()];
            // On a worker with the others kept awake, as a graph's steps run.
            let best = crate::kernels::parallel::on_worker(|| {
                let mut best = f64::MAX;
                for round in 0..22 {
                    let t = std::time::Instant::now();
                    conv2d_into(&x, &w, Some(&b), &g, &mut out, None, &|_, _| {});
                    if round > 1 {
                        best = best.min(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
                best
            });
            let gf = 2.0 * (g.o * g.c * g.out_plane()) as f64 / 1e6;
            println!("{} -> {} at {}x{} (x{count}): {best:.4} ms, {:.0} GFLOP/s", g.c, g.o, g.h, g.w, gf / best);
            total += best * count as f64;
            flops += gf * count as f64;
        }
        println!("all: {total:.3} ms, {:.0} GFLOP/s", flops / total);
    }
}
