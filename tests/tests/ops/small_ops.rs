//! The small ops ONNX conformance needed: rounding, the inverse trigonometric and hyperbolic
//! functions, `fmod`, `is_nan`/`is_inf`, the `prod` reduction and `cumulative_prod`. Values
//! against hand-computed ones (edge cases: ±0, halves, NaN, inf), gradients against finite
//! differences, eager == graph bit for bit.

use tensor_core::prelude::*;
use tests::{assert_bits_eq, assert_close};

fn f64s(v: &[f64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).expect("data matches shape")
}

/// The values' bits, so that -0.0, +0.0 and NaN are told apart.
fn bits(t: &Tensor) -> Vec<u64> {
    t.to_vec::<f64>().expect("f64").iter().map(|v| v.to_bits()).collect()
}

fn same_bits(t: &Tensor, expected: &[f64]) {
    let want: Vec<u64> = expected.iter().map(|v| v.to_bits()).collect();
    assert_eq!(bits(t), want, "{:?} vs {expected:?}", t.to_vec::<f64>());
}

/// Central differences of the scalar `f` at `x`.
fn finite_diff(x: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Vec<f64>> {
    let base = x.to_vec::<f64>()?;
    let h = 1e-6;
    let at = |i: usize, d: f64| -> Result<f64> {
        let mut v = base.clone();
        v[i] += d;
        no_grad(|| f(&Tensor::from_vec(v, x.dims().as_slice())?))?.item::<f64>()
    };
    (0..base.len()).map(|i| Ok((at(i, h)? - at(i, -h)?) / (2.0 * h))).collect()
}

/// The gradient of `f(x).sum()` against finite differences.
fn check_grad(x: &[f64], f: fn(&Tensor) -> Result<Tensor>, tol: f64) -> Result<()> {
    let xs = f64s(x);
    let xg = xs.detach().requires_grad_(true)?;
    let g = tensor_core::grad(&[&f(&xg)?.sum()?], &[&xg], false)?;
    assert_close(&g[0], &finite_diff(&xs, |x| f(x)?.sum())?, tol);
    Ok(())
}

#[test]
fn rounding_keeps_signed_zeros_infinities_and_nan_and_rounds_halves_to_even() -> Result<()> {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let x = f64s(&[-1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 2.7, -2.7, inf, -inf]);
    same_bits(&x.floor()?, &[-2.0, -1.0, -0.0, 0.0, 0.0, 1.0, 2.0, 2.0, -3.0, inf, -inf]);
    same_bits(&x.ceil()?, &[-1.0, -0.0, -0.0, 0.0, 1.0, 2.0, 3.0, 3.0, -2.0, inf, -inf]);
    same_bits(&x.round()?, &[-2.0, -0.0, -0.0, 0.0, 0.0, 2.0, 2.0, 3.0, -3.0, inf, -inf]);
    same_bits(&x.trunc()?, &[-1.0, -0.0, -0.0, 0.0, 0.0, 1.0, 2.0, 2.0, -2.0, inf, -inf]);
    for y in [f64s(&[nan]).floor()?, f64s(&[nan]).round()?] {
        assert!(y.item::<f64>()?.is_nan());
    }
    let x32 = Tensor::from_vec(vec![0.5f32, 1.5, -2.5, 3.5], &[4])?;
    assert_eq!(x32.round()?.to_vec::<f32>()?, vec![0.0, 2.0, -2.0, 4.0]);
    assert!(Tensor::scalar(1i32).floor().is_err(), "floor needs a float dtype");
    // Piecewise constant: the gradient is 0 (PyTorch's).
    let xg = f64s(&[0.3, 1.7]).requires_grad_(true)?;
    let y = xg.floor()?.add(&xg.ceil()?)?.add(&xg.round()?)?.add(&xg.trunc()?)?.sum()?;
    assert_close(&tensor_core::grad(&[&y], &[&xg], false)?[0], &[0.0, 0.0], 0.0);
    Ok(())
}

#[test]
fn inverse_trigonometric_and_hyperbolic_values_and_gradients() -> Result<()> {
    let (s3, pi) = (3f64.sqrt(), std::f64::consts::PI);
    let x = f64s(&[0.0, 0.5, -1.0, 1.0]);
    assert_close(&x.asin()?, &[0.0, pi / 6.0, -pi / 2.0, pi / 2.0], 1e-14);
    assert_close(&x.acos()?, &[pi / 2.0, pi / 3.0, pi, 0.0], 1e-14);
    assert_close(&f64s(&[0.0, 1.0, -s3, 1.0 / s3]).atan()?, &[0.0, pi / 4.0, -pi / 3.0, pi / 6.0], 1e-14);
    // asinh x = ln(x + sqrt(x^2 + 1)), acosh x = ln(x + sqrt(x^2 - 1)), atanh x = ln((1 + x) / (1 - x)) / 2.
    assert_close(&f64s(&[0.0, 0.75, -0.75]).asinh()?, &[0.0, 2f64.ln(), -(2f64.ln())], 1e-14);
    assert_close(&f64s(&[1.0, 1.25, 5.0 / 3.0]).acosh()?, &[0.0, 2f64.ln(), 3f64.ln()], 1e-14);
    assert_close(&f64s(&[0.0, 0.6, -0.6]).atanh()?, &[0.0, 2f64.ln(), -(2f64.ln())], 1e-14);
    // Outside their domains: NaN; atanh(±1) = ±inf.
    assert!(f64s(&[1.5]).asin()?.item::<f64>()?.is_nan() && f64s(&[0.5]).acosh()?.item::<f64>()?.is_nan());
    same_bits(&f64s(&[1.0, -1.0]).atanh()?, &[f64::INFINITY, f64::NEG_INFINITY]);
    let inside = [0.3, -0.7, 0.1];
    check_grad(&inside, Tensor::asin, 1e-7)?;
    check_grad(&inside, Tensor::acos, 1e-7)?;
    check_grad(&[0.3, -2.0, 5.0], Tensor::atan, 1e-7)?;
    check_grad(&[0.3, -2.0, 5.0], Tensor::asinh, 1e-7)?;
    check_grad(&[1.5, 3.0, 10.0], Tensor::acosh, 1e-7)?;
    check_grad(&inside, Tensor::atanh, 1e-7)?;
    Ok(())
}

#[test]
fn fmod_is_exact_with_the_dividends_sign_and_differentiates() -> Result<()> {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let a = f64s(&[7.5, -7.5, 7.5, -0.0, 5.0, 1.0, inf, 1.0]);
    let b = f64s(&[2.0, 2.0, -2.0, 3.0, inf, 0.0, 2.0, nan]);
    let r = a.fmod(&b)?.to_vec::<f64>()?;
    assert_eq!(r[..5].iter().map(|v| v.to_bits()).collect::<Vec<_>>(), [1.5, -1.5, 1.5, -0.0, 5.0].map(f64::to_bits));
    assert!(r[5..].iter().all(|v| v.is_nan()), "fmod by 0, of inf, by NaN: NaN, got {r:?}");
    // Exact where `a - trunc(a / b) * b` rounds: 1e17 fmod 3 is 1e17 - 3 * 33333333333333333 = 1.
    assert_eq!(Tensor::scalar(1e17f64).fmod(3.0)?.item::<f64>()?, 1e17 % 3.0);
    let i = Tensor::from_vec(vec![7i64, -7, 7, 5], &[4])?;
    assert_eq!(i.fmod(&Tensor::from_vec(vec![3i64, 3, -3, 0], &[4])?)?.to_vec::<i64>()?, vec![1, -1, 1, 0]);
    // d/da = 1, d/db = -trunc(a / b).
    let (a, b) = (f64s(&[7.5, -4.0]).requires_grad_(true)?, f64s(&[2.0, 1.5]).requires_grad_(true)?);
    let g = tensor_core::grad(&[&a.fmod(&b)?.sum()?], &[&a, &b], false)?;
    assert_close(&g[0], &[1.0, 1.0], 0.0);
    assert_close(&g[1], &[-3.0, 2.0], 0.0);
    Ok(())
}

#[test]
fn is_nan_and_is_inf_detect_what_they_are_asked() -> Result<()> {
    let x = f64s(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -1.0]);
    assert_eq!(x.is_nan()?.to_vec::<bool>()?, vec![true, false, false, false, false]);
    assert_eq!(x.is_inf(true, true)?.to_vec::<bool>()?, vec![false, true, true, false, false]);
    assert_eq!(x.is_inf(true, false)?.to_vec::<bool>()?, vec![false, true, false, false, false]);
    assert_eq!(x.is_inf(false, true)?.to_vec::<bool>()?, vec![false, false, true, false, false]);
    assert_eq!(x.is_inf(false, false)?.to_vec::<bool>()?, vec![false; 5]);
    assert_eq!(Tensor::from_vec(vec![1i32, 2], &[2])?.is_inf(true, true)?.to_vec::<bool>()?, vec![false, false]);
    Ok(())
}

