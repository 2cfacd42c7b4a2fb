//! Creating tensors, reading them back, casting between every pair of dtypes, random
//! tensors, handle semantics, and printing (PyTorch's format, with Rust dtype names).

use tensor_core::nn::init;
use tensor_core::prelude::*;
use tensor_core::Element;
use tests::{assert_bools, assert_tensor, per_dtype, tensor};

// ------------------------------------------------------------------------------ creation

fn from_vec_and_metadata<T: Element>() -> Result<()> {
    let t = Tensor::from_vec(tests::vals::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), &[2, 3])?;
    assert_eq!(t.dtype(), T::DTYPE);
    assert_eq!(t.shape(), Shape::new(&[2, 3]));
    assert_eq!(t.dims(), vec![2, 3]);
    assert_eq!((t.rank(), t.numel()), (2, 6));
    assert_eq!(t.to_vec::<T>()?, tests::vals::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    // 0-d from a one-element vec and an empty shape; empty tensors.
    let s = Tensor::from_vec(vec![T::one()], &[])?;
    assert_eq!((s.rank(), s.numel()), (0, 1));
    assert_eq!(s.item::<T>()?, T::one());
    let e = Tensor::from_vec(Vec::<T>::new(), &[0, 4])?;
    assert_eq!((e.dims().to_vec(), e.numel()), (vec![0, 4], 0));
    assert!(e.to_vec::<T>()?.is_empty());
    // The length must match the shape.
    let err = Tensor::from_vec(tests::vals::<T>(&[1.0; 5]), &[2, 3]).unwrap_err();
    assert!(matches!(err, Error::DataLength { len: 5, numel: 6, .. }), "{err:?}");
    assert!(Tensor::from_vec(Vec::<T>::new(), &[]).is_err());
    Ok(())
}
per_dtype!(from_vec_and_metadata: f32, f64, i32, i64, bool);

fn filled<T: Element>() -> Result<()> {
    let d = T::DTYPE;
    assert_eq!(Tensor::zeros(&[2, 2], d).to_vec::<T>()?, vec![T::zero(); 4]);
    assert_eq!(Tensor::ones(&[3], d).to_vec::<T>()?, vec![T::one(); 3]);
    assert_eq!(Tensor::zeros(&[], d).dims(), Vec::<usize>::new());
    assert_eq!(Tensor::ones(&[], d).item::<T>()?, T::one());
    assert_eq!(Tensor::full(&[2, 1], 1, d).to_vec::<T>()?, vec![T::one(); 2]);
    assert_eq!(Tensor::zeros(&[0, 3], d).numel(), 0);
    let x = Tensor::full(&[2, 3], 1, d);
    assert_eq!(x.zeros_like().to_vec::<T>()?, vec![T::zero(); 6]);
    assert_eq!(x.ones_like().dims(), vec![2, 3]);
    assert_eq!(x.ones_like().dtype(), d);
    Ok(())
}
per_dtype!(filled: f32, f64, i32, i64, bool);

#[test]
fn full_converts_the_value_to_the_dtype() -> Result<()> {
    assert_eq!(Tensor::full(&[2], 2.75, DType::F32).to_vec::<f32>()?, vec![2.75, 2.75]);
    assert_eq!(Tensor::full(&[2], 2.75, DType::I32).to_vec::<i32>()?, vec![2, 2]);
    assert_eq!(Tensor::full(&[2], -7, DType::F64).to_vec::<f64>()?, vec![-7.0, -7.0]);
    assert_eq!(Tensor::full(&[1], 3_000_000_000i64, DType::I64).to_vec::<i64>()?, vec![3_000_000_000]);
    assert_eq!(Tensor::full(&[2], 0.5, DType::Bool).to_vec::<bool>()?, vec![true, true]);
    assert_eq!(Tensor::full(&[2], 0, DType::Bool).to_vec::<bool>()?, vec![false, false]);
    assert_eq!(Tensor::full(&[1], true, DType::I64).to_vec::<i64>()?, vec![1]);
    assert_eq!(Tensor::scalar(2.5f64).item::<f64>()?, 2.5);
    assert_eq!(Tensor::scalar(-3i32).dtype(), DType::I32);
    assert!(Tensor::scalar(true).item::<bool>()?);
    Ok(())
}

