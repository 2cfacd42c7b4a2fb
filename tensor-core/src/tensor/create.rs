//! Creating tensors: from Rust data, filled, ranges, and random from a seed.

use super::Tensor;
use crate::dim::{IntoDims, ShapeArg};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::storage::Element;
use crate::storage::{Array, Storage};
use ndarray::IxDyn;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha12Rng;
use rand_distr::{Distribution, StandardNormal};

/// The host-side stream of `seed`: ChaCha12 (what `rand`'s `StdRng` is), from its first word.
/// A `Generator`'s initialization draws continue this stream from the word its counter names.
pub(crate) fn seeded_rng(seed: u64) -> ChaCha12Rng {
    ChaCha12Rng::seed_from_u64(seed)
}

impl Tensor {
    /// A tensor of the given shape from row-major data; the length must match the shape.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// assert_eq!(t.dims(), vec![2, 3]);
    /// assert!(Tensor::from_vec(vec![1.0f32; 5], &[2, 3]).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        let numel: usize = shape.iter().product();
        if data.len() != numel {
            return Err(Error::DataLength { op: "from_vec", len: data.len(), shape: Shape::new(shape), numel });
        }
        let array = Array::from_shape_vec(IxDyn(shape), data).expect("length checked above");
        Ok(Tensor::from_storage(T::wrap(array)))
    }

    /// A 0-d tensor holding `value`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert_eq!(Tensor::scalar(2.5f64).item::<f64>().unwrap(), 2.5);
    /// ```
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor::from_storage(T::wrap(Array::from_elem(IxDyn(&[]), value)))
    }

    /// A tensor of zeros.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert_eq!(Tensor::zeros(&[2], DType::I32).to_vec::<i32>().unwrap(), vec![0, 0]);
    /// ```
    pub fn zeros(shape: impl IntoDims, dtype: DType) -> Tensor {
        Tensor::full(shape, 0, dtype)
    }

    /// A tensor of ones.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::ones(&[2, 2], DType::I64);
    /// assert_eq!(x.to_vec::<i64>()?, vec![1; 4]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn ones(shape: impl IntoDims, dtype: DType) -> Tensor {
        Tensor::full(shape, 1, dtype)
    }

    /// A tensor filled with `value`, converted to `dtype`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let t = Tensor::full(&[2], 0.5, DType::F64);
    /// assert_eq!(t.to_vec::<f64>().unwrap(), vec![0.5, 0.5]);
    /// ```
    ///
    /// In a relaxed trace, a symbolic dim makes the fill a graph op whose shape is computed
    /// from each call's dims (the value broadcast to it); other dims give a constant.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// #[graph_fn(reduce_retracing)]
    /// fn plus_zeros(x: &Tensor) -> Result<Tensor> {
    ///     x.add(&Tensor::full([x.dim(0), 4.into()], 0.5, DType::F32))
    /// }
    /// for n in [2, 3, 5] {
    ///     assert_eq!(plus_zeros(&Tensor::zeros(&[n, 4], DType::F32))?.to_vec::<f32>()?, vec![0.5; n * 4]);
    /// }
    /// assert_eq!(tensor_core::function::lookup("plus_zeros").unwrap().trace_count(), 2);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn full(shape: impl IntoDims, value: impl Into<Scalar>, dtype: DType) -> Tensor {
        match shape.shape_arg() {
            ShapeArg::Symbolic(dims) => {
                let one = Tensor::from_storage(Storage::full(&Shape::scalar(), dtype, value.into()));
                one.broadcast_to(&dims[..]).expect("a 0-d value broadcasts to any shape")
            }
            known => Tensor::from_storage(Storage::full(&Shape::new(known.known().expect("not symbolic")), dtype, value.into())),
        }
    }

    /// Zeros with the dtype and shape of `self`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::ones(&[3], DType::F64);
    /// let z = x.zeros_like();
    /// assert_eq!((z.dtype(), z.to_vec::<f64>()?), (DType::F64, vec![0.0; 3]));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn zeros_like(&self) -> Tensor {
        Tensor::zeros(&self.dims(), self.dtype())
    }

    /// Ones with the dtype and shape of `self`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2], DType::I32);
    /// assert_eq!(x.ones_like().to_vec::<i32>()?, vec![1, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn ones_like(&self) -> Tensor {
        Tensor::ones(&self.dims(), self.dtype())
    }

    /// The values `start, start + 1, ...` below `end`, in the dtype of `T`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert_eq!(Tensor::arange(0i64, 4).to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
    /// ```
    pub fn arange<T: Element>(start: T, end: T) -> Tensor {
        Tensor::arange_step(start, end, T::one())
    }

    /// The values `start, start + step, ...` up to (not including) `end`.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let t = Tensor::arange_step(0.0f32, 1.0, 0.25);
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0, 0.25, 0.5, 0.75]);
    /// ```
    pub fn arange_step<T: Element>(start: T, end: T, step: T) -> Tensor {
        let (s, e, d) = (start.to_f64(), end.to_f64(), step.to_f64());
        let n = if d == 0.0 { 0 } else { ((e - s) / d).ceil().max(0.0) as usize };
        let data: Vec<T> = (0..n).map(|i| T::from_f64(s + d * i as f64)).collect();
        Tensor::from_vec(data, &[n]).expect("length is n by construction")
    }

    /// Uniform random values in `[0, 1)`, drawn on the host from `seed`: the values
    /// [`nn::init::uniform`](crate::nn::init::uniform) draws from a fresh `Generator::new(seed)`.
    /// Inside a trace they are constants; for draws that are graph ops (new values at every
    /// call), use [`Tensor::rand_gen`].
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let a = Tensor::rand(&[4], DType::F32, 1);
    /// assert_eq!(a.to_vec::<f32>().unwrap(), Tensor::rand(&[4], DType::F32, 1).to_vec::<f32>().unwrap());
    /// ```
    pub fn rand(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
        Tensor::uniform_from(shape, 0.0, 1.0, dtype, &mut seeded_rng(seed))
    }

    /// Standard normal random values, drawn on the host from `seed`: the values
    /// [`nn::init::normal`](crate::nn::init::normal) draws from a fresh `Generator::new(seed)`.
    /// Inside a trace they are constants; for draws that are graph ops, use
    /// [`Tensor::randn_gen`].
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let a = Tensor::randn(&[1000], DType::F32, 7);
    /// assert_eq!(a.to_vec::<f32>()?, Tensor::randn(&[1000], DType::F32, 7).to_vec::<f32>()?); // same seed, same values
    /// assert!(a.mean()?.item::<f32>()?.abs() < 0.1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn randn(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
        Tensor::normal_from(shape, 0.0, 1.0, dtype, &mut seeded_rng(seed))
    }

    /// Uniform values in `[low, high)` drawn from `rng` in f64 and converted to `dtype`.
    pub(crate) fn uniform_from(shape: &[usize], low: f64, high: f64, dtype: DType, rng: &mut impl Rng) -> Tensor {
        let n: usize = shape.iter().product();
        let draws: Vec<f64> = (0..n).map(|_| low + (high - low) * rng.random::<f64>()).collect();
        Tensor::from_f64_data(draws, shape, dtype)
    }

    /// Normal values `mean + std * z`, `z` standard normal drawn from `rng` in f64, converted
    /// to `dtype`.
    pub(crate) fn normal_from(shape: &[usize], mean: f64, std: f64, dtype: DType, rng: &mut impl Rng) -> Tensor {
        let n: usize = shape.iter().product();
        let draws: Vec<f64> = (0..n)
            .map(|_| {
                let z: f64 = StandardNormal.sample(rng);
                if (mean, std) == (0.0, 1.0) {
                    z
                } else {
                    mean + std * z
                }
            })
            .collect();
        Tensor::from_f64_data(draws, shape, dtype)
    }

    fn from_f64_data(data: Vec<f64>, shape: &[usize], dtype: DType) -> Tensor {
        fn conv<T: Element>(d: Vec<f64>, shape: &[usize]) -> Storage {
            let v: Vec<T> = d.into_iter().map(T::from_f64).collect();
            T::wrap(Array::from_shape_vec(IxDyn(shape), v).expect("length matches shape"))
        }
        Tensor::from_storage(match dtype {
            DType::F32 => conv::<f32>(data, shape),
            DType::F64 => conv::<f64>(data, shape),
            DType::I32 => conv::<i32>(data, shape),
            DType::I64 => conv::<i64>(data, shape),
            DType::Bool => conv::<bool>(data, shape),
        })
    }
}

impl<T: Element> From<ndarray::ArrayD<T>> for Tensor {
    /// ```
    /// # use tensor_core::prelude::*;
    /// let t = Tensor::from(ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[2, 2])));
    /// assert_eq!(t.dims(), vec![2, 2]);
    /// ```
    fn from(a: ndarray::ArrayD<T>) -> Tensor {
        Tensor::from_storage(T::wrap(a.into_shared()))
    }
}
