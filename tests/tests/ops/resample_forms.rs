//! `resample` (weighted taps along an axis, what `interpolate` and ONNX Resize use) and
//! `grid_sample` against hand-computed values, their errors, and both traced into a graph,
//! which must match eager bit for bit.

use tensor_core::function::ConcreteFunction;
use tensor_core::ops::{GridMode, GridPadding, GridSampleOptions, Taps};
use tensor_core::prelude::*;
use tensor_core::Element;
use tests::{assert_bits_eq, assert_tensor, assert_tensor_close, per_dtype, tensor, tol};

// ------------------------------------------------------------------------------ resample

/// Three outputs from two columns: the first, the mean of both, twice the second.
fn three_taps() -> Taps {
    Taps::new(2, vec![0, 0, 0, 1, 1, 1], vec![1.0, 0.0, 0.5, 0.5, 2.0, 0.0]).unwrap()
}

fn resample_values<T: Element>() -> Result<()> {
    let x = tensor::<T>(&[1.0, 3.0, 10.0, 30.0], &[2, 2]);
    assert_tensor::<T>(&x.resample(1, &three_taps())?, &[2, 3], &[1.0, 2.0, 6.0, 10.0, 20.0, 60.0]);
    assert_tensor::<T>(&x.resample(-1, &three_taps())?, &[2, 3], &[1.0, 2.0, 6.0, 10.0, 20.0, 60.0]);
    // The third output is outside: the fill value instead.
    let filled = three_taps().with_fill(vec![false, false, true], 9.0)?;
    assert_tensor::<T>(&x.resample(1, &filled)?, &[2, 3], &[1.0, 2.0, 9.0, 10.0, 20.0, 9.0]);
    // Picking rows copies them.
    assert_tensor::<T>(&x.resample(0, &Taps::pick(vec![1, 1, 0]))?, &[3, 2], &[10.0, 30.0, 10.0, 30.0, 1.0, 3.0]);
    Ok(())
}
per_dtype!(resample_values: f32, f64);

#[test]
fn resample_picks_integers_and_rejects_bad_taps() -> Result<()> {
    let x = Tensor::from_vec(vec![1i64, 2, 3], &[3])?;
    assert_eq!(x.resample(0, &Taps::pick(vec![2, 0]))?.to_vec::<i64>()?, vec![3, 1]);
    // Weights need a float dtype; indices must be in range; the lists must make whole outputs.
    assert!(x.resample(0, &three_taps()).is_err());
    assert!(x.cast(DType::F32)?.resample(0, &Taps::pick(vec![3])).is_err());
    assert!(x.resample(1, &Taps::pick(vec![0])).is_err());
    assert!(Taps::new(2, vec![0, 1, 2], vec![1.0, 0.0, 1.0]).is_err());
    assert!(Taps::new(1, vec![0], vec![1.0, 2.0]).is_err());
    assert!(three_taps().with_fill(vec![true], 0.0).is_err());
    Ok(())
}

// ------------------------------------------------------------------------------ grid_sample

fn options(mode: GridMode, padding: GridPadding, align_corners: bool) -> GridSampleOptions {
    GridSampleOptions { mode, padding, align_corners }
}

/// `[1, 1, 2, 2]` = `[[1, 2], [3, 4]]` sampled at `points` (x, y pairs).
fn sample<T: Element>(points: &[f64], o: GridSampleOptions) -> Result<Tensor> {
    let x = tensor::<T>(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]);
    x.grid_sample(&tensor::<T>(points, &[1, 1, points.len() / 2, 2]), o)
}

