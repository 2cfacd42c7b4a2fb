//! Elementwise ops against hand-computed values: arithmetic with tensors and Rust scalars on
//! either side, unary math, pow, clamp, maximum/minimum, comparisons, `where_`, and the
//! in-place ops (values, aliasing through clones, version counters).

use tensor_core::prelude::*;
use tensor_core::Element;
use tests::{assert_bools, assert_tensor, assert_tensor_close, assert_values, is_float, per_dtype, tensor, tol};

// ------------------------------------------------------------------------------ arithmetic

fn add_sub_mul_tensors<T: Element>() -> Result<()> {
    let a = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = tensor::<T>(&[10.0, 20.0, 30.0], &[3]);
    assert_tensor::<T>(&a.add(&b)?, &[2, 3], &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    assert_tensor::<T>(&a.sub(&b)?, &[2, 3], &[-9.0, -18.0, -27.0, -6.0, -15.0, -24.0]);
    assert_tensor::<T>(&a.mul(&b)?, &[2, 3], &[10.0, 40.0, 90.0, 40.0, 100.0, 180.0]);
    // The broadcast operand on the left.
    assert_tensor::<T>(&b.sub(&a)?, &[2, 3], &[9.0, 18.0, 27.0, 6.0, 15.0, 24.0]);
    // Operators on references and on owned values give the same.
    assert_tensor::<T>(&(&a + &b), &[2, 3], &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    assert_tensor::<T>(&(a.clone() - &b), &[2, 3], &[-9.0, -18.0, -27.0, -6.0, -15.0, -24.0]);
    assert_tensor::<T>(&(&a * b.clone()), &[2, 3], &[10.0, 40.0, 90.0, 40.0, 100.0, 180.0]);
    assert_tensor::<T>(&(a.clone() + b.clone()), &[2, 3], &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    // Both operands broadcast: [2, 1] op [1, 3] -> [2, 3].
    let col = tensor::<T>(&[1.0, 2.0], &[2, 1]);
    let row = tensor::<T>(&[10.0, 20.0, 30.0], &[1, 3]);
    assert_tensor::<T>(&(&col + &row), &[2, 3], &[11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
    assert_tensor::<T>(&(&col * &row), &[2, 3], &[10.0, 20.0, 30.0, 20.0, 40.0, 60.0]);
    // A 0-d tensor broadcasts against anything, on either side.
    let s = Tensor::scalar(T::from_f64(2.0));
    assert_tensor::<T>(&(&s - &a), &[2, 3], &[1.0, 0.0, -1.0, -2.0, -3.0, -4.0]);
    assert_tensor::<T>(&(&s * &s), &[], &[4.0]);
    // The inputs are unchanged.
    assert_values(&a, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(a.version(), 0);
    Ok(())
}
per_dtype!(add_sub_mul_tensors: f32, f64, i32, i64);

fn div_tensors<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[6.0, -7.0, 8.0, 9.0], &[4]);
    let y = tensor::<T>(&[2.0, 2.0, -4.0, 3.0], &[4]);
    // Integer division truncates toward zero (as Rust and torch.div(rounding_mode="trunc")).
    let expected = if is_float::<T>() { [3.0, -3.5, -2.0, 3.0] } else { [3.0, -3.0, -2.0, 3.0] };
    assert_tensor::<T>(&x.div(&y)?, &[4], &expected);
    assert_tensor::<T>(&(&x / &y), &[4], &expected);
    let col = tensor::<T>(&[8.0, 4.0], &[2, 1]);
    let row = tensor::<T>(&[1.0, 2.0, 4.0], &[3]);
    assert_tensor::<T>(&(&col / &row), &[2, 3], &[8.0, 4.0, 2.0, 4.0, 2.0, 1.0]);
    Ok(())
}
per_dtype!(div_tensors: f32, f64, i32, i64);

fn scalar_operands<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[1.0, 2.0, 5.0], &[3]);
    // Scalar on the right, through the operators and the methods.
    assert_tensor::<T>(&(&x + 1.0), &[3], &[2.0, 3.0, 6.0]);
    assert_tensor::<T>(&(&x - 1.0), &[3], &[0.0, 1.0, 4.0]);
    assert_tensor::<T>(&(&x * 2.0), &[3], &[2.0, 4.0, 10.0]);
    assert_tensor::<T>(&(x.clone() * 3), &[3], &[3.0, 6.0, 15.0]);
    assert_tensor::<T>(&x.add(10)?, &[3], &[11.0, 12.0, 15.0]);
    assert_tensor::<T>(&x.sub(1.0)?, &[3], &[0.0, 1.0, 4.0]);
    assert_tensor::<T>(&x.mul(-2)?, &[3], &[-2.0, -4.0, -10.0]);
    // Scalar on the left: the order matters for - and /.
    assert_tensor::<T>(&(1.0 + &x), &[3], &[2.0, 3.0, 6.0]);
    assert_tensor::<T>(&(2.0 - &x), &[3], &[1.0, 0.0, -3.0]);
    assert_tensor::<T>(&(2.0 * &x), &[3], &[2.0, 4.0, 10.0]);
    assert_tensor::<T>(&(10 - x.clone()), &[3], &[9.0, 8.0, 5.0]);
    assert_tensor::<T>(&(2i64 * &x), &[3], &[2.0, 4.0, 10.0]);
    if is_float::<T>() {
        assert_tensor::<T>(&(&x / 2.0), &[3], &[0.5, 1.0, 2.5]);
        assert_tensor::<T>(&x.div(4.0)?, &[3], &[0.25, 0.5, 1.25]);
        assert_tensor::<T>(&(10.0 / &x), &[3], &[10.0, 5.0, 2.0]);
        assert_tensor_close::<T>(&(1.0 / x.clone()), &[3], &[1.0, 0.5, 0.2], tol::<T>());
        // A float scalar keeps its fraction on a float tensor.
        assert_tensor::<T>(&(&x * 0.5), &[3], &[0.5, 1.0, 2.5]);
    } else {
        assert_tensor::<T>(&(&x / 2.0), &[3], &[0.0, 1.0, 2.0]);
        assert_tensor::<T>(&(10 / &x), &[3], &[10.0, 5.0, 2.0]);
        assert_tensor::<T>(&(7.0 / &x), &[3], &[7.0, 3.0, 1.0]);
        // A scalar takes the tensor's dtype as `as` converts it: 2.9 -> 2 (no promotion).
        assert_tensor::<T>(&(&x * 2.9), &[3], &[2.0, 4.0, 10.0]);
    }
    // A 0-d tensor with a scalar stays 0-d.
    assert_tensor::<T>(&(Tensor::scalar(T::from_f64(3.0)) * 2), &[], &[6.0]);
    Ok(())
}
per_dtype!(scalar_operands: f32, f64, i32, i64);

#[test]
fn float_scalar_on_left_of_division_f32_is_exact() {
    // 1 / 5 in f32 is the f32 nearest to 0.2, not the f64 one.
    let x = Tensor::from_vec(vec![5.0f32], &[1]).unwrap();
    let y: Tensor = 1.0 / &x;
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.2f32]);
    assert_eq!((1.0f64 / &x).dtype(), DType::F32);
}