#[test]
fn prod_reduces_with_one_as_identity_and_its_gradient_handles_zeros() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    assert_close(&x.prod_axes(&[1], false)?, &[6.0, 120.0], 0.0);
    assert_close(&x.prod_axes(&[0], true)?, &[4.0, 10.0, 18.0], 0.0);
    assert_close(&x.prod_axes(&[0, 1], false)?, &[720.0], 0.0);
    assert_eq!(Tensor::from_vec(vec![2i64, -3, 4], &[3])?.prod_axes(&[0], false)?.item::<i64>()?, -24);
    assert_close(&Tensor::zeros(&[2, 0], DType::F64).prod_axes(&[1], false)?, &[1.0, 1.0], 0.0);
    // No zero: prod / x_i; one zero: the others' product there, 0 elsewhere; two: all 0.
    check_grad(&[1.5, -2.0, 0.5, 3.0], |x| x.prod_axes(&[0], false), 1e-7)?;
    check_grad(&[1.5, 0.0, 0.5, 3.0], |x| x.prod_axes(&[0], false), 1e-7)?;
    check_grad(&[0.0, 2.0, 0.0, 3.0], |x| x.prod_axes(&[0], false), 1e-7)?;
    let xg = f64s(&[2.0, 0.0, 5.0]).requires_grad_(true)?;
    let g = tensor_core::grad(&[&xg.prod_axes(&[0], false)?], &[&xg], false)?;
    assert_close(&g[0], &[0.0, 10.0, 0.0], 0.0);
    Ok(())
}

