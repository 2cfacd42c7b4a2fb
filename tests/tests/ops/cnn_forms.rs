//! batch_norm, group_norm, avg_pool2d, adaptive_avg_pool2d, conv_transpose2d, conv1d,
//! grouped convolution, cumsum, topk and relu6 against hand-computed values; and a program
//! of all of them traced into a graph, which must match eager bit for bit.

use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;
use tensor_core::Element;
use tests::{as_f64, assert_bits_eq, assert_tensor, assert_tensor_close, per_dtype, tensor, tol};

// ------------------------------------------------------------------------------ normalization

fn batch_norm_train_updates_running_stats<T: Element>() -> Result<()> {
    // n = 2, c = 2, 1x2 images. Channel 0 holds 1, 3, 5, 7 (mean 4, biased var 5, unbiased
    // 20/3); channel 1 holds 2 four times (var 0).
    let x = tensor::<T>(&[1.0, 3.0, 2.0, 2.0, 5.0, 7.0, 2.0, 2.0], &[2, 2, 1, 2]);
    let (rm, rv) = (tensor::<T>(&[0.0, 1.0], &[2]), tensor::<T>(&[1.0, 1.0], &[2]));
    let (w, b) = (tensor::<T>(&[2.0, 1.0], &[2]), tensor::<T>(&[0.5, -1.0], &[2]));
    let y = x.batch_norm(Some(&rm), Some(&rv), Some(&w), Some(&b), true, 0.25, 0.0)?;
    let s = 5.0f64.sqrt();
    let c0 = |v: f64| (v - 4.0) / s * 2.0 + 0.5;
    // Channel 1 is 0 / sqrt(0): NaN with eps 0, as PyTorch; checked with eps below.
    let got = as_f64(&y);
    for (i, v) in [(0, 1.0), (1, 3.0), (4, 5.0), (5, 7.0)] {
        assert!((got[i] - c0(v)).abs() < 4.0 * tol::<T>(), "element {i}: {} vs {}", got[i], c0(v));
    }
    // running = 0.75 * running + 0.25 * batch, the variance unbiased.
    assert_tensor_close::<T>(&rm, &[2], &[1.0, 0.75 + 0.5], tol::<T>());
    assert_tensor_close::<T>(&rv, &[2], &[0.75 + 0.25 * 20.0 / 3.0, 0.75], tol::<T>());
    let y = x.batch_norm(None, None, None, None, true, 0.1, 1.0)?;
    assert_tensor::<T>(&y.narrow(1, 1, 1)?, &[2, 1, 1, 2], &[0.0; 4]);
    Ok(())
}
per_dtype!(batch_norm_train_updates_running_stats: f32, f64);

fn batch_norm_eval_uses_running_stats<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[1.0, 5.0, 3.0, 9.0], &[2, 2]);
    let (rm, rv) = (tensor::<T>(&[1.0, 1.0], &[2]), tensor::<T>(&[4.0, 16.0], &[2]));
    let y = x.batch_norm(Some(&rm), Some(&rv), None, Some(&tensor::<T>(&[0.0, 1.0], &[2])), false, 0.1, 0.0)?;
    assert_tensor::<T>(&y, &[2, 2], &[0.0, 2.0, 1.0, 3.0]);
    assert_tensor::<T>(&rm, &[2], &[1.0, 1.0]); // evaluation changes no statistics
    Ok(())
}
per_dtype!(batch_norm_eval_uses_running_stats: f32, f64);

#[test]
fn batch_norm_checks_its_arguments() {
    let x = Tensor::ones(&[2, 3], DType::F32);
    assert!(x.batch_norm(Some(&Tensor::zeros(&[2], DType::F32)), None, None, None, true, 0.1, 1e-5).is_err());
    assert!(Tensor::ones(&[3], DType::F32).batch_norm(None, None, None, None, true, 0.1, 1e-5).is_err());
    // One value per channel cannot give an unbiased variance.
    let rm = Tensor::zeros(&[3], DType::F32);
    let e = x.narrow(0, 0, 1).unwrap().batch_norm(Some(&rm), None, None, None, true, 0.1, 1e-5).unwrap_err();
    assert!(e.to_string().contains("more than 1 value per channel"), "{e}");
    assert_eq!(rm.to_vec::<f32>().unwrap(), vec![0.0; 3]);
}