#[test]
fn integer_arithmetic_wraps_and_division_by_zero_gives_zero() -> Result<()> {
    let x = Tensor::from_vec(vec![i32::MAX, i32::MIN, 5, -5], &[4])?;
    assert_eq!((&x + 1).to_vec::<i32>()?, vec![i32::MIN, i32::MIN + 1, 6, -4]);
    assert_eq!((-&x).to_vec::<i32>()?, vec![-i32::MAX, i32::MIN, -5, 5]);
    let zeros = Tensor::zeros(&[4], DType::I32);
    assert_eq!((&x / &zeros).to_vec::<i32>()?, vec![0, 0, 0, 0]);
    assert_eq!((&x / 0).to_vec::<i32>()?, vec![0, 0, 0, 0]);
    let y = Tensor::from_vec(vec![i64::MAX, 3], &[2])?;
    assert_eq!((&y * 2).to_vec::<i64>()?, vec![-2, 6]);
    Ok(())
}

#[test]
fn float_division_by_zero_is_ieee() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f64, -1.0, 0.0], &[3])?;
    let v = (&x / 0.0).to_vec::<f64>()?;
    assert_eq!(v[0], f64::INFINITY);
    assert_eq!(v[1], f64::NEG_INFINITY);
    assert!(v[2].is_nan());
    Ok(())
}

