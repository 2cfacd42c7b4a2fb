//! The depthwise convolution (`conv2d_depthwise`, and `conv2d_grouped` / `conv2d_dilated`
//! with one group per channel, which run it): hand-computed values, the per-group
//! composition it replaces on random data, its errors, and graph == eager bit for bit with
//! a bias and a clamp fused after it. (Its gradients are checked against finite differences
//! in autograd's gradcheck.)

use tensor_core::function::ConcreteFunction;
use tensor_core::graph::NodeKind;
use tensor_core::ops::{ConvOp, Op};
use tensor_core::prelude::*;
use tensor_core::Element;
use tests::{as_f64, assert_bits_eq, assert_tensor, per_dtype, tensor};

fn laplacian<T: Element>() -> Tensor {
    tensor::<T>(&[0.0, 1.0, 0.0, 1.0, -4.0, 1.0, 0.0, 1.0, 0.0], &[1, 1, 3, 3])
}

fn one_channel_by_hand<T: Element>() -> Result<()> {
    // x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]] with zero padding 1, by the Laplacian: up + down
    // + left + right - 4 * centre. Corner (0, 0): 4 + 2 - 4 = 2; centre: 2 + 8 + 4 + 6 - 20 = 0.
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], &[1, 1, 3, 3]);
    let b = tensor::<T>(&[0.5], &[1]);
    let y = x.conv2d_depthwise(&laplacian::<T>(), Some(&b), [1, 1], [1, 1], [1, 1])?;
    assert_tensor::<T>(&y, &[1, 1, 3, 3], &[2.5, 1.5, -3.5, -2.5, 0.5, -6.5, -15.5, -10.5, -21.5]);
    // Stride 2 keeps the corners.
    let y = x.conv2d_depthwise(&laplacian::<T>(), None, [2, 2], [1, 1], [1, 1])?;
    assert_tensor::<T>(&y, &[1, 1, 2, 2], &[2.0, -4.0, -16.0, -22.0]);
    // Dilation 2 with padding 2: the taps land on the corners' neighbours two apart.
    // Centre (1, 1): x[1][-1] + x[1][3] (padding) + x[-1][1] + x[3][1] (padding) - 4 * 5.
    let y = x.conv2d_depthwise(&laplacian::<T>(), None, [1, 1], [2, 2], [2, 2])?;
    let corner = 3.0 + 7.0 - 4.0; // (0, 0): right x[0][2], down x[2][0]
    assert_eq!(y.dims(), vec![1, 1, 3, 3]);
    assert_eq!(as_f64(&y)[0], corner);
    assert_eq!(as_f64(&y)[4], -20.0);
    Ok(())
}
per_dtype!(one_channel_by_hand: f32, f64);

fn grouped_with_a_group_per_channel_is_depthwise<T: Element>() -> Result<()> {
    // Channel 0 summed by a 1x2 window, channel 1 differenced, two filters for channel 1
    // below (channel multiplier 2).
    let x = tensor::<T>(&[1.0, 2.0, 4.0, 10.0, 20.0, 40.0], &[1, 2, 1, 3]);
    let w = tensor::<T>(&[1.0, 1.0, 1.0, -1.0], &[2, 1, 1, 2]);
    let b = tensor::<T>(&[0.0, 100.0], &[2]);
    assert_tensor::<T>(&x.conv2d_grouped(&w, Some(&b), [1, 1], [0, 0], 2)?, &[1, 2, 1, 2], &[3.0, 6.0, 90.0, 80.0]);
    let w2 = tensor::<T>(&[1.0, 1.0, 2.0, 0.0, 1.0, -1.0, 0.0, 3.0], &[4, 1, 1, 2]);
    let y = x.conv2d_grouped(&w2, None, [1, 2], [0, 1], 2)?;
    // Padded rows [0, 1, 2, 4, 0] and [0, 10, 20, 40, 0], windows at columns 0 and 2.
    assert_tensor::<T>(&y, &[1, 4, 1, 2], &[1.0, 6.0, 0.0, 4.0, -10.0, -20.0, 30.0, 120.0]);
    Ok(())
}
per_dtype!(grouped_with_a_group_per_channel_is_depthwise: f32, f64);

/// The grouped convolution one group at a time: what `conv2d_grouped` ran before the
/// depthwise kernel.
fn per_group(x: &Tensor, w: &Tensor, b: &Tensor, stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2]) -> Result<Tensor> {
    let c = x.shape().dims()[1];
    let m = w.shape().dims()[0] / c;
    let outs: Vec<Tensor> = (0..c)
        .map(|i| {
            let (xi, wi, bi) = (x.narrow(1, i, 1)?, w.narrow(0, i * m, m)?, b.narrow(0, i * m, m)?);
            xi.conv2d_dilated(&wi, Some(&bi), stride, padding, dilation, 1)
        })
        .collect::<Result<_>>()?;
    Tensor::concat(&outs.iter().collect::<Vec<_>>(), 1)
}