#[test]
fn arange_and_arange_step() {
    assert_eq!(Tensor::arange(0i64, 5).to_vec::<i64>().unwrap(), vec![0, 1, 2, 3, 4]);
    assert_eq!(Tensor::arange(-2i32, 2).to_vec::<i32>().unwrap(), vec![-2, -1, 0, 1]);
    assert_eq!(Tensor::arange(0.0f32, 3.0).to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0]);
    assert_eq!(Tensor::arange(0.5f64, 3.0).to_vec::<f64>().unwrap(), vec![0.5, 1.5, 2.5]);
    assert_eq!(Tensor::arange(3i64, 3).numel(), 0);
    assert_eq!(Tensor::arange(5i64, 2).dims(), vec![0]);
    assert_eq!(Tensor::arange_step(0.0f64, 1.0, 0.25).to_vec::<f64>().unwrap(), vec![0.0, 0.25, 0.5, 0.75]);
    assert_eq!(Tensor::arange_step(0i64, 10, 3).to_vec::<i64>().unwrap(), vec![0, 3, 6, 9]);
    assert_eq!(Tensor::arange_step(5i32, 0, -2).to_vec::<i32>().unwrap(), vec![5, 3, 1]);
    assert_eq!(Tensor::arange_step(1.0f32, 0.0, -0.5).to_vec::<f32>().unwrap(), vec![1.0, 0.5]);
    assert_eq!(Tensor::arange_step(0i64, 5, -1).numel(), 0);
    // The end is exclusive even when the step lands on it.
    assert_eq!(Tensor::arange_step(0.0f64, 1.0, 0.5).to_vec::<f64>().unwrap(), vec![0.0, 0.5]);
    assert_eq!(Tensor::arange(0i64, 4).dtype(), DType::I64);
}

// ------------------------------------------------------------------------------ random

fn random_is_seeded_and_in_range<T: Element>() -> Result<()> {
    let d = T::DTYPE;
    let a = Tensor::rand(&[1000], d, 42).to_vec::<T>()?;
    assert_eq!(a, Tensor::rand(&[1000], d, 42).to_vec::<T>()?, "same seed, same values");
    assert_ne!(a, Tensor::rand(&[1000], d, 43).to_vec::<T>()?, "another seed, other values");
    let f: Vec<f64> = a.iter().map(|v| v.to_f64()).collect();
    assert!(f.iter().all(|&v| (0.0..1.0).contains(&v)), "uniform in [0, 1)");
    let mean = f.iter().sum::<f64>() / f.len() as f64;
    assert!((mean - 0.5).abs() < 0.05, "uniform mean {mean}");
    // A generator gives a stream: consecutive draws differ, the same seed replays them.
    let g1 = Generator::new(7);
    let g2 = Generator::new(7);
    let (x1, x2) = (init::uniform(&[4], 0.0, 1.0, d, &g1)?, init::uniform(&[4], 0.0, 1.0, d, &g1)?);
    assert_ne!(x1.to_vec::<T>()?, x2.to_vec::<T>()?);
    assert_eq!(x1.to_vec::<T>()?, init::uniform(&[4], 0.0, 1.0, d, &g2)?.to_vec::<T>()?);
    // uniform stays in [low, high).
    let u = init::uniform(&[2000], -3.0, 5.0, d, &g1)?;
    let u: Vec<f64> = u.to_vec::<T>()?.iter().map(|v| v.to_f64()).collect();
    assert!(u.iter().all(|&v| (-3.0..5.0).contains(&v)));
    assert!(u.iter().any(|&v| v < -2.0) && u.iter().any(|&v| v > 4.0), "covers the range");
    // randn: the moments of 10k samples.
    let n = Tensor::randn(&[10_000], d, 3);
    assert_eq!(n.dims(), vec![10_000]);
    assert_eq!(n.to_vec::<T>()?, Tensor::randn(&[10_000], d, 3).to_vec::<T>()?);
    let v: Vec<f64> = n.to_vec::<T>()?.iter().map(|v| v.to_f64()).collect();
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
    assert!(mean.abs() < 0.05, "randn mean {mean}");
    assert!((std - 1.0).abs() < 0.05, "randn std {std}");
    assert!(v.iter().any(|&x| x < -2.0) && v.iter().any(|&x| x > 2.0), "randn has tails");
    let g = Generator::new(9);
    assert_eq!(init::normal(&[2, 3], 0.0, 1.0, d, &g)?.dims(), vec![2, 3]);
    Ok(())
}
per_dtype!(random_is_seeded_and_in_range: f32, f64);

// ------------------------------------------------------------------------------ conversion

