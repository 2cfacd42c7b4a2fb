//! Reductions (sum, mean, max, min over all elements and over axes, argmax) and matmul
//! (2-d, batched, broadcast batch dims) against hand-computed values.

use tensor_core::prelude::*;
use tensor_core::Element;
use tests::{as_f64, assert_tensor, assert_tensor_close, per_dtype, tensor};

/// `x[i][j][k] = 12 i + 4 j + k`, shape [2, 3, 4].
fn cube<T: Element>() -> Tensor {
    let v: Vec<f64> = (0..24).map(f64::from).collect();
    tensor::<T>(&v, &[2, 3, 4])
}

// ------------------------------------------------------------------------------ sum

fn sum_all_and_axes<T: Element>() -> Result<()> {
    let x = cube::<T>();
    assert_tensor::<T>(&x.sum()?, &[], &[276.0]);
    assert_tensor::<T>(&x.sum_axes(&[0], false)?, &[3, 4], &[12.0, 14.0, 16.0, 18.0, 20.0, 22.0, 24.0, 26.0, 28.0, 30.0, 32.0, 34.0]);
    assert_tensor::<T>(&x.sum_axes(&[-1], false)?, &[2, 3], &[6.0, 22.0, 38.0, 54.0, 70.0, 86.0]);
    assert_tensor::<T>(&x.sum_axes(&[2], true)?, &[2, 3, 1], &[6.0, 22.0, 38.0, 54.0, 70.0, 86.0]);
    // The middle axis: sum_j (12 i + 4 j + k) = 36 i + 12 + 3 k.
    assert_tensor::<T>(&x.sum_axes(&[1], false)?, &[2, 4], &[12.0, 15.0, 18.0, 21.0, 48.0, 51.0, 54.0, 57.0]);
    assert_tensor::<T>(&x.sum_axes(&[-2], true)?, &[2, 1, 4], &[12.0, 15.0, 18.0, 21.0, 48.0, 51.0, 54.0, 57.0]);
    // Two axes, given in any order and negative: sum over i and k = 60 + 32 j.
    assert_tensor::<T>(&x.sum_axes(&[0, 2], false)?, &[3], &[60.0, 92.0, 124.0]);
    assert_tensor::<T>(&x.sum_axes(&[-1, -3], true)?, &[1, 3, 1], &[60.0, 92.0, 124.0]);
    // All axes with keepdim.
    assert_tensor::<T>(&x.sum_axes(&[0, 1, 2], true)?, &[1, 1, 1], &[276.0]);
    // The sum of a 0-d tensor is itself.
    assert_tensor::<T>(&Tensor::scalar(T::from_f64(5.0)).sum()?, &[], &[5.0]);
    // Through a transposed (non-contiguous) input.
    let m = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).t()?;
    assert_tensor::<T>(&m.sum_axes(&[1], false)?, &[3], &[5.0, 7.0, 9.0]);
    assert_tensor::<T>(&m.sum_axes(&[0], false)?, &[2], &[6.0, 15.0]);
    Ok(())
}
per_dtype!(sum_all_and_axes: f32, f64, i32, i64);

#[test]
fn sum_of_bools_counts_trues() -> Result<()> {
    let b = Tensor::from_vec(vec![true, false, true, true], &[2, 2])?;
    let s = b.sum()?;
    assert_eq!(s.dtype(), DType::I64);
    assert_eq!(s.item::<i64>()?, 3);
    Ok(())
}

#[test]
fn sum_of_empty_tensors_is_zero() -> Result<()> {
    // As in PyTorch: the sum over no elements is 0.
    assert_tensor::<f32>(&Tensor::zeros(&[0], DType::F32).sum()?, &[], &[0.0]);
    assert_tensor::<i64>(&Tensor::zeros(&[3, 0], DType::I64).sum_axes(&[1], false)?, &[3], &[0.0, 0.0, 0.0]);
    assert_tensor::<f64>(&Tensor::zeros(&[0, 2], DType::F64).sum_axes(&[0], true)?, &[1, 2], &[0.0, 0.0]);
    assert_tensor::<f64>(&Tensor::zeros(&[2, 0, 3], DType::F64).sum_axes(&[1], false)?, &[2, 3], &[0.0; 6]);
    assert_tensor::<f64>(&Tensor::zeros(&[0, 3], DType::F64).sum_axes(&[1], false)?, &[0], &[]);
    Ok(())
}

