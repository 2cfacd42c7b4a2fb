//! softmax, log_softmax, cross_entropy, conv2d and max_pool2d against hand-computed values
//! (and, for conv2d, against a naive reference on odd strides and paddings).

use tensor_core::prelude::*;
use tensor_core::Element;
use tests::{as_f64, assert_tensor, assert_tensor_close, per_dtype, tensor, tol};

// softmax([1, 2, 3]) and log_softmax([1, 2, 3]), worked out by hand:
// lse = 3 + ln(1 + e^-1 + e^-2) = 3.4076059644443806
const SM_123: [f64; 3] = [0.09003057317038046, 0.24472847105479764, 0.6652409557748219];
const LSM_123: [f64; 3] = [-2.4076059644443806, -1.4076059644443806, -0.4076059644443806];
const THIRD: f64 = 1.0 / 3.0;
const LN3: f64 = 1.0986122886681098;

fn row_sums(t: &Tensor, axis: isize) -> Vec<f64> {
    as_f64(&t.sum_axes(&[axis], false).unwrap())
}

// ------------------------------------------------------------------------------ softmax

fn softmax_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]);
    let want = [SM_123[0], SM_123[1], SM_123[2], THIRD, THIRD, THIRD];
    let s = x.softmax(1)?;
    assert_tensor_close::<T>(&s, &[2, 3], &want, tol::<T>());
    assert_tensor_close::<T>(&x.softmax(-1)?, &[2, 3], &want, tol::<T>());
    for v in row_sums(&s, 1) {
        assert!((v - 1.0).abs() < 4.0 * tol::<T>(), "row sum {v}");
    }
    // Along axis 0: columns [1, 1], [2, 1], [3, 1].
    let e1 = 1.0 / (1.0 + (-1.0f64).exp()); // softmax([x+1, x])[0]
    let e2 = 1.0 / (1.0 + (-2.0f64).exp());
    assert_tensor_close::<T>(&x.softmax(0)?, &[2, 3], &[0.5, e1, e2, 0.5, 1.0 - e1, 1.0 - e2], tol::<T>());
    // Stable for large inputs: softmax is shift-invariant.
    let big = tensor::<T>(&[1000.0, 1001.0, 1002.0, -1000.0, 0.0, -1000.0], &[2, 3]);
    let s = big.softmax(1)?;
    assert_tensor_close::<T>(&s, &[2, 3], &[SM_123[0], SM_123[1], SM_123[2], 0.0, 1.0, 0.0], tol::<T>());
    assert!(as_f64(&s).iter().all(|v| v.is_finite()));
    // 3-d along the middle axis: each [.., :, k] sums to 1.
    let y = tensor::<T>(&(0..24).map(|i| ((i * 7) % 5) as f64 - 2.0).collect::<Vec<_>>(), &[2, 3, 4]);
    let s = y.softmax(1)?;
    for v in row_sums(&s, 1) {
        assert!((v - 1.0).abs() < 4.0 * tol::<T>(), "sum along axis 1: {v}");
    }
    // Equal values give a uniform distribution; a 1-element axis gives 1.
    assert_tensor_close::<T>(&tensor::<T>(&[5.0; 4], &[4]).softmax(0)?, &[4], &[0.25; 4], tol::<T>());
    assert_tensor::<T>(&tensor::<T>(&[5.0, -7.0], &[2, 1]).softmax(1)?, &[2, 1], &[1.0, 1.0]);
    Ok(())
}
per_dtype!(softmax_values: f32, f64);