// ------------------------------------------------------------------------------ unary ops

fn neg_abs_relu_sign<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[-2.0, 0.0, 3.0, -7.0, 1.0, 5.0], &[2, 3]);
    assert_tensor::<T>(&x.neg()?, &[2, 3], &[2.0, 0.0, -3.0, 7.0, -1.0, -5.0]);
    assert_tensor::<T>(&(-&x), &[2, 3], &[2.0, 0.0, -3.0, 7.0, -1.0, -5.0]);
    assert_tensor::<T>(&(-x.clone()), &[2, 3], &[2.0, 0.0, -3.0, 7.0, -1.0, -5.0]);
    assert_tensor::<T>(&x.abs()?, &[2, 3], &[2.0, 0.0, 3.0, 7.0, 1.0, 5.0]);
    assert_tensor::<T>(&x.relu()?, &[2, 3], &[0.0, 0.0, 3.0, 0.0, 1.0, 5.0]);
    assert_tensor::<T>(&x.sign()?, &[2, 3], &[-1.0, 0.0, 1.0, -1.0, 1.0, 1.0]);
    // 0-d works too.
    assert_tensor::<T>(&Tensor::scalar(T::from_f64(-4.0)).abs()?, &[], &[4.0]);
    Ok(())
}
per_dtype!(neg_abs_relu_sign: f32, f64, i32, i64);

#[test]
fn unary_float_ops_keep_nan_and_signed_zero() -> Result<()> {
    let x = Tensor::from_vec(vec![f64::NAN, -0.0, f64::NEG_INFINITY], &[3])?;
    let r = x.relu()?.to_vec::<f64>()?;
    assert!(r[0].is_nan(), "relu(NaN) is NaN, as in PyTorch");
    assert_eq!(r[1], 0.0);
    assert_eq!(r[2], 0.0);
    let a = x.abs()?.to_vec::<f64>()?;
    assert!(a[0].is_nan());
    assert!(a[1] == 0.0 && a[1].is_sign_positive());
    assert_eq!(a[2], f64::INFINITY);
    let s = x.sign()?.to_vec::<f64>()?;
    assert!(s[0].is_nan());
    assert_eq!(s[1], 0.0);
    assert_eq!(s[2], -1.0);
    Ok(())
}

#[test]
fn logical_not() -> Result<()> {
    let b = Tensor::from_vec(vec![true, false, false], &[3])?;
    assert_bools(&b.logical_not()?, &[3], &[false, true, true]);
    Ok(())
}

const E: f64 = std::f64::consts::E;

fn exp_log_sqrt<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[-1.0, 0.0, 0.5, 2.0], &[2, 2]);
    let exp = [0.36787944117144233, 1.0, 1.6487212707001282, 7.38905609893065];
    assert_tensor_close::<T>(&x.exp()?, &[2, 2], &exp, tol::<T>());
    let y = tensor::<T>(&[1.0, E, 0.5, 4.0], &[4]);
    assert_tensor_close::<T>(&y.log()?, &[4], &[0.0, 1.0, -std::f64::consts::LN_2, 1.3862943611198906], tol::<T>());
    let z = tensor::<T>(&[0.0, 1.0, 2.0, 6.25], &[4]);
    assert_tensor_close::<T>(&z.sqrt()?, &[4], &[0.0, 1.0, std::f64::consts::SQRT_2, 2.5], tol::<T>());
    // exp(0) = 1, sqrt of a square, log(1) = 0 are exact.
    assert_tensor::<T>(&Tensor::scalar(T::zero()).exp()?, &[], &[1.0]);
    assert_tensor::<T>(&tensor::<T>(&[0.0, 1.0, 4.0, 6.25], &[4]).sqrt()?, &[4], &[0.0, 1.0, 2.0, 2.5]);
    assert_tensor::<T>(&Tensor::scalar(T::one()).log()?, &[], &[0.0]);
    // Edge values: log(0) = -inf, log(-1) = NaN, sqrt(-1) = NaN, exp(-inf) = 0, exp(large) = inf.
    let edge = tensor::<T>(&[0.0, -1.0], &[2]);
    let l = tests::as_f64(&edge.log()?);
    assert!(l[0] == f64::NEG_INFINITY && l[1].is_nan(), "log edge values: {l:?}");
    assert!(tests::as_f64(&edge.sqrt()?)[1].is_nan());
    let big = tensor::<T>(&[f64::NEG_INFINITY, 1000.0], &[2]);
    assert_eq!(tests::as_f64(&big.exp()?), vec![0.0, f64::INFINITY]);
    Ok(())
}
per_dtype!(exp_log_sqrt: f32, f64);