fn group_norm_values<T: Element>() -> Result<()> {
    // 1 sample, 4 channels of 2 in 2 groups: [1, 3, 5, 7] (mean 4, var 5) and [0, 0, 2, 2]
    // (mean 1, var 1).
    let x = tensor::<T>(&[1.0, 3.0, 5.0, 7.0, 0.0, 0.0, 2.0, 2.0], &[1, 4, 2]);
    let y = x.group_norm(2, None, Some(&tensor::<T>(&[0.0, 0.0, 1.0, 1.0], &[4])), 0.0)?;
    let s = 5.0f64.sqrt();
    let want = [-3.0 / s, -1.0 / s, 1.0 / s, 3.0 / s, 0.0, 0.0, 2.0, 2.0];
    assert_tensor_close::<T>(&y, &[1, 4, 2], &want, 4.0 * tol::<T>());
    assert!(x.group_norm(3, None, None, 1e-5).is_err());
    Ok(())
}
per_dtype!(group_norm_values: f32, f64);

// ------------------------------------------------------------------------------ pooling

fn avg_pool2d_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&(0..12).map(f64::from).collect::<Vec<_>>(), &[1, 1, 3, 4]);
    // 2x2 windows, stride 2: the last row is in no window.
    assert_tensor::<T>(&x.avg_pool2d([2, 2], [2, 2], [0, 0], false, true)?, &[1, 1, 1, 2], &[2.5, 4.5]);
    // ceil_mode keeps the partial last row: windows [8, 9] and [10, 11], divided by 2.
    assert_tensor::<T>(&x.avg_pool2d([2, 2], [2, 2], [0, 0], true, true)?, &[1, 1, 2, 2], &[2.5, 4.5, 8.5, 10.5]);
    // Padding 1 with 2x2 windows, stride 2: corner windows hold one input.
    let with_pad = x.avg_pool2d([2, 2], [2, 2], [1, 1], false, true)?;
    assert_tensor::<T>(&with_pad, &[1, 1, 2, 3], &[0.0, 0.75, 0.75, 3.0, 7.5, 4.5]);
    let no_pad = x.avg_pool2d([2, 2], [2, 2], [1, 1], false, false)?;
    assert_tensor::<T>(&no_pad, &[1, 1, 2, 3], &[0.0, 1.5, 3.0, 6.0, 7.5, 9.0]);
    // 3x3, stride 1, padding 1 without the padding: the mean of each neighbourhood.
    let ones = tensor::<T>(&[1.0; 9], &[1, 1, 3, 3]);
    assert_tensor::<T>(&ones.avg_pool2d([3, 3], [1, 1], [1, 1], false, false)?, &[1, 1, 3, 3], &[1.0; 9]);
    assert!(x.avg_pool2d([2, 2], [2, 2], [2, 0], false, true).is_err()); // padding above half the window
    Ok(())
}
per_dtype!(avg_pool2d_values: f32, f64);

fn adaptive_avg_pool2d_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&(0..12).map(f64::from).collect::<Vec<_>>(), &[1, 1, 3, 4]);
    // Rows [0, 2) and [1, 3); columns [0, 2) and [2, 4).
    let y = x.adaptive_avg_pool2d([2, 2])?;
    assert_tensor::<T>(&y, &[1, 1, 2, 2], &[2.5, 4.5, 6.5, 8.5]);
    assert_tensor::<T>(&x.adaptive_avg_pool2d([1, 1])?, &[1, 1, 1, 1], &[5.5]);
    assert_tensor::<T>(&x.adaptive_avg_pool2d([3, 2])?, &[1, 1, 3, 2], &[0.5, 2.5, 4.5, 6.5, 8.5, 10.5]);
    assert_tensor::<T>(&x.global_avg_pool()?, &[1, 1, 1, 1], &[5.5]);
    Ok(())
}
per_dtype!(adaptive_avg_pool2d_values: f32, f64);

// ------------------------------------------------------------------------------ convolutions