#[test]
fn long_sums_are_exact_where_the_math_is() -> Result<()> {
    // Large enough for blocked and parallel paths; integer-valued, so every order is exact.
    let n = 200_000i64;
    let x = Tensor::arange(0i64, n);
    assert_eq!(x.sum()?.item::<i64>()?, n * (n - 1) / 2);
    let f = x.cast(DType::F64)?;
    assert_eq!(f.sum()?.item::<f64>()?, (n * (n - 1) / 2) as f64);
    // Over each axis of a [400, 500] matrix of x[r][c] = r + 2c.
    let (rows, cols) = (400usize, 500usize);
    let v: Vec<f64> = (0..rows * cols).map(|i| ((i / cols) + 2 * (i % cols)) as f64).collect();
    let m = Tensor::from_vec(v, &[rows, cols])?;
    let row_sums = m.sum_axes(&[1], false)?.to_vec::<f64>()?;
    for (r, s) in row_sums.iter().enumerate() {
        assert_eq!(*s, (cols * r + cols * (cols - 1)) as f64, "row {r}");
    }
    let col_sums = m.sum_axes(&[0], false)?.to_vec::<f64>()?;
    for (c, s) in col_sums.iter().enumerate() {
        assert_eq!(*s, (rows * (rows - 1) / 2 + 2 * c * rows) as f64, "column {c}");
    }
    // Means of ones are exactly one, whatever the length.
    assert_eq!(Tensor::ones(&[100_003], DType::F32).mean()?.item::<f32>()?, 1.0);
    Ok(())
}

// ------------------------------------------------------------------------------ mean

fn mean_all_and_axes<T: Element>() -> Result<()> {
    let x = cube::<T>();
    assert_tensor::<T>(&x.mean()?, &[], &[11.5]);
    // mean over j = 12 i + 4 + k
    assert_tensor::<T>(&x.mean_axes(&[1], false)?, &[2, 4], &[4.0, 5.0, 6.0, 7.0, 16.0, 17.0, 18.0, 19.0]);
    assert_tensor::<T>(&x.mean_axes(&[-1], true)?, &[2, 3, 1], &[1.5, 5.5, 9.5, 13.5, 17.5, 21.5]);
    assert_tensor::<T>(&x.mean_axes(&[0, -1], false)?, &[3], &[7.5, 11.5, 15.5]);
    assert_tensor::<T>(&x.mean_axes(&[0, 1, 2], true)?, &[1, 1, 1], &[11.5]);
    let thirds = tensor::<T>(&[1.0, 0.0, 0.0], &[3]).mean()?;
    assert_tensor_close::<T>(&thirds, &[], &[1.0 / 3.0], tests::tol::<T>());
    Ok(())
}
per_dtype!(mean_all_and_axes: f32, f64);

// ------------------------------------------------------------------------------ max / min

fn max_min<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[3.0, -1.0, 7.0, 2.0, 9.0, -5.0], &[2, 3]);
    assert_tensor::<T>(&x.max()?, &[], &[9.0]);
    assert_tensor::<T>(&x.min()?, &[], &[-5.0]);
    assert_tensor::<T>(&x.max_axes(&[0], false)?, &[3], &[3.0, 9.0, 7.0]);
    assert_tensor::<T>(&x.min_axes(&[0], true)?, &[1, 3], &[2.0, -1.0, -5.0]);
    assert_tensor::<T>(&x.max_axes(&[-1], false)?, &[2], &[7.0, 9.0]);
    assert_tensor::<T>(&x.min_axes(&[1], true)?, &[2, 1], &[-1.0, -5.0]);
    assert_tensor::<T>(&x.max_axes(&[0, 1], false)?, &[], &[9.0]);
    // All-negative values: the identity must not leak in.
    let neg = tensor::<T>(&[-3.0, -8.0, -2.0, -9.0], &[2, 2]);
    assert_tensor::<T>(&neg.max_axes(&[1], false)?, &[2], &[-3.0, -2.0]);
    assert_tensor::<T>(&neg.max()?, &[], &[-2.0]);
    let c = cube::<T>();
    assert_tensor::<T>(&c.max_axes(&[1], false)?, &[2, 4], &[8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0]);
    assert_tensor::<T>(&c.min_axes(&[0, 2], false)?, &[3], &[0.0, 4.0, 8.0]);
    Ok(())
}
per_dtype!(max_min: f32, f64, i32, i64);

