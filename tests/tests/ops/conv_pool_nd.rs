//! Dilated and 3-d convolutions and the N-d max, average and Lp pools against hand-computed
//! values (and a direct loop for the 3-d convolution), their argument errors, and all of
//! them traced into a graph, which must match eager bit for bit, gradients included.

use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;
use tensor_core::Element;
use tests::{as_f64, assert_bits_eq, assert_tensor, assert_tensor_close, per_dtype, tensor, tol};

fn range<T: Element>(n: usize, dims: &[usize]) -> Tensor {
    tensor::<T>(&(0..n).map(|v| v as f64).collect::<Vec<_>>(), dims)
}

// ------------------------------------------------------------------------------ convolutions

fn conv2d_dilated_values<T: Element>() -> Result<()> {
    // x[r][c] = 4r + c; a 2x2 kernel of ones with taps 2 apart sums x at (i, j), (i, j + 2),
    // (i + 2, j), (i + 2, j + 2): 4 (4i + j) + 2 * 2 + 2 * 8.
    let x = range::<T>(16, &[1, 1, 4, 4]);
    let w = tensor::<T>(&[1.0; 4], &[1, 1, 2, 2]);
    assert_tensor::<T>(&x.conv2d_dilated(&w, None, [1, 1], [0, 0], [2, 2], 1)?, &[1, 1, 2, 2], &[20.0, 24.0, 36.0, 40.0]);
    // Stride 2 and padding 1: windows start at -1 and 1; (-1, -1) reads only x[1][1] = 5.
    let y = x.conv2d_dilated(&w, None, [2, 2], [1, 1], [2, 2], 1)?;
    assert_tensor::<T>(&y, &[1, 1, 2, 2], &[5.0, 5.0 + 7.0, 5.0 + 13.0, 5.0 + 7.0 + 13.0 + 15.0]);
    // Two groups with a bias: channel 0 gives x[j] + x[j + 2], channel 1 10 (x[j] - x[j + 2]).
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0], &[1, 2, 1, 4]);
    let w = tensor::<T>(&[1.0, 1.0, 1.0, -1.0], &[2, 1, 1, 2]);
    let b = tensor::<T>(&[0.0, 100.0], &[2]);
    assert_tensor::<T>(&x.conv2d_dilated(&w, Some(&b), [1, 1], [0, 0], [1, 2], 2)?, &[1, 2, 1, 2], &[4.0, 6.0, 80.0, 80.0]);
    Ok(())
}
per_dtype!(conv2d_dilated_values: f32, f64);

fn conv3d_values<T: Element>() -> Result<()> {
    let x = range::<T>(8, &[1, 1, 2, 2, 2]);
    let ones = tensor::<T>(&[1.0; 8], &[1, 1, 2, 2, 2]);
    assert_tensor::<T>(&x.conv3d(&ones, Some(&tensor::<T>(&[1.0], &[1])), [1; 3], [0; 3], [1; 3], 1)?, &[1, 1, 1, 1, 1], &[29.0]);
    // Depth padding 1, a 2x2x2 kernel of ones: (pad, slice 0) = 0+1+2+3, both slices = 28,
    // (slice 1, pad) = 4+5+6+7.
    assert_tensor::<T>(&x.conv3d(&ones, None, [1; 3], [1, 0, 0], [1; 3], 1)?, &[1, 1, 3, 1, 1], &[6.0, 28.0, 22.0]);
    // Depth taps 2 apart, [1, 10]: x[i] + 10 x[i + 2]; then stride 2 keeps depths 0 and 2.
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0], &[1, 1, 5, 1, 1]);
    let w = tensor::<T>(&[1.0, 10.0], &[1, 1, 2, 1, 1]);
    assert_tensor::<T>(&x.conv3d(&w, None, [1; 3], [0; 3], [2, 1, 1], 1)?, &[1, 1, 3, 1, 1], &[31.0, 42.0, 53.0]);
    assert_tensor::<T>(&x.conv3d(&w, None, [2, 1, 1], [0; 3], [2, 1, 1], 1)?, &[1, 1, 2, 1, 1], &[31.0, 53.0]);
    // Two groups: channel 0 [1, 2] with [1, 1], channel 1 [3, 4] with [1, -1].
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0], &[1, 2, 2, 1, 1]);
    let w = tensor::<T>(&[1.0, 1.0, 1.0, -1.0], &[2, 1, 2, 1, 1]);
    assert_tensor::<T>(&x.conv3d(&w, None, [1; 3], [0; 3], [1; 3], 2)?, &[1, 2, 1, 1, 1], &[3.0, -1.0]);
    Ok(())
}
per_dtype!(conv3d_values: f32, f64);