#[test]
fn cumulative_prod_exclusive_and_reverse_with_gradients() -> Result<()> {
    let x = f64s(&[1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_close(&x.cumulative_prod(0, false, false)?, &[1.0, 2.0, 6.0, 24.0, 120.0], 0.0);
    assert_close(&x.cumulative_prod(0, true, false)?, &[1.0, 1.0, 2.0, 6.0, 24.0], 0.0);
    assert_close(&x.cumulative_prod(0, false, true)?, &[120.0, 120.0, 60.0, 20.0, 5.0], 0.0);
    assert_close(&x.cumulative_prod(0, true, true)?, &[120.0, 60.0, 20.0, 5.0, 1.0], 0.0);
    let m = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3])?;
    assert_eq!(m.cumulative_prod(0, false, false)?.to_vec::<i32>()?, vec![1, 2, 3, 4, 10, 18]);
    assert_eq!(m.cumulative_prod(-1, false, false)?.to_vec::<i32>()?, vec![1, 2, 6, 4, 20, 120]);
    check_grad(&[1.5, -2.0, 0.5, 3.0], |x| x.cumulative_prod(0, false, false), 1e-7)?;
    check_grad(&[1.5, 0.0, 0.5, 3.0], |x| x.cumulative_prod(0, true, true), 1e-7)?;
    Ok(())
}

fn small_ops(x: &Tensor) -> Result<Vec<Tensor>> {
    let y = x.floor()?.add(&x.round()?)?.add(&x.tanh()?.asin()?)?.add(&x.atan()?)?.add(&x.asinh()?)?;
    let y = y.add(&x.tanh()?.mul(0.5)?.atanh()?)?.add(&x.abs()?.add(1.0)?.acosh()?)?.add(&x.fmod(0.7)?)?;
    let p = x.reshape([8isize, 8])?.prod_axes(&[1], false)?.sum()?.add(&x.reshape([8isize, 8])?.cumulative_prod(1, true, false)?.sum()?)?;
    let loss = y.sum()?.add(&p)?;
    let g = tensor_core::grad(&[&loss], &[x], false)?;
    Ok(vec![y, p, x.is_nan()?, g[0].clone()])
}

#[graph_fn]
fn small_ops_graph(x: &Tensor) -> Result<Vec<Tensor>> {
    small_ops(x)
}

#[test]
fn the_small_ops_give_eager_bits_in_a_graph() -> Result<()> {
    let x = Tensor::randn(&[64], DType::F32, 7).mul(0.9)?.requires_grad_(true)?;
    for (e, g) in small_ops(&x)?.iter().zip(&small_ops_graph(&x)?) {
        assert_bits_eq(e, g);
    }
    Ok(())
}