/// Input dims, weight dims, stride, padding, dilation.
type Case = (&'static [usize], [usize; 4], [usize; 2], [usize; 2], [usize; 2]);

#[test]
fn random_data_matches_the_per_group_composition() -> Result<()> {
    // MobileNetV2's two kinds (3x3, stride 1 and 2, padding 1) and odd ones: a dilation, a
    // channel multiplier, a wide kernel, no padding.
    let cases: [Case; 6] = [
        (&[2, 8, 14, 14], [8, 1, 3, 3], [1, 1], [1, 1], [1, 1]),
        (&[1, 16, 15, 15], [16, 1, 3, 3], [2, 2], [1, 1], [1, 1]),
        (&[2, 5, 9, 11], [5, 1, 3, 3], [1, 2], [2, 1], [2, 3]),
        (&[1, 3, 7, 8], [6, 1, 2, 3], [2, 1], [0, 1], [1, 1]),
        (&[1, 4, 6, 40], [4, 1, 1, 5], [1, 3], [0, 2], [1, 1]),
        (&[3, 2, 5, 5], [2, 1, 5, 5], [1, 1], [0, 0], [1, 1]),
    ];
    for dtype in [DType::F32, DType::F64] {
        for (k, (xd, wd, stride, padding, dilation)) in cases.iter().enumerate() {
            let seed = 100 + 3 * k as u64;
            let x = Tensor::randn(xd, dtype, seed);
            let w = Tensor::randn(wd, dtype, seed + 1);
            let b = Tensor::randn(&[wd[0]], dtype, seed + 2);
            let direct = x.conv2d_dilated(&w, Some(&b), *stride, *padding, *dilation, xd[1])?;
            let want = per_group(&x, &w, &b, *stride, *padding, *dilation)?;
            assert_eq!(direct.dims(), want.dims(), "case {k}");
            let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
            for (i, (a, e)) in as_f64(&direct).iter().zip(as_f64(&want)).enumerate() {
                assert!((a - e).abs() <= tol * (1.0 + e.abs()), "case {k} {dtype:?} element {i}: {a} vs {e}");
            }
        }
    }
    Ok(())
}

#[test]
fn bad_arguments_are_errors_that_say_what_to_fix() {
    let x = Tensor::ones(&[1, 4, 5, 5], DType::F32);
    let w = Tensor::ones(&[4, 1, 3, 3], DType::F32);
    let msg = |r: Result<Tensor>| r.expect_err("an error").to_string();
    assert!(msg(x.conv2d_depthwise(&Tensor::ones(&[6, 1, 3, 3], DType::F32), None, [1, 1], [0, 0], [1, 1])).contains("[c * m, 1, kh, kw]"));
    assert!(msg(x.conv2d_depthwise(&Tensor::ones(&[4, 2, 3, 3], DType::F32), None, [1, 1], [0, 0], [1, 1])).contains("[c * m, 1, kh, kw]"));
    assert!(msg(x.conv2d_depthwise(&w, None, [0, 1], [0, 0], [1, 1])).contains("stride"));
    assert!(msg(x.conv2d_depthwise(&w, None, [1, 1], [0, 0], [1, 0])).contains("dilation"));
    assert!(msg(x.conv2d_depthwise(&w, None, [1, 1], [0, 0], [3, 3])).contains("larger than the padded input"));
    assert!(msg(x.conv2d_depthwise(&w, Some(&Tensor::ones(&[3], DType::F32)), [1, 1], [0, 0], [1, 1])).contains("bias"));
    assert!(msg(x.conv2d_depthwise(&Tensor::ones(&[4, 1, 3, 3], DType::F64), None, [1, 1], [0, 0], [1, 1])).contains("f64"));
    assert!(msg(x.conv2d_depthwise(&w, None, [1, 1], [usize::MAX / 2, 0], [1, 1])).contains("out of range"));
}

/// A MobileNetV2 block's depthwise layer: conv + bias, clamped to [0, 6].
fn block(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Vec<Tensor>> {
    let s1 = x.conv2d_grouped(w, Some(b), [1, 1], [1, 1], 6)?.clamp(0.0, 6.0)?;
    let s2 = x.conv2d_grouped(w, Some(b), [2, 2], [1, 1], 6)?.clamp(0.0, 6.0)?;
    Ok(vec![s1, s2])
}

#[test]
fn in_a_graph_it_is_one_epilogue_with_eagers_bits() -> Result<()> {
    let x = Tensor::randn(&[2, 6, 23, 17], DType::F32, 1).mul(3.0)?;
    let (w, b) = (Tensor::randn(&[6, 1, 3, 3], DType::F32, 2), Tensor::randn(&[6], DType::F32, 3));
    let eager = no_grad(|| block(&x, &w, &b))?;
    let f = no_grad(|| ConcreteFunction::trace("dw", &[("x", &x)], || block(&x, &w, &b)))?;
    let graph = f.call(&[&x])?;
    for (e, g) in eager.iter().zip(&graph) {
        assert_bits_eq(e, g);
    }
    let g = f.graph();
    let anchors = g.nodes.iter().filter(|n| matches!(&n.kind, NodeKind::Epilogue(e) if matches!(e.anchor, Op::Conv(ConvOp::Depthwise2d { .. }))));
    assert_eq!(anchors.count(), 2, "{}", g.to_text());
    // The clamp did its work: values in [0, 6], some at each end.
    let v = as_f64(&graph[0]);
    assert!(v.iter().all(|&v| (0.0..=6.0).contains(&v)) && v.contains(&0.0) && v.contains(&6.0));
    Ok(())
}