fn tanh_sigmoid<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[0.0, 0.5, -1.0, 2.0, 20.0, -20.0], &[6]);
    let tanh = [0.0, 0.46211715726000974, -0.7615941559557649, 0.9640275800758169, 1.0, -1.0];
    assert_tensor_close::<T>(&x.tanh()?, &[6], &tanh, tol::<T>());
    let sig = [0.5, 0.6224593312018546, 0.2689414213699951, 0.8807970779778823, 0.9999999979388463, 2.0611536181902037e-9];
    assert_tensor_close::<T>(&x.sigmoid()?, &[6], &sig, tol::<T>());
    // The tiny tail is accurate relatively, not just absolutely.
    let tail = tests::as_f64(&x.sigmoid()?)[5];
    assert!((tail / 2.0611536181902037e-9 - 1.0).abs() < 1e-5, "sigmoid(-20) = {tail}");
    // Exact at 0; saturates without NaN for huge inputs.
    assert_tensor::<T>(&Tensor::scalar(T::zero()).sigmoid()?, &[], &[0.5]);
    assert_tensor::<T>(&Tensor::scalar(T::zero()).tanh()?, &[], &[0.0]);
    let huge = tensor::<T>(&[-1000.0, 1000.0], &[2]);
    assert_tensor::<T>(&huge.sigmoid()?, &[2], &[0.0, 1.0]);
    assert_tensor::<T>(&huge.tanh()?, &[2], &[-1.0, 1.0]);
    // tanh is odd.
    let y = tensor::<T>(&[0.1, 0.7, 3.0], &[3]);
    let pos = tests::as_f64(&y.tanh()?);
    let neg = tests::as_f64(&y.neg()?.tanh()?);
    assert_eq!(pos, neg.iter().map(|v| -v).collect::<Vec<_>>());
    Ok(())
}
per_dtype!(tanh_sigmoid: f32, f64);

#[test]
fn f32_transcendentals_are_within_a_few_ulp_of_f64() -> Result<()> {
    let xs: Vec<f32> = (-400..=400).map(|i| i as f32 * 0.05).collect();
    let t = Tensor::from_vec(xs.clone(), &[xs.len()])?;
    let (e, th, sg) = (t.exp()?.to_vec::<f32>()?, t.tanh()?.to_vec::<f32>()?, t.sigmoid()?.to_vec::<f32>()?);
    for (i, &x) in xs.iter().enumerate() {
        let x64 = x as f64;
        let ulp = |v: f64| (v.abs() as f32).max(f32::MIN_POSITIVE) as f64 * f32::EPSILON as f64;
        let want = x64.exp();
        assert!((e[i] as f64 - want).abs() <= 3.0 * ulp(want), "exp({x}) = {} vs {want}", e[i]);
        let want = x64.tanh();
        assert!((th[i] as f64 - want).abs() <= 4e-7_f64.max(3.0 * ulp(want)), "tanh({x}) = {} vs {want}", th[i]);
        let want = 1.0 / (1.0 + (-x64).exp());
        assert!((sg[i] as f64 - want).abs() <= 4e-7_f64.max(3.0 * ulp(want)), "sigmoid({x}) = {} vs {want}", sg[i]);
    }
    Ok(())
}