fn log_softmax_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]);
    let want = [LSM_123[0], LSM_123[1], LSM_123[2], -LN3, -LN3, -LN3];
    assert_tensor_close::<T>(&x.log_softmax(1)?, &[2, 3], &want, 2.0 * tol::<T>());
    assert_tensor_close::<T>(&x.log_softmax(-1)?, &[2, 3], &want, 2.0 * tol::<T>());
    // exp(log_softmax) sums to 1.
    for v in row_sums(&x.log_softmax(1)?.exp()?, 1) {
        assert!((v - 1.0).abs() < 4.0 * tol::<T>());
    }
    // Stable and finite where log(softmax) would give -inf:
    // row 0: lse = 1002 + ln(1 + e^-2) (e^-1002 vanishes); row 1: lse = 1001 + ln(1 + e^-1).
    let big = tensor::<T>(&[1000.0, 0.0, 1002.0, 1001.0, 1000.0, -1000.0], &[2, 3]);
    let (sp2, sp1) = (0.12692801104297263, 0.31326168751822286); // ln(1 + e^-2), ln(1 + e^-1)
    let want = [-2.0 - sp2, -1002.0 - sp2, -sp2, -sp1, -1.0 - sp1, -2001.0 - sp1];
    assert_tensor_close::<T>(&big.log_softmax(1)?, &[2, 3], &want, 2.0 * tol::<T>());
    Ok(())
}
per_dtype!(log_softmax_values: f32, f64);

// ------------------------------------------------------------------------------ cross_entropy

fn cross_entropy_values<T: Element>() -> Result<()> {
    // Uniform logits: the loss is ln(C), whatever the labels.
    for c in [2usize, 4, 10] {
        let logits = Tensor::zeros(&[3, c], T::DTYPE);
        let labels = Tensor::from_vec(vec![0i64, (c - 1) as i64, 1], &[3])?;
        assert_tensor_close::<T>(&logits.cross_entropy(&labels)?, &[], &[(c as f64).ln()], tol::<T>());
    }
    // By hand: row 0 = [1, 2, 3] with label 2 -> -log_softmax = 0.4076..; row 1 uniform -> ln 3.
    let logits = tensor::<T>(&[1.0, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]);
    let labels = Tensor::from_vec(vec![2i64, 0], &[2])?;
    let want = (-LSM_123[2] + LN3) / 2.0;
    assert_tensor_close::<T>(&logits.cross_entropy(&labels)?, &[], &[want], 2.0 * tol::<T>());
    // i32 labels give the same.
    let labels32 = Tensor::from_vec(vec![2i32, 0], &[2])?;
    assert_tensor_close::<T>(&logits.cross_entropy(&labels32)?, &[], &[want], 2.0 * tol::<T>());
    // Label 0 of row [1, 2, 3]: -(1 - lse) = 2.4076..
    let one = tensor::<T>(&[1.0, 2.0, 3.0], &[1, 3]);
    let l0 = Tensor::from_vec(vec![0i64], &[1])?;
    assert_tensor_close::<T>(&one.cross_entropy(&l0)?, &[], &[-LSM_123[0]], 2.0 * tol::<T>());
    // Large logits stay finite and exact.
    let big = tensor::<T>(&[1000.0, 0.0], &[1, 2]);
    assert_tensor_close::<T>(&big.cross_entropy(&Tensor::from_vec(vec![1i64], &[1])?)?, &[], &[1000.0], tol::<T>());
    assert_tensor_close::<T>(&big.cross_entropy(&Tensor::from_vec(vec![0i64], &[1])?)?, &[], &[0.0], tol::<T>());
    // It equals the mean of -log_softmax at the labels (gather formulation).
    let x = tensor::<T>(&[0.5, -1.0, 2.0, 0.0, 3.0, 1.0, -2.0, 0.25], &[2, 4]);
    let lab = Tensor::from_vec(vec![3i64, 1], &[2])?;
    let picked = x.log_softmax(1)?.gather(1, &lab.reshape([2, 1])?)?;
    let want = -as_f64(&picked).iter().sum::<f64>() / 2.0;
    assert_tensor_close::<T>(&x.cross_entropy(&lab)?, &[], &[want], 4.0 * tol::<T>());
    Ok(())
}
per_dtype!(cross_entropy_values: f32, f64);

// ------------------------------------------------------------------------------ conv2d