fn conv_transpose2d_values<T: Element>() -> Result<()> {
    // Each input scatters its weight-scaled kernel to stride-spaced positions; overlaps add.
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]);
    let w = tensor::<T>(&[1.0, 10.0, 100.0, 1000.0], &[1, 1, 2, 2]);
    let y = x.conv_transpose2d(&w, None, [1, 1], [0, 0], [0, 0], 1)?;
    #[rustfmt::skip]
    let want = [
        1.0, 12.0, 20.0,
        103.0, 1234.0, 2040.0,
        300.0, 3400.0, 4000.0,
    ];
    assert_tensor::<T>(&y, &[1, 1, 3, 3], &want);
    // Stride 2 and output padding 1: a gap between the kernels and an extra row and column.
    let y = x.conv_transpose2d(&w, Some(&tensor::<T>(&[0.5], &[1])), [2, 2], [0, 0], [1, 1], 1)?;
    assert_eq!(y.dims(), vec![1, 1, 5, 5]);
    #[rustfmt::skip]
    let want = [
        1.5, 10.5, 2.5, 20.5, 0.5,
        100.5, 1000.5, 200.5, 2000.5, 0.5,
        3.5, 30.5, 4.5, 40.5, 0.5,
        300.5, 3000.5, 400.5, 4000.5, 0.5,
        0.5, 0.5, 0.5, 0.5, 0.5,
    ];
    assert_tensor::<T>(&y, &[1, 1, 5, 5], &want);
    // Padding 1 takes a row and column off each side of the stride-1 result.
    assert_tensor::<T>(&x.conv_transpose2d(&w, None, [1, 1], [1, 1], [0, 0], 1)?, &[1, 1, 1, 1], &[1234.0]);
    assert!(x.conv_transpose2d(&w, None, [1, 1], [0, 0], [1, 0], 1).is_err()); // output padding >= stride
    Ok(())
}
per_dtype!(conv_transpose2d_values: f32, f64);

fn grouped_and_1d_values<T: Element>() -> Result<()> {
    // Depthwise: channel 0 summed by a 1x2 window of ones, channel 1 differenced.
    let x = tensor::<T>(&[1.0, 2.0, 4.0, 10.0, 20.0, 40.0], &[1, 2, 1, 3]);
    let w = tensor::<T>(&[1.0, 1.0, 1.0, -1.0], &[2, 1, 1, 2]);
    let y = x.conv2d_grouped(&w, Some(&tensor::<T>(&[0.0, 100.0], &[2])), [1, 1], [0, 0], 2)?;
    assert_tensor::<T>(&y, &[1, 2, 1, 2], &[3.0, 6.0, 90.0, 80.0]);
    // The same as 1-d convolutions, with stride 2 and padding 1 on [0, x, 0].
    let x1 = x.squeeze(2)?;
    let w1 = w.squeeze(2)?;
    assert_tensor::<T>(&x1.conv1d(&w1, None, 1, 0, 2)?, &[1, 2, 2], &[3.0, 6.0, -10.0, -20.0]);
    assert_tensor::<T>(&x1.conv1d(&w1, None, 2, 1, 2)?, &[1, 2, 2], &[1.0, 6.0, -10.0, -20.0]);
    assert!(x.conv2d_grouped(&w, None, [1, 1], [0, 0], 3).is_err());
    Ok(())
}
per_dtype!(grouped_and_1d_values: f32, f64);

// ------------------------------------------------------------------------------ scans, topk