fn ndarray_round_trip<T: Element>() -> Result<()> {
    let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[2, 3]), tests::vals::<T>(&[1.0, 0.0, 3.0, 4.0, 0.0, 6.0])).unwrap();
    let t = Tensor::from(a.clone());
    assert_eq!((t.dtype(), t.dims().to_vec()), (T::DTYPE, vec![2, 3]));
    assert_eq!(t.to_array::<T>()?, a);
    assert_eq!(t.to_array::<T>()?[[1, 0]], a[[1, 0]]);
    // A non-contiguous result reads back in logical order.
    let tt = t.t()?;
    assert_eq!(tt.to_array::<T>()?, a.t().to_owned());
    assert_eq!(tt.to_vec::<T>()?, a.t().iter().copied().collect::<Vec<_>>());
    // An ndarray built from a transposed view keeps its logical order too.
    let at = a.t().to_owned();
    assert_eq!(Tensor::from(at.clone()).to_vec::<T>()?, at.iter().copied().collect::<Vec<_>>());
    // 0-d arrays.
    let z = Tensor::from(ndarray::arr0(T::one()).into_dyn());
    assert_eq!((z.rank(), z.item::<T>()?), (0, T::one()));
    Ok(())
}
per_dtype!(ndarray_round_trip: f32, f64, i32, i64, bool);

#[test]
fn item_reads_one_element() -> Result<()> {
    assert_eq!(Tensor::scalar(4.5f32).item::<f32>()?, 4.5);
    assert_eq!(Tensor::from_vec(vec![9i64], &[1, 1, 1])?.item::<i64>()?, 9);
    let err = Tensor::from_vec(vec![1i32, 2], &[2])?.item::<i32>().unwrap_err();
    assert!(matches!(err, Error::NotOneElement { numel: 2, .. }), "{err:?}");
    assert!(Tensor::zeros(&[0], DType::F32).item::<f32>().is_err());
    // The type parameter must be the dtype.
    let err = Tensor::scalar(1.0f32).item::<f64>().unwrap_err();
    assert!(matches!(err, Error::DTypeMismatch { expected: DType::F64, found: DType::F32, .. }), "{err:?}");
    assert!(Tensor::scalar(1i32).to_vec::<i64>().is_err());
    assert!(Tensor::scalar(true).to_array::<i32>().is_err());
    Ok(())
}

// ------------------------------------------------------------------------------ cast

#[test]
fn cast_between_every_pair_of_dtypes() -> Result<()> {
    // Values every dtype can hold exactly (as 0/1 for bool).
    let src = [0.0, 1.0, 0.0, 1.0];
    for from in DType::ALL {
        let x = Tensor::from_vec(src.to_vec(), &[2, 2])?.cast(from)?;
        assert_eq!(x.dtype(), from);
        for to in DType::ALL {
            let y = x.cast(to)?;
            assert_eq!((y.dtype(), y.dims().to_vec()), (to, vec![2, 2]), "{from} -> {to}");
            assert_eq!(tests::as_f64(&y), src, "{from} -> {to}");
            assert_eq!(tests::as_f64(&y.cast(from)?), src, "{from} -> {to} -> {from}");
        }
    }
    Ok(())
}

#[test]
fn cast_rounds_and_wraps_as_rust_as_does() -> Result<()> {
    let f = Tensor::from_vec(vec![-2.7f64, -0.5, 0.0, 1.5, 3.9, 1e10], &[6])?;
    assert_eq!(f.cast(DType::I32)?.to_vec::<i32>()?, vec![-2, 0, 0, 1, 3, i32::MAX]);
    assert_eq!(f.cast(DType::I64)?.to_vec::<i64>()?, vec![-2, 0, 0, 1, 3, 10_000_000_000]);
    assert_bools(&f.cast(DType::Bool)?, &[6], &[true, true, false, true, true, true]);
    assert_eq!(f.cast(DType::F32)?.to_vec::<f32>()?, vec![-2.7f32, -0.5, 0.0, 1.5, 3.9, 1e10]);
    let nan = Tensor::from_vec(vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY], &[3])?;
    assert_eq!(nan.cast(DType::I32)?.to_vec::<i32>()?, vec![0, i32::MAX, i32::MIN]);
    assert_bools(&nan.cast(DType::Bool)?, &[3], &[true, true, true]);
    assert!(nan.cast(DType::F64)?.to_vec::<f64>()?[0].is_nan());
    let big = Tensor::from_vec(vec![(1i64 << 32) + 5, -1, i64::MIN], &[3])?;
    assert_eq!(big.cast(DType::I32)?.to_vec::<i32>()?, vec![5, -1, 0]);
    assert_bools(&big.cast(DType::Bool)?, &[3], &[true, true, true]);
    let b = Tensor::from_vec(vec![true, false], &[2])?;
    assert_eq!(b.cast(DType::F32)?.to_vec::<f32>()?, vec![1.0, 0.0]);
    assert_eq!(b.cast(DType::I64)?.to_vec::<i64>()?, vec![1, 0]);
    let i = Tensor::from_vec(vec![-3i32, 0, 16_777_217], &[3])?;
    assert_eq!(i.cast(DType::F32)?.to_vec::<f32>()?, vec![-3.0, 0.0, 16_777_216.0]);
    assert_bools(&i.cast(DType::Bool)?, &[3], &[true, false, true]);
    // Casting to the same dtype returns the same tensor.
    assert!(i.cast(DType::I32)?.same_as(&i));
    Ok(())
}

