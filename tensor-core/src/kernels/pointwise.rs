//! The pointwise convolution: a 1x1 kernel with stride 1 and no padding, whose image
//! `[c, h * w]` is its own im2col columns. The output channels are cut into blocks, and each
//! (image, block) is one task: one GEMM of the block's filters with the image read in place,
//! the block's bias, then the caller's hook on the block while it is in that core's cache.
//! Tasks run in parallel, so a batch of one keeps every thread on the product and on what
//! follows it (the hook is an epilogue's activation); a single task gives its GEMM the threads.
//!
//! The blocks depend on the geometry alone, and gemm's result for an element does not depend
//! on the threads it is given, so the bits do not depend on the thread count.

use super::channel_bias;
use super::conv::ConvGeom;
use super::matmul::{gemm_into, MatRef};
use super::parallel::num_threads;
use crate::math::Float;
use crate::storage::{standard, Array};
use ndarray::IxDyn;
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

/// The pointwise convolution of `x` `[n, c, h, w]` with `w` `[o, c, 1, 1]`, plus `bias` `[o]`
/// if given.
pub(crate) fn conv2d<T: Float>(x: &Array<T>, w: &Array<T>, bias: Option<&Array<T>>, g: &ConvGeom) -> Array<T> {
    let mut out = vec![T::zero(); g.n * g.o * g.out_plane()];
    conv2d_into(x, w, bias, g, &mut out, &|_, _| {});
    Array::from_shape_vec(IxDyn(&[g.n, g.o, g.h, g.w]), out).expect("length matches dims")
}

/// [`conv2d`] into `out` (row-major `[n, o, h, w]`), calling `after(start, len)` as soon as
/// output elements `start..start + len` are final, on the thread that made them.
pub(crate) fn conv2d_into<T: Float>(
    x: &Array<T>,
    w: &Array<T>,
    bias: Option<&Array<T>>,
    g: &ConvGeom,
    out: &mut [T],
    after: &(dyn Fn(usize, usize) + Sync),
) {
    debug_assert!(applies(g));
    let (x, w, bias) = (standard(x), standard(w), bias.map(standard));
    let (xs, ws, bs) = (slice_of(&x), slice_of(&w), bias.as_ref().map(slice_of));
    let (plane, image, rows) = (g.out_plane(), g.c * g.h * g.w, block_rows(g.o));
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
    fn each_output_is_its_channels_dot_product_plus_the_bias() {
        // Two images of 3 channels at 2 positions, 40 filters (three blocks of 16, 16 and 8):
        // small integers, so every sum is exact.
        let g = ConvGeom { n: 2, c: 3, h: 1, w: 2, o: 40, kh: 1, kw: 1, stride: [1, 1], padding: [0, 0] };
        let x: Vec<f64> = (0..12).map(|i| (i % 5) as f64 - 2.0).collect();
        let w: Vec<f64> = (0..120).map(|i| (i % 7) as f64 - 3.0).collect();
        let b: Vec<f64> = (0..40).map(|i| i as f64).collect();
        let arr = |v: &[f64], d: &[usize]| Array::from_shape_vec(IxDyn(d), v.to_vec()).unwrap();
        let y = conv2d(&arr(&x, &[2, 3, 1, 2]), &arr(&w, &[40, 3, 1, 1]), Some(&arr(&b, &[40])), &g);
        for (n, o, p) in (0..2).flat_map(|n| (0..40).flat_map(move |o| (0..2).map(move |p| (n, o, p)))) {
            let want: f64 = (0..3).map(|c| w[o * 3 + c] * x[(n * 3 + c) * 2 + p]).sum::<f64>() + b[o];
            assert_eq!(y[[n, o, 0, p]], want, "image {n} channel {o} position {p}");
        }
        // The hook sees every element once, in blocks.
        let seen = std::sync::Mutex::new(vec![0; 160]);
        let mut out = vec![0.0; 160];
        conv2d_into(&arr(&x, &[2, 3, 1, 2]), &arr(&w, &[40, 3, 1, 1]), None, &g, &mut out, &|s, l| {
            seen.lock().unwrap()[s..s + l].iter_mut().for_each(|v| *v += 1)
        });
        assert_eq!(seen.into_inner().unwrap(), vec![1; 160]);
    }
}
