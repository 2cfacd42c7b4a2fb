//! Weight initializers: uniform and normal, Glorot/Xavier uniform and He/Kaiming normal and
//! uniform, drawn from an explicit [`Generator`] so a model is reproducible from a seed. They
//! draw on the host (the generator's host stream, see [`Generator`]) and move its counter on,
//! so layers built one after another from one generator get consecutive draws.
//!
//! Fans follow PyTorch's layouts (see [`fans`]): a 2-d weight is `[out, in]` (as
//! [`Linear`](super::Linear) stores it), a 4-d weight is OIHW (as [`Conv2d`](super::Conv2d)).
//! The results are plain tensors; mark them with `requires_grad_(true)` to train them.
//!
//! ```
//! use tensor_core::prelude::*;
//! use tensor_core::nn::{init, Linear};
//! let g = Generator::new(0);
//! let w = init::kaiming_normal(&[32, 2], DType::F32, &g)?; // 2 inputs, 32 outputs
//! let layer = Linear::from_tensors(w, Some(Tensor::zeros(&[32], DType::F32)))?;
//! assert_eq!(layer.weight().dims(), vec![32, 2]);
//! # Ok::<(), tensor_core::Error>(())
//! ```

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::random::Generator;
use crate::tensor::Tensor;
use crate::trace::executing_eagerly;

/// `(fan_in, fan_out)` of a weight of this shape, as PyTorch computes them: `[out, in]` for a
/// 2-d weight (the [`Linear`](super::Linear) layout), and `[out, in, k...]` for 3-d and more
/// (OIHW, the [`Conv2d`](super::Conv2d) layout), where each fan is multiplied by the kernel
/// size.
///
/// ```
/// use tensor_core::nn::init::fans;
/// assert_eq!(fans(&[5, 3])?, (3, 5)); // 3 inputs, 5 outputs
/// assert_eq!(fans(&[8, 4, 3, 3])?, (36, 72));
/// assert!(fans(&[7]).is_err());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn fans(shape: &[usize]) -> Result<(usize, usize)> {
    match shape {
        [out, inp, kernel @ ..] => {
            let receptive: usize = kernel.iter().product();
            Ok((inp * receptive, out * receptive))
        }
        _ => Err(Error::invalid(
            "init",
            "shape",
            format!("fan in and fan out need a weight of at least 2 dims, found {shape:?}; use a [out, in] or OIHW shape"),
        )),
    }
}

/// Glorot/Xavier uniform (PyTorch's `xavier_uniform_`, Keras' `glorot_uniform`): values
/// drawn from `U(-a, a)` with `a = sqrt(6 / (fan_in + fan_out))`, which keeps the variance
/// of activations and gradients about constant through linear and tanh layers.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::init::xavier_uniform;
/// let w = xavier_uniform(&[200, 100], DType::F64, &Generator::new(1))?;
/// let bound = (6.0f64 / 300.0).sqrt();
/// assert!(w.to_vec::<f64>()?.iter().all(|v| v.abs() <= bound));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn xavier_uniform(shape: &[usize], dtype: DType, generator: &Generator) -> Result<Tensor> {
    let (fan_in, fan_out) = checked_fans("xavier_uniform", shape, dtype)?;
    let bound = scale(6.0, fan_in + fan_out).sqrt();
    draw_uniform("xavier_uniform", shape, -bound, bound, dtype, generator)
}

/// He/Kaiming normal for ReLU layers (PyTorch's `kaiming_normal_` with its defaults, mode
/// `fan_in`, gain `sqrt(2)`): values drawn from `N(0, std^2)` with `std = sqrt(2 / fan_in)`.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::init::kaiming_normal;
/// let w = kaiming_normal(&[400, 50], DType::F64, &Generator::new(2))?;
/// let v = w.to_vec::<f64>()?;
/// let std = (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64).sqrt();
/// assert!((std - 0.2).abs() < 0.01); // sqrt(2 / 50)
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn kaiming_normal(shape: &[usize], dtype: DType, generator: &Generator) -> Result<Tensor> {
    let (fan_in, _) = checked_fans("kaiming_normal", shape, dtype)?;
    let std = scale(2.0, fan_in).sqrt();
    generator.host_draw("kaiming_normal", |rng| Tensor::normal_from(shape, 0.0, 1.0, DType::F64, rng))?.mul(std)?.cast(dtype)
}

/// He/Kaiming uniform for ReLU layers (PyTorch's `kaiming_uniform_` with its defaults, mode
/// `fan_in`, gain `sqrt(2)`): values drawn from `U(-a, a)` with `a = sqrt(6 / fan_in)`, so
/// the standard deviation is `sqrt(2 / fan_in)`.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::init::kaiming_uniform;
/// let w = kaiming_uniform(&[10, 6], DType::F32, &Generator::new(3))?;
/// assert!(w.to_vec::<f32>()?.iter().all(|v| v.abs() <= 1.0)); // sqrt(6 / 6)
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn kaiming_uniform(shape: &[usize], dtype: DType, generator: &Generator) -> Result<Tensor> {
    let (fan_in, _) = checked_fans("kaiming_uniform", shape, dtype)?;
    let bound = scale(6.0, fan_in).sqrt();
    draw_uniform("kaiming_uniform", shape, -bound, bound, dtype, generator)
}