fn cumsum_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], &[2, 5]);
    assert_tensor::<T>(&x.cumsum(1)?, &[2, 5], &[1.0, 3.0, 6.0, 10.0, 15.0, 6.0, 13.0, 21.0, 30.0, 40.0]);
    assert_tensor::<T>(&x.cumsum(-2)?, &[2, 5], &[1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0]);
    assert_tensor::<T>(&x.cumulative_sum(1, true, false)?, &[2, 5], &[0.0, 1.0, 3.0, 6.0, 10.0, 0.0, 6.0, 13.0, 21.0, 30.0]);
    assert_tensor::<T>(&x.cumulative_sum(1, false, true)?, &[2, 5], &[15.0, 14.0, 12.0, 9.0, 5.0, 40.0, 34.0, 27.0, 19.0, 10.0]);
    assert_tensor::<T>(&x.cumulative_sum(0, true, true)?, &[2, 5], &[6.0, 7.0, 8.0, 9.0, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    Ok(())
}
per_dtype!(cumsum_values: f32, f64, i32, i64);

#[test]
fn cumsum_of_bools_counts_and_infinities_stay_put() -> Result<()> {
    let b = Tensor::from_vec(vec![true, false, true, true], &[4])?;
    assert_eq!(b.cumsum(0)?.to_vec::<i64>()?, vec![1, 1, 2, 3]);
    let x = Tensor::from_vec(vec![1.0f32, f32::INFINITY, 2.0], &[3])?;
    assert_eq!(x.cumsum(0)?.to_vec::<f32>()?, vec![1.0, f32::INFINITY, f32::INFINITY]);
    assert!(x.cumsum(1).is_err());
    Ok(())
}

fn topk_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0], &[2, 4]);
    let (v, i) = x.topk(2, 1, true, true)?;
    assert_tensor::<T>(&v, &[2, 2], &[4.0, 3.0, 9.0, 6.0]);
    assert_eq!(i.to_vec::<i64>()?, vec![2, 0, 1, 3]);
    // Smallest, with a tie: the lower position first.
    let (v, i) = x.topk(3, -1, false, true)?;
    assert_tensor::<T>(&v, &[2, 3], &[1.0, 1.0, 3.0, 2.0, 5.0, 6.0]);
    assert_eq!(i.to_vec::<i64>()?, vec![1, 3, 0, 2, 0, 3]);
    // Along axis 0.
    let (v, i) = x.topk(1, 0, true, true)?;
    assert_tensor::<T>(&v, &[1, 4], &[5.0, 9.0, 4.0, 6.0]);
    assert_eq!(i.to_vec::<i64>()?, vec![1, 1, 0, 1]);
    assert!(x.topk(5, 1, true, true).is_err());
    Ok(())
}
per_dtype!(topk_values: f32, f64, i32, i64);

#[test]
fn topk_counts_nan_as_largest() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f64, f64::NAN, 3.0], &[3])?;
    assert_eq!(x.topk(2, 0, true, true)?.1.to_vec::<i64>()?, vec![1, 2]);
    assert_eq!(x.topk(2, 0, false, true)?.1.to_vec::<i64>()?, vec![0, 2]);
    Ok(())
}

#[test]
fn relu6_and_hardtanh_clamp() -> Result<()> {
    let x = Tensor::from_vec(vec![-3.0f32, -0.5, 2.0, 6.5], &[4])?;
    assert_eq!(x.relu6()?.to_vec::<f32>()?, vec![0.0, 0.0, 2.0, 6.0]);
    assert_eq!(x.hardtanh(-1.0, 1.0)?.to_vec::<f32>()?, vec![-1.0, -0.5, 1.0, 1.0]);
    assert!(x.hardtanh(1.0, -1.0).is_err());
    Ok(())
}

// ------------------------------------------------------------------------------ in a graph

/// Every form of this file, with batch norm in training mode updating `rm` and `rv`.
fn program(x: &Tensor, rm: &Tensor, rv: &Tensor, w: &Tensor, wt: &Tensor) -> Result<Vec<Tensor>> {
    let bn = x.batch_norm(Some(rm), Some(rv), None, None, true, 0.1, 1e-5)?;
    let gn = x.group_norm(2, None, None, 1e-5)?;
    let pooled = bn.avg_pool2d([3, 3], [2, 2], [1, 1], true, false)?;
    let adaptive = gn.adaptive_avg_pool2d([2, 3])?;
    let up = pooled.conv_transpose2d(wt, None, [2, 2], [1, 1], [1, 1], 2)?;
    let depthwise = x.conv2d_grouped(w, None, [1, 1], [1, 1], 4)?.relu6()?;
    let scan = depthwise.flatten_from(1)?.cumulative_sum(1, true, true)?;
    let (top, idx) = scan.topk(3, 1, true, true)?;
    let line = x.flatten_from(2)?.conv1d(&w.narrow(2, 0, 1)?.squeeze(2)?, None, 2, 1, 4)?;
    Ok(vec![bn, gn, pooled, adaptive, up, depthwise, scan, top, idx, line])
}