fn conv2d_hand_computed<T: Element>() -> Result<()> {
    // 1x1x3x3 input, 2x2 kernel.
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], &[1, 1, 3, 3]);
    let w = tensor::<T>(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]);
    // out[0][0] = 1*1 + 2*2 + 4*3 + 5*4 = 37, then 47, 67, 77.
    assert_tensor::<T>(&x.conv2d(&w, None, [1, 1], [0, 0])?, &[1, 1, 2, 2], &[37.0, 47.0, 67.0, 77.0]);
    let b = tensor::<T>(&[0.5], &[1]);
    assert_tensor::<T>(&x.conv2d(&w, Some(&b), [1, 1], [0, 0])?, &[1, 1, 2, 2], &[37.5, 47.5, 67.5, 77.5]);
    // Stride 2 over the input padded by 1 (5x5): windows at padded (0,0), (0,2), (2,0), (2,2).
    // (0,0) sees only x[0][0] under w[1][1]: 4; (0,2) sees x[0][1..3] under w[1][..]: 3*2 + 4*3 = 18;
    // (2,0) sees x[1..3][0] under w[..][1]: 2*4 + 4*7 = 36; (2,2) sees x[1..3][1..3]: 77.
    assert_tensor::<T>(&x.conv2d(&w, None, [2, 2], [1, 1])?, &[1, 1, 2, 2], &[4.0, 18.0, 36.0, 77.0]);
    // Stride 1 with padding 1: a 4x4 output; check the corners and one inner value.
    let y = x.conv2d(&w, Some(&b), [1, 1], [1, 1])?;
    assert_eq!(y.dims(), vec![1, 1, 4, 4]);
    let v = as_f64(&y);
    assert_eq!([v[0], v[3], v[12], v[15], v[5]], [4.5, 3.0 * 3.0 + 0.5, 2.0 * 7.0 + 0.5, 9.5, 37.5]);
    // Stride only along the width, padding only along the height.
    let z = x.conv2d(&w, None, [1, 2], [1, 0])?; // padded 5x3 -> 4 x 1
    assert_tensor::<T>(&z, &[1, 1, 4, 1], &[3.0 * 1.0 + 4.0 * 2.0, 37.0, 67.0, 7.0 + 2.0 * 8.0]);
    Ok(())
}
per_dtype!(conv2d_hand_computed: f32, f64);

// Pads reaching past the input (PyTorch accepts any padding): a 1x1 image under a 5x5
// kernel padded by 2 sees only the kernel's centre; a width of 1 padded by 3 under a width-3
// kernel gives [0, w2 x, w1 x, w0 x, 0]. im2col once indexed below the row here.
fn conv2d_padding_past_the_input<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[2.0], &[1, 1, 1, 1]);
    let w = tensor::<T>(&(0..25).map(f64::from).collect::<Vec<_>>(), &[1, 1, 5, 5]);
    assert_tensor::<T>(&x.conv2d(&w, None, [1, 1], [2, 2])?, &[1, 1, 1, 1], &[24.0]);
    let w3 = tensor::<T>(&[1.0, 2.0, 3.0], &[1, 1, 1, 3]);
    assert_tensor::<T>(&x.conv2d(&w3, None, [1, 1], [0, 3])?, &[1, 1, 1, 5], &[0.0, 6.0, 4.0, 2.0, 0.0]);
    // Stride 2, pad 2, kernel 4 over a width of 1: [0, 0, x, 0, 0], one window, tap 2 on x.
    let w4 = tensor::<T>(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 1, 4]);
    assert_tensor::<T>(&x.conv2d(&w4, None, [1, 2], [0, 2])?, &[1, 1, 1, 1], &[6.0]);
    Ok(())
}
per_dtype!(conv2d_padding_past_the_input: f32, f64);

