//! Random ops: uniform and normal draws from a [`Generator`]'s state, and dropout built on
//! them.
//!
//! A draw is an op whose one input is the generator's state tensor (i64 `[key, counter]`):
//! a pure function of it (Philox, see `kernels::random`), so eager and graph runs give the
//! same bits from the same state. Drawing then advances the counter with an in-place update
//! of the state — which a traced graph writes back like any in-place update of a captured
//! or argument tensor, so each call of a graph draws new numbers.

use super::dispatch::apply;
use super::{Family, InputGrads, Saves, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::random as k;
use crate::math::op_names;
use crate::random::Generator;
use crate::shape::Shape;
use crate::storage::{Array, Storage};
use crate::tensor::grad_node::BackwardCtx;
use crate::tensor::Tensor;
use ndarray::IxDyn;

impl Tensor {
    /// Uniform random values in `[0, 1)` of `dtype` (f32 or f64) drawn from `generator`,
    /// which advances: the next draw gives new numbers.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let g = Generator::new(42);
    /// let a = Tensor::rand_gen(&[3], DType::F32, &g)?;
    /// let b = Tensor::rand_gen(&[3], DType::F32, &g)?;
    /// assert_ne!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
    /// // The same state gives the same numbers.
    /// assert_eq!(a.to_vec::<f32>()?, Tensor::rand_gen(&[3], DType::F32, &Generator::new(42))?.to_vec::<f32>()?);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn rand_gen(shape: &[usize], dtype: DType, generator: &Generator) -> Result<Tensor> {
        draw(RandomOp::Uniform { dtype, shape: Some(Shape::new(shape)) }, generator, None)
    }

    /// Standard normal random values of `dtype` (f32 or f64) drawn from `generator`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let g = Generator::new(0);
    /// let z = Tensor::randn_gen(&[10_000], DType::F64, &g)?;
    /// assert!(z.mean()?.item::<f64>()?.abs() < 0.05);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn randn_gen(shape: &[usize], dtype: DType, generator: &Generator) -> Result<Tensor> {
        draw(RandomOp::Normal { dtype, shape: Some(Shape::new(shape)) }, generator, None)
    }

    /// Uniform random values in `[0, 1)` with the dtype and shape of `self` (whose dims may be
    /// unknown while tracing: they are taken when the graph runs).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2, 3], DType::F64);
    /// assert_eq!(x.rand_like_gen(&Generator::new(1))?.dims(), vec![2, 3]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn rand_like_gen(&self, generator: &Generator) -> Result<Tensor> {
        draw(RandomOp::Uniform { dtype: self.dtype(), shape: None }, generator, Some(self))
    }

    /// Standard normal random values with the dtype and shape of `self`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[4], DType::F32);
    /// assert_eq!(x.randn_like_gen(&Generator::new(1))?.dims(), vec![4]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn randn_like_gen(&self, generator: &Generator) -> Result<Tensor> {
        draw(RandomOp::Normal { dtype: self.dtype(), shape: None }, generator, Some(self))
    }

    /// Dropout (training mode): each element is zeroed with probability `p`, and the others
    /// are scaled by `1 / (1 - p)`, with a mask drawn from `generator`. `p = 0` returns `self`
    /// and draws nothing; `p = 1` zeroes everything. The gradient flows through the kept
    /// elements, scaled the same way.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let g = Generator::new(7);
    /// let x = Tensor::ones(&[1000], DType::F32);
    /// let y = x.dropout(0.25, &g)?.to_vec::<f32>()?;
    /// assert!(y.iter().all(|&v| v == 0.0 || v == 1.0 / 0.75));
    /// let kept = y.iter().filter(|&&v| v != 0.0).count();
    /// assert!((700..800).contains(&kept));
    /// assert!(x.dropout(1.5, &g).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn dropout(&self, p: f64, generator: &Generator) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::invalid("dropout", "p", format!("must be a probability in [0, 1], found {p}")));
        }
        super::need_float("dropout", self.dtype())?;
        if p == 0.0 {
            return Ok(self.clone());
        }
        if p == 1.0 {
            return self.mul(0.0);
        }
        let keep = self.rand_like_gen(generator)?.ge(p)?;
        let scale = keep.cast(self.dtype())?.mul(1.0 / (1.0 - p))?;
        self.mul(&scale)
    }
}