// ------------------------------------------------------------------------------ pow, clamp, maximum

fn pow_ops<T: Element>() -> Result<()> {
    let base = tensor::<T>(&[2.0, 3.0, 4.0, -2.0], &[4]);
    let exp = tensor::<T>(&[3.0, 2.0, 0.0, 3.0], &[4]);
    assert_tensor::<T>(&base.pow(&exp)?, &[4], &[8.0, 9.0, 1.0, -8.0]);
    assert_tensor::<T>(&base.powf(2.0)?, &[4], &[4.0, 9.0, 16.0, 4.0]);
    assert_tensor::<T>(&base.pow(3)?, &[4], &[8.0, 27.0, 64.0, -8.0]);
    // Broadcast exponent row against a column of bases.
    let col = tensor::<T>(&[2.0, 3.0], &[2, 1]);
    let row = tensor::<T>(&[0.0, 1.0, 2.0], &[3]);
    assert_tensor::<T>(&col.pow(&row)?, &[2, 3], &[1.0, 2.0, 4.0, 1.0, 3.0, 9.0]);
    if is_float::<T>() {
        let x = tensor::<T>(&[4.0, 9.0, 0.25], &[3]);
        assert_tensor::<T>(&x.powf(0.5)?, &[3], &[2.0, 3.0, 0.5]);
        assert_tensor_close::<T>(&x.powf(-1.0)?, &[3], &[0.25, 1.0 / 9.0, 4.0], tol::<T>());
        assert_tensor_close::<T>(&Tensor::scalar(T::from_f64(2.0)).powf(0.5)?, &[], &[std::f64::consts::SQRT_2], tol::<T>());
    }
    Ok(())
}
per_dtype!(pow_ops: f32, f64, i32, i64);