#[test]
fn conv2d_padding_past_the_input_in_a_graph_and_backward() -> Result<()> {
    use tensor_core::function::ConcreteFunction;
    let x = Tensor::randn(&[2, 3, 1, 2], DType::F32, 3).requires_grad_(true)?;
    let w = Tensor::randn(&[4, 3, 5, 5], DType::F32, 4);
    let eager = x.conv2d(&w, None, [1, 2], [2, 3])?;
    let f = ConcreteFunction::trace("conv_past", &[("x", &x)], || Ok(vec![x.conv2d(&w, None, [1, 2], [2, 3])?]))?;
    let graph = f.call(&[&x])?;
    assert_eq!(eager.to_vec::<f32>()?, graph[0].to_vec::<f32>()?);
    // The input gradient (col2im over the same geometry) through both.
    let g = tensor_core::grad(&[&eager.sum()?], &[&x], false)?;
    let ge = tensor_core::grad(&[&graph[0].sum()?], &[&x], false)?;
    assert_eq!(g[0].to_vec::<f32>()?, ge[0].to_vec::<f32>()?);
    Ok(())
}

fn conv2d_channels_and_batch<T: Element>() -> Result<()> {
    // n = 2, c = 2, 2x2 images; o = 2 output channels with 1x1 kernels and a bias.
    let x = tensor::<T>(
        &[
            1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0, // sample 0: ch0, ch1
            0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, // sample 1
        ],
        &[2, 2, 2, 2],
    );
    let w = tensor::<T>(&[1.0, 0.5, -1.0, 0.0], &[2, 2, 1, 1]);
    let b = tensor::<T>(&[1.0, -1.0], &[2]);
    // out0 = ch0 + ch1 / 2 + 1; out1 = -ch0 - 1.
    let want = [7.0, 13.0, 19.0, 25.0, -2.0, -3.0, -4.0, -5.0, 1.5, 1.0, 1.0, 2.0, -1.0, -1.0, -1.0, -2.0];
    assert_tensor::<T>(&x.conv2d(&w, Some(&b), [1, 1], [0, 0])?, &[2, 2, 2, 2], &want);
    // A 2x2 kernel summing both channels: one value per sample and output channel.
    let ones = Tensor::ones(&[1, 2, 2, 2], T::DTYPE);
    assert_tensor::<T>(&x.conv2d(&ones, None, [1, 1], [0, 0])?, &[2, 1, 1, 1], &[110.0, 2.0]);
    Ok(())
}
per_dtype!(conv2d_channels_and_batch: f32, f64);

/// A naive conv2d over row-major NCHW / OIHW data.
#[allow(clippy::too_many_arguments)]
fn naive_conv(x: &[f64], xd: [usize; 4], w: &[f64], wd: [usize; 4], bias: &[f64], stride: [usize; 2], pad: [usize; 2]) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, wi] = xd;
    let [o, _, kh, kw] = wd;
    let oh = (h + 2 * pad[0] - kh) / stride[0] + 1;
    let ow = (wi + 2 * pad[1] - kw) / stride[1] + 1;
    let mut out = vec![0.0; n * o * oh * ow];
    for b in 0..n {
        for oc in 0..o {
            for i in 0..oh {
                for j in 0..ow {
                    let mut s = bias[oc];
                    for ic in 0..c {
                        for p in 0..kh {
                            for q in 0..kw {
                                let (r, col) = ((i * stride[0] + p) as isize - pad[0] as isize, (j * stride[1] + q) as isize - pad[1] as isize);
                                if r >= 0 && col >= 0 && (r as usize) < h && (col as usize) < wi {
                                    s += x[((b * c + ic) * h + r as usize) * wi + col as usize] * w[((oc * c + ic) * kh + p) * kw + q];
                                }
                            }
                        }
                    }
                    out[((b * o + oc) * oh + i) * ow + j] = s;
                }
            }
        }
    }
    (out, [n, o, oh, ow])
}

type ConvCase = ([usize; 4], [usize; 4], [usize; 2], [usize; 2]);