/// Runs a draw on `generator`'s state, then advances it. Eager draws of one generator are
/// serialized, so two threads never draw from the same counter.
fn draw(op: RandomOp, generator: &Generator, like: Option<&Tensor>) -> Result<Tensor> {
    let _serial = generator.lock();
    let state = generator.state();
    let out = match like {
        Some(t) => apply(op, &[state, t])?,
        None => apply(op, &[state])?,
    };
    generator.advance().map_err(|e| match e {
        Error::ControlFlow { .. } => Error::ControlFlow {
            construct: "a random draw in a while_loop condition: the generator's state cannot advance there (the condition runs once more than the body); draw the numbers in the body or before the loop".into(),
        },
        e => e,
    })?;
    Ok(out)
}

fn array<T>(dims: &[usize], values: Vec<T>) -> Array<T> {
    Array::from_shape_vec(IxDyn(dims), values).expect("length matches dims")
}

/// Random draws from a generator state (i64 `[key, counter]`). Inputs: the state, then for
/// a draw shaped like another tensor (`shape: None`) that tensor.
///
/// ```
/// use tensor_core::ops::RandomOp;
/// use tensor_core::DType;
/// assert_ne!(RandomOp::Uniform { dtype: DType::F32, shape: None }, RandomOp::Normal { dtype: DType::F32, shape: None });
/// ```
#[allow(missing_docs)] // the fields are the Tensor methods' arguments
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RandomOp {
    /// Uniform in `[0, 1)`.
    Uniform { dtype: DType, shape: Option<Shape> },
    /// Standard normal.
    Normal { dtype: DType, shape: Option<Shape> },
}

impl RandomOp {
    fn dtype(&self) -> DType {
        match self {
            RandomOp::Uniform { dtype, .. } | RandomOp::Normal { dtype, .. } => *dtype,
        }
    }

    fn shape(&self) -> Option<&Shape> {
        match self {
            RandomOp::Uniform { shape, .. } | RandomOp::Normal { shape, .. } => shape.as_ref(),
        }
    }
}

/// A draw's attributes as graph text (`shape=like` when it takes another input's shape).
fn random_attrs(dtype: DType, shape: Option<&Shape>) -> String {
    match shape {
        Some(s) => format!("dtype={dtype} shape={s}"),
        None => format!("dtype={dtype} shape=like"),
    }
}

impl Family for RandomOp {
    op_names! { RandomOp {
        Uniform { dtype, shape } => "uniform", "NoBackward", random_attrs(*dtype, shape.as_ref());
        Normal { dtype, shape } => "normal", "NoBackward", random_attrs(*dtype, shape.as_ref());
    }}

    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        let state = inputs[0];
        if state.dtype != DType::I64 || state.shape.dims() != [2] {
            return Err(Error::invalid(
                self.name(),
                "state",
                format!("must be an i64 [key, counter] of shape [2], found {} {}", state.dtype, state.shape),
            ));
        }
        super::need_float(self.name(), self.dtype())?;
        let shape = match (self.shape(), inputs.get(1)) {
            (Some(s), None) => s.clone(),
            (None, Some(like)) => like.shape.clone(),
            _ => return Err(Error::invalid(self.name(), "shape", "give a shape or a tensor to take it from, not both")),
        };
        Ok((self.dtype(), shape))
    }

    fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        let Storage::I64(state) = inputs[0] else { unreachable!("checked by infer") };
        let (key, counter) = (state[[0]] as u64, state[[1]] as u64);
        let shape = match inputs.get(1) {
            Some(like) => like.shape(),
            None => self.shape().expect("checked by infer").clone(),
        };
        let (n, dims) = (shape.numel(), shape.dims());
        Ok(match (self, self.dtype()) {
            (RandomOp::Uniform { .. }, DType::F32) => Storage::F32(array(dims, k::uniform_f32(key, counter, n))),
            (RandomOp::Uniform { .. }, _) => Storage::F64(array(dims, k::uniform_f64(key, counter, n))),
            (RandomOp::Normal { .. }, DType::F32) => {
                Storage::F32(array(dims, k::normal_f64(key, counter, n).into_iter().map(|v| v as f32).collect()))
            }
            (RandomOp::Normal { .. }, _) => Storage::F64(array(dims, k::normal_f64(key, counter, n))),
        })
    }

    fn backward(&self, _ctx: &BackwardCtx, _g: &Tensor) -> Result<InputGrads> {
        Err(Error::NotDifferentiable { op: self.name(), detail: "" })
    }

    fn saves(&self) -> Saves {
        Saves::default()
    }

    fn is_differentiable(&self) -> bool {
        false
    }
}