// ------------------------------------------------------------------------------ handles

#[test]
fn clones_are_handles_to_one_tensor() -> Result<()> {
    let x = tensor::<f32>(&[1.0, 2.0], &[2]);
    let y = x.clone();
    assert!(x.same_as(&y));
    assert_eq!(x.id(), y.id());
    let z = &x * 1.0;
    assert!(!x.same_as(&z));
    assert_ne!(x.id(), z.id());
    assert_tensor::<f32>(&z, &[2], &[1.0, 2.0]);
    assert!(!x.is_symbolic());
    // Tensors move across threads.
    let handle = std::thread::spawn(move || y.sum().unwrap().item::<f32>().unwrap());
    assert_eq!(handle.join().unwrap(), 3.0);
    Ok(())
}

// ------------------------------------------------------------------------------ Display

fn shows(t: &Tensor, expected: &str) {
    assert_eq!(t.to_string(), expected);
    assert_eq!(format!("{t:?}"), expected, "Debug prints like Display");
}

#[test]
fn display_integers() -> Result<()> {
    shows(&Tensor::from_vec(vec![1i64, -20, 300], &[3])?, "tensor([  1, -20, 300], dtype=i64)");
    shows(&Tensor::from_vec(vec![1i32, 2, 30, 4], &[2, 2])?, "tensor([[ 1,  2],\n        [30,  4]], dtype=i32)");
    shows(&Tensor::scalar(3i32), "tensor(3, dtype=i32)");
    shows(&Tensor::scalar(-7i64), "tensor(-7, dtype=i64)");
    Ok(())
}

#[test]
fn display_floats_in_integer_style() -> Result<()> {
    shows(&Tensor::from_vec(vec![1.0f32, 2.0, -3.0], &[3])?, "tensor([ 1.,  2., -3.], dtype=f32)");
    shows(&Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?, "tensor([[1., 2.],\n        [3., 4.]], dtype=f32)");
    shows(&Tensor::scalar(1.0f32), "tensor(1., dtype=f32)");
    shows(&Tensor::zeros(&[2], DType::F64), "tensor([0., 0.], dtype=f64)");
    Ok(())
}

#[test]
fn display_floats_in_fixed_style() -> Result<()> {
    shows(&Tensor::from_vec(vec![1.5f64, -2.25, 3.0], &[3])?, "tensor([ 1.5000, -2.2500,  3.0000], dtype=f64)");
    shows(&Tensor::from_vec(vec![0.1f32, 0.2], &[2])?, "tensor([0.1000, 0.2000], dtype=f32)");
    shows(&Tensor::from_vec(vec![0.0f64, 0.5], &[2])?, "tensor([0.0000, 0.5000], dtype=f64)");
    shows(&Tensor::scalar(2.5f64), "tensor(2.5000, dtype=f64)");
    Ok(())
}

#[test]
fn display_floats_in_scientific_style() -> Result<()> {
    // A tiny value, a wide range, a huge value.
    shows(&Tensor::from_vec(vec![1e-5f32, 1.0], &[2])?, "tensor([1.0000e-05, 1.0000e+00], dtype=f32)");
    shows(&Tensor::from_vec(vec![0.5f64, 1234.5], &[2])?, "tensor([5.0000e-01, 1.2345e+03], dtype=f64)");
    shows(&Tensor::from_vec(vec![-1.5e10f64, 2.0], &[2])?, "tensor([-1.5000e+10,  2.0000e+00], dtype=f64)");
    // Integral values with a range over 1000 are scientific too (PyTorch's rule).
    shows(&Tensor::from_vec(vec![1.0f64, 10000.0], &[2])?, "tensor([1.0000e+00, 1.0000e+04], dtype=f64)");
    shows(&Tensor::scalar(1e9f64), "tensor(1.0000e+09, dtype=f64)");
    Ok(())
}