#[test]
fn conv2d_matches_naive_reference() -> Result<()> {
    // (input dims, weight dims, stride, padding)
    let cases: [ConvCase; 4] = [
        ([2, 3, 7, 6], [4, 3, 3, 2], [2, 1], [1, 2]),
        ([1, 2, 5, 5], [3, 2, 5, 5], [1, 1], [0, 0]),
        ([3, 1, 8, 9], [2, 1, 3, 3], [3, 2], [2, 1]),
        ([1, 4, 6, 4], [5, 4, 1, 1], [2, 2], [0, 1]),
    ];
    for (xd, wd, stride, pad) in cases {
        let xn: usize = xd.iter().product();
        let wn: usize = wd.iter().product();
        let x: Vec<f64> = (0..xn).map(|i| ((i * 13 + 5) % 17) as f64 - 8.0).collect();
        let w: Vec<f64> = (0..wn).map(|i| ((i * 7 + 2) % 9) as f64 - 4.0).collect();
        let bias: Vec<f64> = (0..wd[0]).map(|i| i as f64 - 1.0).collect();
        let (want, od) = naive_conv(&x, xd, &w, wd, &bias, stride, pad);
        for dt in [DType::F32, DType::F64] {
            let t = |v: &[f64], d: &[usize]| Tensor::from_vec(v.to_vec(), d).unwrap().cast(dt).unwrap();
            let got = t(&x, &xd).conv2d(&t(&w, &wd), Some(&t(&bias, &[wd[0]])), stride, pad)?;
            assert_eq!(got.dims(), od.to_vec(), "{xd:?} * {wd:?} stride {stride:?} pad {pad:?}");
            // Small integers: exact in both dtypes.
            assert_eq!(as_f64(&got), want, "{xd:?} * {wd:?} stride {stride:?} pad {pad:?} ({dt})");
        }
    }
    Ok(())
}

/// Each case's convolution (bias, smooth values below 1 in magnitude) close to the naive sum
/// in f32 and f64, and a traced graph of it (with a ReLU after) giving eager's bits.
fn matches_the_naive_reference_and_the_graph(cases: &[ConvCase]) -> Result<()> {
    use tensor_core::function::ConcreteFunction;
    for &(xd, wd, stride, pad) in cases {
        let xn: usize = xd.iter().product();
        let wn: usize = wd.iter().product();
        let x: Vec<f64> = (0..xn).map(|i| (((i * 7919) % 2003) as f64 / 1001.0) - 1.0).collect();
        let w: Vec<f64> = (0..wn).map(|i| (((i * 104729) % 1009) as f64 / 504.0) - 1.0).collect();
        let bias: Vec<f64> = (0..wd[0]).map(|i| i as f64 * 0.25 - 1.0).collect();
        let (want, od) = naive_conv(&x, xd, &w, wd, &bias, stride, pad);
        // Outputs are sums of c*kh*kw products of magnitude below 1: scale the tolerance by that.
        let scale = (wd[1] * wd[2] * wd[3]) as f64;
        for (dt, rel) in [(DType::F32, 1e-6), (DType::F64, 1e-14)] {
            let t = |v: &[f64], d: &[usize]| Tensor::from_vec(v.to_vec(), d).unwrap().cast(dt).unwrap();
            let (xt, wt, bt) = (t(&x, &xd), t(&w, &wd), t(&bias, &[wd[0]]));
            let got = xt.conv2d(&wt, Some(&bt), stride, pad)?;
            assert_eq!(got.dims(), od.to_vec());
            let err = as_f64(&got).iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(err <= rel * scale, "{xd:?} * {wd:?} ({dt}): max error {err:e}");
            let f = ConcreteFunction::trace("conv", &[("x", &xt)], || Ok(vec![xt.conv2d(&wt, Some(&bt), stride, pad)?.relu()?]))?;
            let bits = |t: &Tensor| as_f64(t).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&f.call(&[&xt])?[0]), bits(&got.relu()?), "{xd:?} * {wd:?} ({dt}): graph vs eager bits");
        }
    }
    Ok(())
}