#[test]
fn max_min_propagate_nan() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0, 0.0, 2.0, 1.0], &[2, 3])?;
    assert!(x.max()?.item::<f32>()?.is_nan());
    assert!(x.min()?.item::<f32>()?.is_nan());
    let rows = x.max_axes(&[1], false)?.to_vec::<f32>()?;
    assert!(rows[0].is_nan());
    assert_eq!(rows[1], 2.0);
    Ok(())
}

fn argmax_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[3.0, -1.0, 7.0, 2.0, 9.0, -5.0], &[2, 3]);
    assert_tensor::<i64>(&x.argmax(1, false)?, &[2], &[2.0, 1.0]);
    assert_tensor::<i64>(&x.argmax(-1, true)?, &[2, 1], &[2.0, 1.0]);
    assert_tensor::<i64>(&x.argmax(0, false)?, &[3], &[0.0, 1.0, 0.0]);
    assert_tensor::<i64>(&x.argmax(-2, true)?, &[1, 3], &[0.0, 1.0, 0.0]);
    // Ties give the first index.
    let t = tensor::<T>(&[1.0, 5.0, 5.0, 2.0], &[4]);
    assert_tensor::<i64>(&t.argmax(0, false)?, &[], &[1.0]);
    // The middle axis of a 3-d tensor: always the last j.
    assert_tensor::<i64>(&cube::<T>().argmax(1, false)?, &[2, 4], &[2.0; 8]);
    Ok(())
}
per_dtype!(argmax_values: f32, f64, i32, i64);

#[test]
fn argmax_treats_nan_as_largest() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f64, f64::NAN, 3.0, f64::NAN], &[4])?;
    assert_eq!(x.argmax(0, false)?.item::<i64>()?, 1);
    Ok(())
}

// ------------------------------------------------------------------------------ matmul

fn matmul_2d<T: Element>() -> Result<()> {
    let a = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = tensor::<T>(&[7.0, 8.0, 9.0, 10.0, 11.0, 12.0], &[3, 2]);
    assert_tensor::<T>(&a.matmul(&b)?, &[2, 2], &[58.0, 64.0, 139.0, 154.0]);
    assert_tensor::<T>(&b.matmul(&a)?, &[3, 3], &[39.0, 54.0, 69.0, 49.0, 68.0, 87.0, 59.0, 82.0, 105.0]);
    // Matrix-vector as [k, 1].
    let v = tensor::<T>(&[1.0, 0.0, -1.0], &[3, 1]);
    assert_tensor::<T>(&a.matmul(&v)?, &[2, 1], &[-2.0, -2.0]);
    // Transposed operands (non-contiguous views): a^T a.
    assert_tensor::<T>(&a.t()?.matmul(&a)?, &[3, 3], &[17.0, 22.0, 27.0, 22.0, 29.0, 36.0, 27.0, 36.0, 45.0]);
    assert_tensor::<T>(&a.matmul(&a.t()?)?, &[2, 2], &[14.0, 32.0, 32.0, 77.0]);
    // Outer product [3, 1] @ [1, 2].
    let r = tensor::<T>(&[2.0, -1.0], &[1, 2]);
    assert_tensor::<T>(&v.matmul(&r)?, &[3, 2], &[2.0, -1.0, 0.0, 0.0, -2.0, 1.0]);
    Ok(())
}
per_dtype!(matmul_2d: f32, f64, i32, i64);