/// The 3-d convolution by its definition, one output at a time.
#[allow(clippy::too_many_arguments)]
fn conv3d_by_definition(
    x: &[f64],
    xd: [usize; 5],
    w: &[f64],
    wd: [usize; 5],
    s: [usize; 3],
    p: [usize; 3],
    d: [usize; 3],
    groups: usize,
) -> (Vec<f64>, Vec<usize>) {
    let out: [usize; 3] = std::array::from_fn(|a| (xd[2 + a] + 2 * p[a] - (wd[2 + a] - 1) * d[a] - 1) / s[a] + 1);
    let (ci, oc) = (wd[1], wd[0]);
    let mut y = Vec::new();
    for n in 0..xd[0] {
        for o in 0..oc {
            let g = o / (oc / groups);
            for (i, j, k) in (0..out[0]).flat_map(|i| (0..out[1]).flat_map(move |j| (0..out[2]).map(move |k| (i, j, k)))) {
                let mut acc = 0.0;
                for c in 0..ci {
                    for (a, b, e) in (0..wd[2]).flat_map(|a| (0..wd[3]).flat_map(move |b| (0..wd[4]).map(move |e| (a, b, e)))) {
                        let pos = [i * s[0] + a * d[0], j * s[1] + b * d[1], k * s[2] + e * d[2]];
                        if (0..3).any(|t| pos[t] < p[t] || pos[t] >= p[t] + xd[2 + t]) {
                            continue;
                        }
                        let [z, r, q] = [pos[0] - p[0], pos[1] - p[1], pos[2] - p[2]];
                        let xi = (((n * xd[1] + g * ci + c) * xd[2] + z) * xd[3] + r) * xd[4] + q;
                        acc += x[xi] * w[(((o * ci + c) * wd[2] + a) * wd[3] + b) * wd[4] + e];
                    }
                }
                y.push(acc);
            }
        }
    }
    (y, [xd[0], oc, out[0], out[1], out[2]].to_vec())
}

#[test]
fn conv3d_matches_its_definition() -> Result<()> {
    let (xd, wd) = ([2, 4, 5, 6, 5], [6, 2, 2, 3, 2]);
    let x = Tensor::randn(&xd, DType::F64, 1);
    let w = Tensor::randn(&wd, DType::F64, 2);
    let (s, p, d) = ([2, 1, 2], [1, 2, 0], [2, 1, 2]);
    let y = x.conv3d(&w, None, s, p, d, 2)?;
    let (want, dims) = conv3d_by_definition(&as_f64(&x), xd, &as_f64(&w), wd, s, p, d, 2);
    assert_tensor_close::<f64>(&y, &dims, &want, 1e-12);
    Ok(())
}

#[test]
fn convolutions_check_their_arguments() {
    let x = Tensor::ones(&[1, 1, 3, 3, 3], DType::F32);
    let w = Tensor::ones(&[1, 1, 2, 2, 2], DType::F32);
    let e = x.conv3d(&w, None, [1; 3], [0; 3], [0, 1, 1], 1).unwrap_err();
    assert!(e.to_string().contains("dilation"), "{e}");
    // Taps 3 apart reach 4 depths, more than the 3 there are.
    let e = x.conv3d(&w, None, [1; 3], [0; 3], [3, 1, 1], 1).unwrap_err();
    assert!(e.to_string().contains("longer than the padded input depth"), "{e}");
    assert!(x.conv3d(&Tensor::ones(&[1, 1, 2, 2], DType::F32), None, [1; 3], [0; 3], [1; 3], 1).is_err());
    let x2 = Tensor::ones(&[1, 2, 4, 4], DType::F32);
    assert!(x2.conv2d_dilated(&Tensor::ones(&[2, 1, 2, 2], DType::F32), None, [1, 1], [0, 0], [2, 0], 2).is_err());
}