/// 3x3 stride-1 convolutions with 64 or more channels and enough tiles run by Winograd F(4x4, 3x3)
/// (kernels/winograd.rs): close to the naive sum in both dtypes, the same bits eagerly and as
/// a graph, and infinities (which the transforms would turn into NaN) as the direct sum has
/// them.
#[test]
fn conv2d_winograd_shapes_match_the_naive_reference_and_the_graph() -> Result<()> {
    // Odd sizes that cut tiles at the edges, padding 1 and 0, batch 4 and 1, channel counts
    // that are multiples of nothing.
    // (Winograd needs 64 channels and 128 tiles of 4x4 outputs.)
    let cases: [ConvCase; 2] = [([4, 67, 19, 29], [65, 67, 3, 3], [1, 1], [1, 1]), ([1, 64, 45, 47], [66, 64, 3, 3], [1, 1], [0, 0])];
    matches_the_naive_reference_and_the_graph(&cases)?;
    // An infinite input: the transforms would give NaN (inf - inf); the direct sum gives
    // inf wherever the window holds it with a positive weight and none with a negative one.
    let mut x = vec![0.0f32; 8 * 64 * 16 * 16];
    x[3 * 16 + 3] = f32::INFINITY; // image 0, channel 0, row 3, column 3
    let x = Tensor::from_vec(x, &[8, 64, 16, 16])?;
    let w = Tensor::ones(&[64, 64, 3, 3], DType::F32);
    let y = x.conv2d(&w, None, [1, 1], [1, 1])?.to_vec::<f32>()?;
    for (i, v) in y[..256].iter().enumerate() {
        let (r, c) = (i / 16, i % 16);
        let sees = (2..=4).contains(&r) && (2..=4).contains(&c);
        assert_eq!(*v, if sees { f32::INFINITY } else { 0.0 }, "row {r} column {c}");
    }
    Ok(())
}