fn matmul_batched_broadcast<T: Element>() -> Result<()> {
    // a: [2, 1, 2, 3] = (A0, A1); b: [3, 3, 2] = (B0, B1, B2); result [2, 3, 2, 2] = Ai @ Bj.
    let a = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0], &[2, 1, 2, 3]);
    let b = tensor::<T>(&[1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0], &[3, 3, 2]);
    let expected = [
        1.0, 2.0, 4.0, 5.0, // A0 B0
        6.0, 6.0, 15.0, 15.0, // A0 B1
        2.0, 9.0, 8.0, 18.0, // A0 B2
        0.0, 1.0, 1.0, 0.0, // A1 B0
        1.0, 1.0, 2.0, 2.0, // A1 B1
        0.0, 0.0, 2.0, 3.0, // A1 B2
    ];
    assert_tensor::<T>(&a.matmul(&b)?, &[2, 3, 2, 2], &expected);
    // Equal batch dims.
    let a2 = a.reshape([2, 2, 3])?;
    let b2 = b.narrow(0, 1, 2)?; // (B1, B2)
    assert_tensor::<T>(&a2.matmul(&b2)?, &[2, 2, 2], &[6.0, 6.0, 15.0, 15.0, 0.0, 0.0, 2.0, 3.0]);
    // A 2-d operand broadcasts against a batch.
    let m = tensor::<T>(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2]);
    assert_tensor::<T>(&a2.matmul(&m)?, &[2, 2, 2], &[4.0, 5.0, 10.0, 11.0, 0.0, 1.0, 2.0, 1.0]);
    let i2 = tensor::<T>(&[0.0, 1.0, 1.0, 0.0], &[2, 2]); // swaps rows
    assert_tensor::<T>(&i2.matmul(&a2)?, &[2, 2, 3], &[4.0, 5.0, 6.0, 1.0, 2.0, 3.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
    Ok(())
}
per_dtype!(matmul_batched_broadcast: f32, f64, i32, i64);

/// A naive reference matmul of row-major `[m, k] @ [k, n]`.
fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    out
}

fn matmul_larger_against_reference<T: Element>() -> Result<()> {
    // Odd sizes exercise the kernel's edge handling; small integers keep every sum exact.
    for &(m, k, n) in &[(17, 33, 19), (1, 70, 5), (64, 64, 64), (3, 1, 130)] {
        let a: Vec<f64> = (0..m * k).map(|i| ((i * 7 + 3) % 11) as f64 - 5.0).collect();
        let b: Vec<f64> = (0..k * n).map(|i| ((i * 5 + 1) % 13) as f64 - 6.0).collect();
        let got = tensor::<T>(&a, &[m, k]).matmul(&tensor::<T>(&b, &[k, n]))?;
        assert_tensor::<T>(&got, &[m, n], &naive(&a, &b, m, k, n));
    }
    Ok(())
}
per_dtype!(matmul_larger_against_reference: f32, f64, i32, i64);

#[test]
fn matmul_with_fractions_is_close_to_reference() -> Result<()> {
    let (m, k, n) = (9, 40, 7);
    let a: Vec<f64> = (0..m * k).map(|i| ((i * 37) % 101) as f64 / 101.0 - 0.5).collect();
    let b: Vec<f64> = (0..k * n).map(|i| ((i * 53) % 97) as f64 / 97.0 - 0.5).collect();
    let want = naive(&a, &b, m, k, n);
    let got = tensor::<f64>(&a, &[m, k]).matmul(&tensor::<f64>(&b, &[k, n]))?;
    assert_tensor_close::<f64>(&got, &[m, n], &want, 1e-13);
    let got = tensor::<f32>(&a, &[m, k]).matmul(&tensor::<f32>(&b, &[k, n]))?;
    assert_tensor_close::<f32>(&got, &[m, n], &want, 1e-5);
    assert_eq!(as_f64(&got).len(), m * n);
    Ok(())
}