// ------------------------------------------------------------------------------ pools

fn max_pool_nd_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[1.0, 5.0, 2.0, 0.0, 3.0], &[1, 1, 5]);
    // Taps 2 apart: {1, 2}, {5, 0}, {2, 3}.
    assert_tensor::<T>(&x.max_pool_nd(&[2], &[1], &[[0, 0]], &[2], false)?, &[1, 1, 3], &[2.0, 5.0, 3.0]);
    // Padding never wins, even against negatives: [pad, -1], [-2, -3], [-4, pad].
    let neg = tensor::<T>(&[-1.0, -2.0, -3.0, -4.0], &[1, 1, 4]);
    assert_tensor::<T>(&neg.max_pool_nd(&[2], &[2], &[[1, 1]], &[1], false)?, &[1, 1, 3], &[-1.0, -2.0, -4.0]);
    // ceil_mode keeps the partial window [5].
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0], &[1, 1, 5]);
    assert_tensor::<T>(&x.max_pool_nd(&[2], &[2], &[[0, 0]], &[1], false)?, &[1, 1, 2], &[2.0, 4.0]);
    assert_tensor::<T>(&x.max_pool_nd(&[2], &[2], &[[0, 0]], &[1], true)?, &[1, 1, 3], &[2.0, 4.0, 5.0]);
    // 3-d: x = 9d + 3h + w, the max of each 2x2x2 window its far corner 13 + 9d + 3h + w.
    let x = range::<T>(27, &[1, 1, 3, 3, 3]);
    assert_tensor::<T>(&x.max_pool3d([2; 3], [1; 3], [0; 3], [1; 3], false)?, &[1, 1, 2, 2, 2], &[13.0, 14.0, 16.0, 17.0, 22.0, 23.0, 25.0, 26.0]);
    // Taps 2 apart in each axis, one window: the 8 corners, the largest 26.
    assert_tensor::<T>(&x.max_pool3d([2; 3], [1; 3], [0; 3], [2; 3], false)?, &[1, 1, 1, 1, 1], &[26.0]);
    Ok(())
}
per_dtype!(max_pool_nd_values: f32, f64);

fn avg_and_lp_pool_values<T: Element>() -> Result<()> {
    let x = range::<T>(8, &[1, 1, 2, 2, 2]);
    assert_tensor::<T>(&x.avg_pool3d([2; 3], [2; 3], [0; 3], false, true)?, &[1, 1, 1, 1, 1], &[3.5]);
    // Padding 1, windows of 2 moved by 2: each window holds one input and seven zeros.
    let vals: Vec<f64> = (0..8).map(f64::from).collect();
    assert_tensor::<T>(&x.avg_pool3d([2; 3], [2; 3], [1; 3], false, false)?, &[1, 1, 2, 2, 2], &vals);
    let eighths: Vec<f64> = vals.iter().map(|v| v / 8.0).collect();
    assert_tensor::<T>(&x.avg_pool3d([2; 3], [2; 3], [1; 3], false, true)?, &[1, 1, 2, 2, 2], &eighths);
    // Taps 2 apart: (1 + 3) / 2, (2 + 4) / 2, (3 + 5) / 2.
    let line = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0], &[1, 1, 5]);
    assert_tensor::<T>(&line.avg_pool_nd(&[2], &[1], &[[0, 0]], &[2], false, false)?, &[1, 1, 3], &[2.0, 3.0, 4.0]);
    // ceil_mode: the partial window [5] is divided by 1, with or without count_include_pad.
    assert_tensor::<T>(&line.avg_pool_nd(&[2], &[2], &[[0, 0]], &[1], true, true)?, &[1, 1, 3], &[1.5, 3.5, 5.0]);
    // Asymmetric pads [1, 0]: [pad, 1], [2, 3], [4, 5].
    assert_tensor::<T>(&line.avg_pool_nd(&[2], &[2], &[[1, 0]], &[1], false, true)?, &[1, 1, 3], &[0.5, 2.5, 4.5]);
    // Lp: sqrt(3^2 + 4^2) = 5 and sqrt(0 + 5^2) = 5; p = 1 sums |x|.
    let lp = tensor::<T>(&[3.0, -4.0, 0.0, 5.0], &[1, 1, 4]);
    assert_tensor_close::<T>(&lp.lp_pool_nd(2.0, &[2], &[2], &[[0, 0]], &[1], false)?, &[1, 1, 2], &[5.0, 5.0], tol::<T>());
    assert_tensor_close::<T>(&lp.lp_pool_nd(1.0, &[3], &[1], &[[0, 0]], &[1], false)?, &[1, 1, 2], &[7.0, 9.0], tol::<T>());
    Ok(())
}
per_dtype!(avg_and_lp_pool_values: f32, f64);