fn grid_sample_values<T: Element>() -> Result<()> {
    use GridMode::*;
    use GridPadding::*;
    let n = |points: &[f64]| points.len() / 2;
    // Without align_corners, pixel centres sit at -0.5 and 0.5: the centre of the image is
    // the mean of all four; (-1, -1) is a quarter of pixel (0, 0), the rest zeros.
    let p = [0.0, 0.0, -0.5, -0.5, -1.0, -1.0, 1.0, -1.0];
    assert_tensor_close::<T>(&sample::<T>(&p, options(Linear, Zeros, false))?, &[1, 1, 1, n(&p)], &[2.5, 1.0, 0.25, 0.5], tol::<T>());
    // Border: (-1, -1) reads pixel (0, 0) four times; x = 2 (position 2.5) clamps to column 1.
    let p = [0.0, 0.0, -1.0, -1.0, 2.0, 0.0];
    assert_tensor_close::<T>(&sample::<T>(&p, options(Linear, Border, false))?, &[1, 1, 1, 3], &[2.5, 1.0, 3.0], tol::<T>());
    // Reflection: position 2.5 mirrors at 1.5 to 0.5, between the columns.
    assert_tensor_close::<T>(&sample::<T>(&p, options(Linear, Reflection, false))?, &[1, 1, 1, 3], &[2.5, 1.0, 2.5], tol::<T>());
    // Nearest: positions (0.9, -0.1) round to (1, 0); (0.5, 0.5) rounds to even (0, 0);
    // (1.5, 1.5) to (2, 2), outside: zero.
    let p = [0.4, -0.6, 0.0, 0.0, 1.0, 1.0];
    assert_tensor::<T>(&sample::<T>(&p, options(Nearest, Zeros, false))?, &[1, 1, 1, 3], &[2.0, 1.0, 0.0]);
    // Cubic at pixel centres reads the pixels exactly.
    let p = [-0.5, -0.5, 0.5, 0.5];
    assert_tensor_close::<T>(&sample::<T>(&p, options(Cubic, Zeros, false))?, &[1, 1, 1, 2], &[1.0, 4.0], tol::<T>());
    // With align_corners, -1 and 1 are the corner pixels' centres.
    let p = [0.0, 0.0, 1.0, 1.0, -1.0, 1.0];
    assert_tensor_close::<T>(&sample::<T>(&p, options(Linear, Zeros, true))?, &[1, 1, 1, 3], &[2.5, 4.0, 3.0], tol::<T>());
    // Volumetric: [1, 1, 2, 2, 2] holding 0..8 (z, y, x); points are (x, y, z). (1, -1, 1)
    // without align_corners is an eighth of pixel (1, 0, 1) = 5.
    let v = tensor::<T>(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], &[1, 1, 2, 2, 2]);
    let g = tensor::<T>(&[0.0, 0.0, 0.0, -1.0, -1.0, -1.0, 1.0, -1.0, 1.0], &[1, 1, 1, 3, 3]);
    assert_tensor_close::<T>(&v.grid_sample(&g, options(Linear, Zeros, false))?, &[1, 1, 1, 1, 3], &[3.5, 0.0, 0.625], tol::<T>());
    assert_tensor_close::<T>(&v.grid_sample(&g, options(Linear, Zeros, true))?, &[1, 1, 1, 1, 3], &[3.5, 0.0, 5.0], tol::<T>());
    Ok(())
}
per_dtype!(grid_sample_values: f32, f64);

#[test]
fn grid_sample_rejects_mismatched_grids() {
    let x = Tensor::zeros(&[1, 1, 2, 2], DType::F32);
    let o = GridSampleOptions::default();
    // A grid of 3-D points for a 2-D image, another batch, another dtype, a 1-D image.
    assert!(x.grid_sample(&Tensor::zeros(&[1, 1, 1, 3], DType::F32), o).is_err());
    assert!(x.grid_sample(&Tensor::zeros(&[2, 1, 1, 2], DType::F32), o).is_err());
    assert!(x.grid_sample(&Tensor::zeros(&[1, 1, 1, 2], DType::F64), o).is_err());
    assert!(Tensor::zeros(&[1, 1, 2], DType::F32).grid_sample(&Tensor::zeros(&[1, 1, 1], DType::F32), o).is_err());
}

// ------------------------------------------------------------------------------ in a graph

fn program(x: &Tensor, grid: &Tensor) -> Result<Vec<Tensor>> {
    let mut outs = vec![x.resample(3, &three_taps().with_fill(vec![false, true, false], -1.0)?)?];
    for mode in [GridMode::Nearest, GridMode::Linear, GridMode::Cubic] {
        for padding in [GridPadding::Zeros, GridPadding::Border, GridPadding::Reflection] {
            outs.push(x.grid_sample(grid, options(mode, padding, mode == GridMode::Linear))?);
        }
    }
    Ok(outs)
}

#[test]
fn in_a_graph_they_match_eager_bit_for_bit() -> Result<()> {
    let x = Tensor::randn(&[2, 3, 4, 5], DType::F32, 11);
    let grid = Tensor::randn(&[2, 3, 2, 2], DType::F32, 12).mul(0.9)?;
    let eager = program(&x, &grid)?;
    let f = ConcreteFunction::trace("resample", &[("x", &x), ("grid", &grid)], || program(&x, &grid))?;
    for (e, g) in eager.iter().zip(&f.call(&[&x, &grid])?) {
        assert_bits_eq(e, g);
    }
    Ok(())
}