fn clamp_ops<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[-3.0, -1.0, 0.0, 2.0, 5.0, 1.0], &[2, 3]);
    assert_tensor::<T>(&x.clamp(-1.0, 2.0)?, &[2, 3], &[-1.0, -1.0, 0.0, 2.0, 2.0, 1.0]);
    assert_tensor::<T>(&x.clamp(-1, 2)?, &[2, 3], &[-1.0, -1.0, 0.0, 2.0, 2.0, 1.0]);
    assert_tensor::<T>(&x.clamp_min(0.0)?, &[2, 3], &[0.0, 0.0, 0.0, 2.0, 5.0, 1.0]);
    assert_tensor::<T>(&x.clamp_max(1)?, &[2, 3], &[-3.0, -1.0, 0.0, 1.0, 1.0, 1.0]);
    // An empty range clamps everything to max, as PyTorch does (min applied first).
    assert_tensor::<T>(&x.clamp(3, 1)?, &[2, 3], &[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
    Ok(())
}
per_dtype!(clamp_ops: f32, f64, i32, i64);

#[test]
fn clamp_keeps_nan() -> Result<()> {
    let x = Tensor::from_vec(vec![f32::NAN, 5.0, -5.0], &[3])?;
    let c = x.clamp(-1.0, 1.0)?.to_vec::<f32>()?;
    assert!(c[0].is_nan());
    assert_eq!(&c[1..], &[1.0, -1.0]);
    Ok(())
}

fn maximum_minimum<T: Element>() -> Result<()> {
    let a = tensor::<T>(&[1.0, 5.0, -3.0, 4.0, 0.0, 2.0], &[2, 3]);
    let b = tensor::<T>(&[2.0, 2.0, 2.0], &[3]);
    assert_tensor::<T>(&a.maximum(&b)?, &[2, 3], &[2.0, 5.0, 2.0, 4.0, 2.0, 2.0]);
    assert_tensor::<T>(&a.minimum(&b)?, &[2, 3], &[1.0, 2.0, -3.0, 2.0, 0.0, 2.0]);
    assert_tensor::<T>(&b.maximum(&a)?, &[2, 3], &[2.0, 5.0, 2.0, 4.0, 2.0, 2.0]);
    assert_tensor::<T>(&a.maximum(0)?, &[2, 3], &[1.0, 5.0, 0.0, 4.0, 0.0, 2.0]);
    assert_tensor::<T>(&a.minimum(1.0)?, &[2, 3], &[1.0, 1.0, -3.0, 1.0, 0.0, 1.0]);
    Ok(())
}
per_dtype!(maximum_minimum: f32, f64, i32, i64);

#[test]
fn maximum_minimum_propagate_nan() -> Result<()> {
    let a = Tensor::from_vec(vec![1.0f64, f64::NAN, 3.0], &[3])?;
    let b = Tensor::from_vec(vec![f64::NAN, 0.0, 1.0], &[3])?;
    for r in [a.maximum(&b)?, a.minimum(&b)?, b.maximum(&a)?, b.minimum(&a)?] {
        let v = r.to_vec::<f64>()?;
        assert!(v[0].is_nan() && v[1].is_nan(), "NaN wins in {r}");
    }
    assert_eq!(a.maximum(&b)?.to_vec::<f64>()?[2], 3.0);
    assert_eq!(a.minimum(&b)?.to_vec::<f64>()?[2], 1.0);
    Ok(())
}

// ------------------------------------------------------------------------------ comparisons

fn comparisons<T: Element>() -> Result<()> {
    let a = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = tensor::<T>(&[2.0, 2.0, 5.0], &[3]);
    assert_bools(&a.eq(&b)?, &[2, 3], &[false, true, false, false, false, false]);
    assert_bools(&a.ne(&b)?, &[2, 3], &[true, false, true, true, true, true]);
    assert_bools(&a.lt(&b)?, &[2, 3], &[true, false, true, false, false, false]);
    assert_bools(&a.le(&b)?, &[2, 3], &[true, true, true, false, false, false]);
    assert_bools(&a.gt(&b)?, &[2, 3], &[false, false, false, true, true, true]);
    assert_bools(&a.ge(&b)?, &[2, 3], &[false, true, false, true, true, true]);
    // Scalar right-hand sides (int and float literals).
    assert_bools(&a.eq(3)?, &[2, 3], &[false, false, true, false, false, false]);
    assert_bools(&a.ne(3.0)?, &[2, 3], &[true, true, false, true, true, true]);
    assert_bools(&a.lt(3)?, &[2, 3], &[true, true, false, false, false, false]);
    assert_bools(&a.le(3.0)?, &[2, 3], &[true, true, true, false, false, false]);
    assert_bools(&a.gt(4)?, &[2, 3], &[false, false, false, false, true, true]);
    assert_bools(&a.ge(4.0)?, &[2, 3], &[false, false, false, true, true, true]);
    // compare() is the Result form.
    assert_bools(&a.compare(tensor_core::ops::CmpOp::Gt, &b)?, &[2, 3], &[false, false, false, true, true, true]);
    // 0-d against 0-d.
    let s = Tensor::scalar(T::from_f64(2.0));
    assert_bools(&s.lt(&Tensor::scalar(T::from_f64(3.0)))?, &[], &[true]);
    Ok(())
}
per_dtype!(comparisons: f32, f64, i32, i64);

#[test]
fn comparisons_with_nan_and_bool() -> Result<()> {
    let a = Tensor::from_vec(vec![f32::NAN, 1.0], &[2])?;
    assert_bools(&a.eq(&a)?, &[2], &[false, true]);
    assert_bools(&a.ne(&a)?, &[2], &[true, false]);
    assert_bools(&a.lt(2.0)?, &[2], &[false, true]);
    assert_bools(&a.ge(f32::NEG_INFINITY)?, &[2], &[false, true]);
    let p = Tensor::from_vec(vec![true, false, true], &[3])?;
    let q = Tensor::from_vec(vec![true, true, false], &[3])?;
    assert_bools(&p.eq(&q)?, &[3], &[true, false, false]);
    assert_bools(&p.gt(&q)?, &[3], &[false, false, true]);
    assert_bools(&p.eq(true)?, &[3], &[true, false, true]);
    Ok(())
}

// ------------------------------------------------------------------------------ where_

fn where_select<T: Element>() -> Result<()> {
    let cond = Tensor::from_vec(vec![true, false], &[2, 1])?;
    let a = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = Tensor::scalar(T::from_f64(-1.0));
    assert_tensor::<T>(&Tensor::where_(&cond, &a, &b)?, &[2, 3], &[1.0, 2.0, 3.0, -1.0, -1.0, -1.0]);
    // Condition from a comparison; both branches tensors of the full shape.
    let c = a.gt(3)?;
    let z = a.neg()?;
    assert_tensor::<T>(&Tensor::where_(&c, &a, &z)?, &[2, 3], &[-1.0, -2.0, -3.0, 4.0, 5.0, 6.0]);
    // All three broadcast: cond [3], a [2, 1], b 0-d -> [2, 3].
    let c = Tensor::from_vec(vec![true, false, true], &[3])?;
    let col = tensor::<T>(&[10.0, 20.0], &[2, 1]);
    assert_tensor::<T>(&Tensor::where_(&c, &col, &b)?, &[2, 3], &[10.0, -1.0, 10.0, 20.0, -1.0, 20.0]);
    Ok(())
}
per_dtype!(where_select: f32, f64, i32, i64);

#[test]
fn where_on_bool_values() -> Result<()> {
    let c = Tensor::from_vec(vec![true, false], &[2])?;
    let a = Tensor::from_vec(vec![true, true], &[2])?;
    let b = Tensor::scalar(false);
    assert_bools(&Tensor::where_(&c, &a, &b)?, &[2], &[true, false]);
    Ok(())
}

// ------------------------------------------------------------------------------ in place

fn in_place_ops<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let alias = x.clone();
    let saved = &x * 1; // computed before: must not change (copy on write)
    assert_eq!(x.version(), 0);

    x.add_(&tensor::<T>(&[10.0, 20.0, 30.0], &[3]))?; // broadcast rhs
    assert_tensor::<T>(&alias, &[2, 3], &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    assert_eq!((x.version(), alias.version()), (1, 1));

    x.sub_(1)?;
    assert_tensor::<T>(&alias, &[2, 3], &[10.0, 21.0, 32.0, 13.0, 24.0, 35.0]);
    x.mul_(&tensor::<T>(&[2.0, 1.0], &[2, 1]))?;
    assert_tensor::<T>(&alias, &[2, 3], &[20.0, 42.0, 64.0, 13.0, 24.0, 35.0]);
    x.div_(2.0)?;
    let halves = if is_float::<T>() { [10.0, 21.0, 32.0, 6.5, 12.0, 17.5] } else { [10.0, 21.0, 32.0, 6.0, 12.0, 17.0] };
    assert_tensor::<T>(&alias, &[2, 3], &halves);
    x.div_(&Tensor::scalar(T::one()))?;
    assert_eq!(alias.version(), 5);

    x.assign_(&tensor::<T>(&[7.0, 8.0, 9.0], &[3]))?;
    assert_tensor::<T>(&alias, &[2, 3], &[7.0, 8.0, 9.0, 7.0, 8.0, 9.0]);
    assert_eq!(x.version(), 6);
    x.assign_(&Tensor::scalar(T::from_f64(4.0)))?;
    assert_tensor::<T>(&alias, &[2, 3], &[4.0; 6]);
    x.zero_()?;
    assert_tensor::<T>(&alias, &[2, 3], &[0.0; 6]);
    assert_eq!(x.version(), 8);

    // Results computed before the in-place ops kept their values.
    assert_tensor::<T>(&saved, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    Ok(())
}
per_dtype!(in_place_ops: f32, f64, i32, i64);

#[test]
fn in_place_on_detached_copy_does_not_change_the_original() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    let d = x.detach();
    d.add_(1.0)?;
    assert_eq!(d.to_vec::<f32>()?, vec![2.0, 3.0]);
    assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0]);
    assert_eq!((x.version(), d.version()), (0, 1));
    x.mul_(10.0)?;
    assert_eq!(d.to_vec::<f32>()?, vec![2.0, 3.0]);
    Ok(())
}