/// Keras' name for [`xavier_uniform`].
///
/// ```
/// use tensor_core::prelude::*;
/// let w = tensor_core::nn::init::glorot_uniform(&[2, 2], DType::F32, &Generator::new(0))?;
/// assert_eq!(w.dims(), vec![2, 2]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn glorot_uniform(shape: &[usize], dtype: DType, generator: &Generator) -> Result<Tensor> {
    xavier_uniform(shape, dtype, generator)
}

/// Keras' name for [`kaiming_normal`].
///
/// ```
/// use tensor_core::prelude::*;
/// let w = tensor_core::nn::init::he_normal(&[2, 2], DType::F32, &Generator::new(0))?;
/// assert_eq!(w.dims(), vec![2, 2]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn he_normal(shape: &[usize], dtype: DType, generator: &Generator) -> Result<Tensor> {
    kaiming_normal(shape, dtype, generator)
}

/// Keras' name for [`kaiming_uniform`].
///
/// ```
/// use tensor_core::prelude::*;
/// let w = tensor_core::nn::init::he_uniform(&[2, 2], DType::F32, &Generator::new(0))?;
/// assert_eq!(w.dims(), vec![2, 2]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn he_uniform(shape: &[usize], dtype: DType, generator: &Generator) -> Result<Tensor> {
    kaiming_uniform(shape, dtype, generator)
}

/// Values drawn from `U(low, high)` (PyTorch's `uniform_`), in f64 converted to `dtype`.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::init::uniform;
/// let g = Generator::new(2);
/// let u = uniform(&[100], -2.0, 2.0, DType::F32, &g)?;
/// assert!(u.to_vec::<f32>()?.iter().all(|&v| (-2.0..2.0).contains(&v)));
/// // From [0, 1), the values `Tensor::rand(.., seed)` gives for a fresh `Generator::new(seed)`.
/// let r = uniform(&[3], 0.0, 1.0, DType::F64, &Generator::new(5))?;
/// assert_eq!(r.to_vec::<f64>()?, Tensor::rand(&[3], DType::F64, 5).to_vec::<f64>()?);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn uniform(shape: &[usize], low: f64, high: f64, dtype: DType, generator: &Generator) -> Result<Tensor> {
    draw_uniform("uniform", shape, low, high, dtype, generator)
}

/// Values drawn from `N(mean, std^2)` (PyTorch's `normal_`), in f64 converted to `dtype`;
/// with mean 0 and std 1, the values `Tensor::randn(.., seed)` gives for a fresh
/// `Generator::new(seed)`.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::nn::init::normal;
/// let g = Generator::new(3);
/// let (a, b) = (normal(&[4], 0.0, 1.0, DType::F32, &g)?, normal(&[4], 0.0, 1.0, DType::F32, &g)?);
/// assert_ne!(a.to_vec::<f32>()?, b.to_vec::<f32>()?); // one generator, two draws
/// assert_eq!(a.to_vec::<f32>()?, Tensor::randn(&[4], DType::F32, 3).to_vec::<f32>()?);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn normal(shape: &[usize], mean: f64, std: f64, dtype: DType, generator: &Generator) -> Result<Tensor> {
    generator.host_draw("normal", |rng| Tensor::normal_from(shape, mean, std, dtype, rng))
}

/// PyTorch's default for `nn.Linear` and `nn.Conv2d` weights and biases: `U(-a, a)` with
/// `a = 1 / sqrt(fan_in)` (what `kaiming_uniform_(w, a=sqrt(5))` works out to).
pub(crate) fn torch_default(shape: &[usize], fan_in: usize, dtype: DType, generator: &Generator) -> Result<Tensor> {
    let bound = scale(1.0, fan_in).sqrt();
    draw_uniform("init", shape, -bound, bound, dtype, generator)
}

fn draw_uniform(op: &'static str, shape: &[usize], low: f64, high: f64, dtype: DType, generator: &Generator) -> Result<Tensor> {
    generator.host_draw(op, |rng| Tensor::uniform_from(shape, low, high, dtype, rng))
}

fn checked_fans(op: &'static str, shape: &[usize], dtype: DType) -> Result<(usize, usize)> {
    need_float(op, dtype)?;
    fans(shape)
}

/// A layer's constructor makes parameters, which a traced body must not (they would be made
/// anew at every trace): the error `requires_grad_` gives there, said before anything is drawn
/// from the generator (whose state a trace may not read).
pub(crate) fn outside_trace() -> Result<()> {
    match executing_eagerly() {
        true => Ok(()),
        false => Err(Error::ParameterInTrace),
    }
}

/// Parameters are f32 or f64: the dtypes that carry gradients.
pub(crate) fn need_float(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(Error::UnsupportedDType { op, dtype, needs: "a float dtype for parameters (f32 or f64)" })
    }
}

/// `numerator / fan`, or 0 for an empty fan (the tensor then has no elements to draw).
fn scale(numerator: f64, fan: usize) -> f64 {
    if fan == 0 {
        0.0
    } else {
        numerator / fan as f64
    }
}