/// ResNet's 3x3 layers on small planes with long patches, its stride-2 3x3 layer to 7x7 and
/// its 7x7/2 stem (batch 1), run by the direct kernel on CPUs with AVX-512
/// (kernels/conv_direct_large.rs; by Winograd or im2col elsewhere): close to the naive sum
/// in both dtypes, the same bits eagerly and as a graph; a NaN input gives NaN where its
/// windows reach (the image is redone by im2col) and an infinite one infinity.
#[test]
fn conv2d_direct_large_shapes_match_the_naive_reference_and_the_graph() -> Result<()> {
    let cases: [ConvCase; 4] = [
        ([1, 64, 7, 9], [13, 64, 3, 3], [1, 1], [1, 1]),
        ([3, 60, 5, 6], [7, 60, 3, 3], [1, 1], [1, 1]),
        ([1, 60, 13, 14], [9, 60, 3, 3], [2, 2], [1, 1]),
        ([1, 3, 30, 31], [8, 3, 7, 7], [2, 2], [3, 3]),
    ];
    matches_the_naive_reference_and_the_graph(&cases)?;
    // One NaN and one infinity in channel 0 of a 7x7 image, all weights one: NaN in the
    // outputs whose window holds the NaN, infinity in those holding only the infinity.
    let mut x = vec![0.0f32; 64 * 49];
    x[7 + 1] = f32::NAN; // row 1, column 1
    x[5 * 7 + 5] = f32::INFINITY; // row 5, column 5
    let x = Tensor::from_vec(x, &[1, 64, 7, 7])?;
    let w = Tensor::ones(&[8, 64, 3, 3], DType::F32);
    let y = x.conv2d(&w, None, [1, 1], [1, 1])?.to_vec::<f32>()?;
    for (i, v) in y[..49].iter().enumerate() {
        let (r, c) = (i / 7, i % 7);
        let near = |at: usize| r.abs_diff(at) <= 1 && c.abs_diff(at) <= 1;
        match (near(1), near(5)) {
            (true, _) => assert!(v.is_nan(), "row {r} column {c}: {v}"),
            (false, true) => assert_eq!(*v, f32::INFINITY, "row {r} column {c}"),
            (false, false) => assert_eq!(*v, 0.0, "row {r} column {c}"),
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------ max_pool2d

fn max_pool_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&(0..16).map(f64::from).collect::<Vec<_>>(), &[1, 1, 4, 4]);
    assert_tensor::<T>(&x.max_pool2d([2, 2], [2, 2])?, &[1, 1, 2, 2], &[5.0, 7.0, 13.0, 15.0]);
    assert_tensor::<T>(&x.max_pool2d([3, 3], [1, 1])?, &[1, 1, 2, 2], &[10.0, 11.0, 14.0, 15.0]);
    assert_tensor::<T>(&x.max_pool2d([1, 2], [1, 2])?, &[1, 1, 4, 2], &[1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0]);
    assert_tensor::<T>(&x.max_pool2d([2, 1], [2, 1])?, &[1, 1, 2, 4], &[4.0, 5.0, 6.0, 7.0, 12.0, 13.0, 14.0, 15.0]);
    // A window that does not tile the input: the remainder is dropped (floor), as in PyTorch.
    assert_tensor::<T>(&x.max_pool2d([3, 3], [3, 3])?, &[1, 1, 1, 1], &[10.0]);
    // Overlapping windows (kernel 2, stride 1).
    assert_tensor::<T>(&x.max_pool2d([2, 2], [1, 1])?, &[1, 1, 3, 3], &[5.0, 6.0, 7.0, 9.0, 10.0, 11.0, 13.0, 14.0, 15.0]);
    // All-negative input: the maximum is negative, not a padding zero.
    let neg = x.neg()?;
    assert_tensor::<T>(&neg.max_pool2d([2, 2], [2, 2])?, &[1, 1, 2, 2], &[0.0, -2.0, -8.0, -10.0]);
    // Batch and channels pool independently.
    let y = tensor::<T>(&[1.0, 9.0, 3.0, 4.0, -1.0, -2.0, -3.0, -4.0, 0.0, 0.0, 0.0, 7.0, 5.0, 5.0, 6.0, 5.0], &[2, 2, 2, 2]);
    assert_tensor::<T>(&y.max_pool2d([2, 2], [2, 2])?, &[2, 2, 1, 1], &[9.0, -1.0, 7.0, 6.0]);
    Ok(())
}
per_dtype!(max_pool_values: f32, f64);

/// Padding is taps no maximum is taken from (`-inf`), never zeros: on the negated 0..16 plane
/// a zero pad would win every border window.
fn padded_max_pool_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&(0..16).map(|v| -f64::from(v)).collect::<Vec<_>>(), &[1, 1, 4, 4]);
    // ResNet's pool: 3x3, stride 2, padding 1; windows start at rows/columns -1 and 1, so the
    // maxima are the windows' top-left in-bounds values: x[0][0], x[0][1], x[1][0], x[1][1].
    assert_tensor::<T>(&x.max_pool2d_padded([3, 3], [2, 2], [1, 1])?, &[1, 1, 2, 2], &[0.0, -1.0, -4.0, -5.0]);
    // Padding along the width only, 2x2 stride 2: windows over columns -1..1 and 1..3 and 3..5.
    assert_tensor::<T>(&x.max_pool2d_padded([2, 2], [2, 2], [0, 1])?, &[1, 1, 2, 3], &[0.0, -1.0, -3.0, -8.0, -9.0, -11.0]);
    // The padding as wide as the kernel: the corner windows hold one value each.
    assert_tensor::<T>(&x.max_pool2d_padded([2, 2], [3, 3], [1, 1])?, &[1, 1, 2, 2], &[0.0, -2.0, -8.0, -10.0]);
    // A window wholly in the padding gives -inf.
    let y = x.max_pool2d_padded([1, 1], [4, 4], [2, 2])?;
    assert_eq!(y.dims(), vec![1, 1, 2, 2]);
    assert_tensor::<T>(&y, &[1, 1, 2, 2], &[f64::NEG_INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY, -10.0]);
    // The shape rule counts the padding, and a window larger than the padded input is an error.
    let e = x.max_pool2d_padded([7, 7], [1, 1], [1, 1]).unwrap_err().to_string();
    assert!(e.contains("max_pool2d") && e.contains("larger than the padded input 6"), "{e}");
    Ok(())
}
per_dtype!(padded_max_pool_values: f32, f64);
