//! Every CPU build of the hot loops gives the same bits (kernels::simd): eager elementwise
//! kernels, softmax, pooling and fused graph programs, run with the loops capped at each level the CPU
//! has, against the baseline build. (Its own test binary: the cap is process-wide.)

use tensor_core::function::ConcreteFunction;
use tensor_core::kernels::simd::{level, set_max_level, Level};
use tensor_core::prelude::*;

/// Values in roughly [-12, 12] with ties, tiny and huge magnitudes, so every branch of the
/// fast `exp`/`tanh`/`sigmoid` and both thread paths (over 64 Ki elements) are met.
fn input(dtype: DType) -> Result<Tensor> {
    let n = 70_007;
    let mut v: Vec<f64> = (0..n).map(|i| ((i * 7919) % 24_001) as f64 / 1000.0 - 12.0).collect();
    v[..8].copy_from_slice(&[0.0, -0.0, 1e-6, -3e-4, 95.0, -95.0, 1e30, -1e30]);
    Tensor::from_vec(v, &[n])?.cast(dtype)
}

/// The ops whose loops have per-level builds, eagerly.
fn eager_ops(x: &Tensor) -> Result<Vec<Tensor>> {
    let y = x.mul(0.75)?.add(0.25)?;
    Ok(vec![
        x.exp()?,
        x.tanh()?,
        x.sigmoid()?,
        x.relu()?,
        x.abs()?.sqrt()?,
        x.abs()?.add(1.0)?.log()?,
        x.gelu()?,
        x.gelu_tanh()?,
        x.erf()?,
        x.mul(&y)?,
        x.sub(&y)?.div(&y)?,
        x.maximum(&y)?,
        x.reshape([-1, 7])?.softmax(1)?,
        x.reshape([-1, 7])?.log_softmax(1)?,
        // Rows long enough to be reduced four side by side, and a count that leaves 2 over.
        x.narrow(0, 0, 70_000)?.reshape([-1, 100])?.softmax(1)?,
        x.narrow(0, 0, 70_000)?.reshape([-1, 100])?.log_softmax(1)?,
        x.narrow(0, 0, 70_000)?.reshape([-1, 100])?.cross_entropy(&labels(700)?)?,
        x.narrow(0, 0, 70_000)?.reshape([-1, 100])?.mean_axes(&[1], false)?,
        pooled(x)?,
    ])
}

/// Class labels for `n` rows of 100 logits.
fn labels(n: usize) -> Result<Tensor> {
    Tensor::from_vec((0..n as i64).map(|r| (r * 37) % 100).collect::<Vec<_>>(), &[n])
}

/// 2x2 max pooling of part of `x` and its input gradient (the pooling loops have builds too).
fn pooled(x: &Tensor) -> Result<Tensor> {
    let p = x.narrow(0, 0, 2 * 3 * 10 * 13)?.reshape([2, 3, 10, 13])?.detach().requires_grad_(true)?;
    let y = p.max_pool2d([2, 2], [2, 2])?;
    y.mul(&y)?.sum()?.backward()?;
    Tensor::concat(&[&y.reshape([-1])?, &p.grad().expect("a leaf's gradient").reshape([-1])?], 0)
}

/// W2's expression and a longer chain, traced into fused programs (built at the current level).
fn traced_ops(x: &Tensor) -> Result<Vec<Tensor>> {
    let f = ConcreteFunction::trace("levels", &[("x", x)], || {
        let a = x.mul(1.5)?.add(0.5)?.tanh()?;
        let w2 = a.mul(&x.sigmoid()?)?.sub(&x.mul(0.5)?)?;
        let chain = x.mul(1.0001)?.add(0.0001)?.mul(1.0001)?.add(0.0001)?.clamp(-3.0, 3.0)?.exp()?;
        let gelus = x.gelu_tanh()?.add(&x.gelu()?)?.add(&x.erf()?)?;
        Ok(vec![w2, chain, gelus])
    })?;
    f.call(&[x])
}

fn bits_eq(a: &Tensor, b: &Tensor) -> Result<bool> {
    Ok(a.shape() == b.shape() && a.bit_eq(b)?)
}

#[test]
fn every_level_gives_the_baseline_bits() -> Result<()> {
    let widest = level();
    for dtype in [DType::F32, DType::F64] {
        let x = input(dtype)?;
        set_max_level(Level::Baseline);
        assert_eq!(level(), Level::Baseline);
        let (eager, traced) = (eager_ops(&x)?, traced_ops(&x)?);
        for cap in [Level::Avx2, Level::Avx512].into_iter().filter(|&l| l <= widest) {
            set_max_level(cap);
            assert_eq!(level(), cap);
            for (k, (a, b)) in eager_ops(&x)?.iter().zip(&eager).enumerate() {
                assert!(bits_eq(a, b)?, "eager op {k}, {dtype}: {cap:?} differs from the baseline");
            }
            for (k, (a, b)) in traced_ops(&x)?.iter().zip(&traced).enumerate() {
                assert!(bits_eq(a, b)?, "fused output {k}, {dtype}: {cap:?} differs from the baseline");
            }
        }
        set_max_level(Level::Avx512);
    }
    Ok(())
}