#[test]
fn in_a_graph_they_match_eager_bit_for_bit() -> Result<()> {
    let x = Tensor::randn(&[2, 4, 5, 5], DType::F32, 7).requires_grad_(true)?;
    let (w, wt) = (Tensor::randn(&[4, 1, 3, 3], DType::F32, 8), Tensor::randn(&[4, 3, 3, 3], DType::F32, 9));
    let stats = || (Tensor::zeros(&[4], DType::F32), Tensor::ones(&[4], DType::F32));
    let ((rme, rve), (rmg, rvg)) = (stats(), stats());
    let eager = program(&x, &rme, &rve, &w, &wt)?;
    let f = ConcreteFunction::trace("cnn", &[("x", &x), ("rm", &rmg), ("rv", &rvg)], || program(&x, &rmg, &rvg, &w, &wt))?;
    // Tracing ran no kernel: the statistics are those of the first call.
    assert_eq!(rmg.to_vec::<f32>()?, vec![0.0; 4]);
    let graph = f.call(&[&x, &rmg, &rvg])?;
    for (e, g) in eager.iter().zip(&graph) {
        assert_bits_eq(e, g);
    }
    assert_bits_eq(&rme, &rmg);
    assert_bits_eq(&rve, &rvg);
    // The gradients of each float output through the graph call match eager's too.
    // (Each pair computed afresh: a backward frees what it used.)
    for k in [0, 1, 2, 3, 4, 5, 6, 7, 9] {
        let (eager, graph) = (program(&x, &rme, &rve, &w, &wt)?, f.call(&[&x, &rmg, &rvg])?);
        let r = Tensor::randn(&eager[k].dims(), DType::F32, 10 + k as u64);
        let ge = tensor_core::grad(&[&eager[k].mul(&r)?.sum()?], &[&x], false)?;
        let gg = tensor_core::grad(&[&graph[k].mul(&r)?.sum()?], &[&x], false)?;
        assert_bits_eq(&ge[0], &gg[0]);
    }
    Ok(())
}

// ------------------------------------------------------------------------------ padding