#[test]
fn pools_check_their_arguments() {
    let x = Tensor::ones(&[1, 1, 4, 4], DType::F32);
    let e = x.max_pool_nd(&[2], &[1], &[[0, 0]], &[1], false).unwrap_err();
    assert!(e.to_string().contains("spatial dims"), "{e}");
    let e = x.max_pool_nd(&[2, 2], &[1], &[[0, 0], [0, 0]], &[1, 1], false).unwrap_err();
    assert!(e.to_string().contains("stride"), "{e}");
    let e = x.avg_pool_nd(&[2, 2], &[1, 1], &[[0, 0], [0, 0]], &[1, 0], false, true).unwrap_err();
    assert!(e.to_string().contains("dilation 0"), "{e}");
    // Taps 3 apart reach 4 + 3 = 7 entries, more than 4.
    let e = x.max_pool_nd(&[2, 2], &[1, 1], &[[0, 0], [0, 0]], &[1, 6], false).unwrap_err();
    assert!(e.to_string().contains("longer than the padded input"), "{e}");
    assert!(x.lp_pool_nd(0.0, &[2, 2], &[1, 1], &[[0, 0], [0, 0]], &[1, 1], false).is_err());
}

// ------------------------------------------------------------------------------ in a graph

fn program(x: &Tensor, w3: &Tensor, w2: &Tensor) -> Result<Vec<Tensor>> {
    let conv = x.conv3d(w3, None, [1, 2, 1], [1, 0, 1], [2, 1, 1], 2)?;
    let planes = x.narrow(2, 0, 1)?.squeeze(2)?;
    let dilated = planes.conv2d_dilated(w2, None, [1, 1], [1, 2], [2, 2], 1)?;
    let maxed = x.max_pool3d([2, 2, 2], [1, 2, 1], [1, 1, 0], [1, 1, 2], true)?;
    let averaged = x.avg_pool_nd(&[2, 3, 2], &[2, 1, 2], &[[1, 0], [1, 1], [0, 1]], &[1, 1, 2], true, false)?;
    let lp = x.lp_pool_nd(3.0, &[2, 2, 2], &[1, 1, 1], &[[0, 0]; 3], &[1, 1, 1], false)?;
    Ok(vec![conv, dilated, maxed, averaged, lp])
}

#[test]
fn in_a_graph_they_match_eager_bit_for_bit() -> Result<()> {
    let x = Tensor::randn(&[2, 4, 4, 5, 5], DType::F32, 3).requires_grad_(true)?;
    let (w3, w2) = (Tensor::randn(&[4, 2, 2, 2, 3], DType::F32, 4), Tensor::randn(&[3, 4, 2, 2], DType::F32, 5));
    let eager = program(&x, &w3, &w2)?;
    let f = ConcreteFunction::trace("nd", &[("x", &x)], || program(&x, &w3, &w2))?;
    let graph = f.call(&[&x])?;
    for (e, g) in eager.iter().zip(&graph) {
        assert_bits_eq(e, g);
    }
    for k in 0..eager.len() {
        let (eager, graph) = (program(&x, &w3, &w2)?, f.call(&[&x])?);
        let r = Tensor::randn(&eager[k].dims(), DType::F32, 10 + k as u64);
        let ge = tensor_core::grad(&[&eager[k].mul(&r)?.sum()?], &[&x], false)?;
        let gg = tensor_core::grad(&[&graph[k].mul(&r)?.sum()?], &[&x], false)?;
        assert_bits_eq(&ge[0], &gg[0]);
    }
    Ok(())
}