#[test]
fn display_non_finite_floats() -> Result<()> {
    // nan and inf do not set the column width.
    shows(&Tensor::from_vec(vec![f32::NAN, 1.0], &[2])?, "tensor([nan, 1.], dtype=f32)");
    shows(&Tensor::from_vec(vec![f64::INFINITY, f64::NEG_INFINITY, 1.5], &[3])?, "tensor([   inf,   -inf, 1.5000], dtype=f64)");
    shows(&Tensor::scalar(f64::NAN), "tensor(nan, dtype=f64)");
    Ok(())
}

#[test]
fn display_bools() -> Result<()> {
    shows(&Tensor::from_vec(vec![true, false], &[2])?, "tensor([ true, false], dtype=bool)");
    shows(&Tensor::scalar(true), "tensor(true, dtype=bool)");
    shows(&Tensor::from_vec(vec![true, true, false, true], &[2, 2])?, "tensor([[ true,  true],\n        [false,  true]], dtype=bool)");
    Ok(())
}

#[test]
fn display_3d_has_a_blank_line_between_blocks() -> Result<()> {
    shows(&Tensor::arange(0i64, 8).reshape([2, 2, 2])?, "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]], dtype=i64)");
    shows(
        &Tensor::from_vec(vec![0.5f32, 1.25, -2.0, 3.0], &[2, 1, 2])?,
        "tensor([[[ 0.5000,  1.2500]],\n\n        [[-2.0000,  3.0000]]], dtype=f32)",
    );
    // 4-d: two blank lines between the outermost blocks.
    shows(&Tensor::arange(0i32, 4).reshape([2, 1, 1, 2])?, "tensor([[[[0, 1]]],\n\n\n        [[[2, 3]]]], dtype=i32)");
    Ok(())
}

#[test]
fn display_empty() -> Result<()> {
    shows(&Tensor::zeros(&[0], DType::F32), "tensor([], dtype=f32)");
    shows(&Tensor::zeros(&[0, 3], DType::I64), "tensor([], size=[0, 3], dtype=i64)");
    Ok(())
}

#[test]
fn display_wraps_long_rows_at_80_columns() -> Result<()> {
    shows(
        &Tensor::arange(0i64, 30),
        "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29], dtype=i64)",
    );
    // A full last line pushes the dtype onto its own line.
    shows(&Tensor::arange(0i64, 18), "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17],\n       dtype=i64)");
    // Rows of a matrix wrap with their continuation lines indented under the row.
    shows(
        &Tensor::arange(0i64, 40).reshape([2, 20])?,
        "tensor([[ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n         18, 19],\n        \
         [20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37,\n         38, 39]], dtype=i64)",
    );
    // As in PyTorch, only closing brackets may pass the 80 columns.
    for line in Tensor::randn(&[7, 40], DType::F32, 1).to_string().lines() {
        let body = line.trim_end_matches([']', ',']);
        assert!(body.len() <= 80, "line too long: {line:?}");
    }
    Ok(())
}

#[test]
fn display_summarizes_large_tensors() -> Result<()> {
    shows(&Tensor::arange(0i64, 2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], dtype=i64)");
    shows(
        &Tensor::arange(0i64, 2000).reshape([2, 1000])?,
        "tensor([[   0,    1,    2,  ...,  997,  998,  999],\n        [1000, 1001, 1002,  ..., 1997, 1998, 1999]], dtype=i64)",
    );
    let row = "[0, 0, 0,  ..., 0, 0, 0]";
    let expected =
        format!("tensor([{row},\n        {row},\n        {row},\n        ...,\n        {row},\n        {row},\n        {row}], dtype=i32)");
    shows(&Tensor::zeros(&[100, 100], DType::I32), &expected);
    // The style comes from the shown values: 0, 1, 2 ... 9997, 9998, 9999 span over 1000.
    shows(
        &Tensor::arange(0.0f32, 10000.0),
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.9970e+03, 9.9980e+03,\n        9.9990e+03], dtype=f32)",
    );
    // Exactly 1000 elements are not summarized.
    assert!(!Tensor::zeros(&[1000], DType::I32).to_string().contains("..."));
    Ok(())
}