fn pad_values<T: Element>() -> Result<()> {
    use tensor_core::ops::PadMode;
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let c = x.pad(&[(1, 0), (0, 2)], PadMode::Constant(7.0))?;
    assert_tensor::<T>(&c, &[3, 5], &[7.0, 7.0, 7.0, 7.0, 7.0, 1.0, 2.0, 3.0, 7.0, 7.0, 4.0, 5.0, 6.0, 7.0, 7.0]);
    let r = x.pad(&[(1, 1), (2, 0)], PadMode::Reflect)?;
    #[rustfmt::skip]
    let want = [
        6.0, 5.0, 4.0, 5.0, 6.0,
        3.0, 2.0, 1.0, 2.0, 3.0,
        6.0, 5.0, 4.0, 5.0, 6.0,
        3.0, 2.0, 1.0, 2.0, 3.0,
    ];
    assert_tensor::<T>(&r, &[4, 5], &want);
    assert_tensor::<T>(&x.pad(&[(0, 0), (1, 2)], PadMode::Replicate)?, &[2, 6], &[1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 4.0, 4.0, 5.0, 6.0, 6.0, 6.0]);
    assert_tensor::<T>(&x.pad(&[(0, 0), (2, 1)], PadMode::Circular)?, &[2, 6], &[2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 5.0, 6.0, 4.0, 5.0, 6.0, 4.0]);
    assert!(x.pad(&[(0, 0), (3, 0)], PadMode::Reflect).is_err()); // as long as the axis
    assert!(x.pad(&[(0, 0)], PadMode::Replicate).is_err()); // one pair per axis
    Ok(())
}
per_dtype!(pad_values: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ einsum

fn einsum_values<T: Element>() -> Result<()> {
    let a = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = tensor::<T>(&[1.0, 0.0, 2.0, 1.0, 0.0, 3.0], &[3, 2]);
    // [[1, 2, 3], [4, 5, 6]] x [[1, 0], [2, 1], [0, 3]] = [[5, 11], [14, 23]]
    assert_tensor::<T>(&Tensor::einsum("ij,jk->ik", &[&a, &b])?, &[2, 2], &[5.0, 11.0, 14.0, 23.0]);
    assert_tensor::<T>(&Tensor::einsum("ij,jk", &[&a, &b])?, &[2, 2], &[5.0, 11.0, 14.0, 23.0]);
    assert_tensor::<T>(&Tensor::einsum("ij,jk->ki", &[&a, &b])?, &[2, 2], &[5.0, 14.0, 11.0, 23.0]);
    assert_tensor::<T>(&Tensor::einsum("ij->j", &[&a])?, &[3], &[5.0, 7.0, 9.0]);
    assert_tensor::<T>(&Tensor::einsum("ij->", &[&a])?, &[], &[21.0]);
    assert_tensor::<T>(&Tensor::einsum("ij,ji->", &[&a, &b])?, &[], &[5.0 + 23.0]);
    // A batched product with the batch letter last in the output, and an outer product.
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0], &[2, 1, 2]);
    let y = tensor::<T>(&[1.0, 1.0, 2.0, 0.0], &[2, 2, 1]);
    assert_tensor::<T>(&Tensor::einsum("bij,bjk->ikb", &[&x, &y])?, &[1, 1, 2], &[3.0, 6.0]);
    let (u, v) = (tensor::<T>(&[1.0, 2.0], &[2]), tensor::<T>(&[3.0, 4.0, 5.0], &[3]));
    assert_tensor::<T>(&Tensor::einsum("i,j->ij", &[&u, &v])?, &[2, 3], &[3.0, 4.0, 5.0, 6.0, 8.0, 10.0]);
    // Three operands: u^T a v.
    assert_tensor::<T>(&Tensor::einsum("i,ij,j->", &[&u, &a, &v])?, &[], &[1.0 * (3.0 + 8.0 + 15.0) + 2.0 * (12.0 + 20.0 + 30.0)]);
    assert!(Tensor::einsum("ii->i", &[&a]).is_err());
    assert!(Tensor::einsum("ij,jk->ik", &[&a, &a]).is_err());
    assert!(Tensor::einsum("ijk->i", &[&a]).is_err());
    Ok(())
}
per_dtype!(einsum_values: f32, f64, i64);

// ------------------------------------------------------------------------------ resize

fn interpolate_values<T: Element>() -> Result<()> {
    use tensor_core::ops::Interpolation;
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]);
    #[rustfmt::skip]
    let nearest = [
        1.0, 1.0, 2.0, 2.0,
        1.0, 1.0, 2.0, 2.0,
        3.0, 3.0, 4.0, 4.0,
        3.0, 3.0, 4.0, 4.0,
    ];
    assert_tensor::<T>(&x.interpolate([4, 4], Interpolation::Nearest)?, &[1, 1, 4, 4], &nearest);
    #[rustfmt::skip]
    let half_pixel = [
        1.0, 1.25, 1.75, 2.0,
        1.5, 1.75, 2.25, 2.5,
        2.5, 2.75, 3.25, 3.5,
        3.0, 3.25, 3.75, 4.0,
    ];
    assert_tensor::<T>(&x.interpolate([4, 4], Interpolation::Bilinear { align_corners: false })?, &[1, 1, 4, 4], &half_pixel);
    let corners = x.interpolate([3, 2], Interpolation::Bilinear { align_corners: true })?;
    assert_tensor::<T>(&corners, &[1, 1, 3, 2], &[1.0, 2.0, 2.0, 3.0, 3.0, 4.0]);
    // Down: nearest keeps every other pixel.
    let big = tensor::<T>(&(0..16).map(f64::from).collect::<Vec<_>>(), &[1, 1, 4, 4]);
    assert_tensor::<T>(&big.interpolate([2, 2], Interpolation::Nearest)?, &[1, 1, 2, 2], &[0.0, 2.0, 8.0, 10.0]);
    Ok(())
}
per_dtype!(interpolate_values: f32, f64);
