//! Matrix multiplication as NumPy defines it: 2-d, batched with batch dims broadcast, and the
//! vector forms (matrix × vector, vector × matrix, vector · vector).

use super::dispatch::apply;
use super::{need_numeric, Family, InputGrads, Saves, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::matmul::matmul;
use crate::shape::{broadcast_shapes, Shape, UNKNOWN};
use crate::storage::Storage;
use crate::tensor::grad_node::BackwardCtx;
use crate::tensor::Tensor;
use smallvec::smallvec;

impl Tensor {
    /// The matrix product `self @ rhs` as NumPy and PyTorch define it: over the last two dims,
    /// with leading (batch) dims broadcast. A 1-d operand is a vector: on the left it is a row
    /// `[1, k]`, on the right a column `[k, 1]`, and that added dim is dropped from the result,
    /// so matrix × vector is `[m]`, vector × matrix is `[n]` and vector · vector is a scalar.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let b = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2])?;
    /// assert_eq!(a.matmul(&b)?.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
    /// let v = Tensor::from_vec(vec![1.0f32, 1.0], &[2])?;
    /// assert_eq!(a.matmul(&v)?.to_vec::<f32>()?, vec![3.0, 7.0]);
    /// assert_eq!(v.matmul(&a)?.to_vec::<f32>()?, vec![4.0, 6.0]);
    /// assert_eq!(v.matmul(&v)?.item::<f32>()?, 2.0);
    /// assert!(a.matmul(&Tensor::zeros(&[3, 2], DType::F32)).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        let (row, col) = (self.rank() == 1, rhs.rank() == 1);
        if !row && !col {
            return apply(LinalgOp::Matmul, &[self, rhs]);
        }
        // The vector forms are the matrix product of a row or column, less the added dim: the
        // graph holds only rank >= 2 products (ONNX MatMul, export and fusion see no new case),
        // and gradients come from reshape's.
        let a = if row { self.unsqueeze(0)? } else { self.clone() };
        let b = if col { rhs.unsqueeze(1)? } else { rhs.clone() };
        let y = apply(LinalgOp::Matmul, &[&a, &b]).map_err(|e| vector_operands(e, self, rhs))?;
        let y = if col { y.squeeze(-1)? } else { y };
        // The row's dim is second to last, or last once the column's is gone.
        if row {
            y.squeeze(if col { -1 } else { -2 })
        } else {
            Ok(y)
        }
    }
}

/// A shape error from a vector form names the user's operands, not the row or column made
/// from them.
fn vector_operands(e: Error, a: &Tensor, b: &Tensor) -> Error {
    match e {
        Error::ShapeMismatch { hint, .. } => Error::shapes("matmul", &a.shape(), &b.shape(), hint),
        other => other,
    }
}

/// Matrix products. (One today; batched and vector forms share its rule.)
///
/// ```
/// use tensor_core::ops::LinalgOp;
/// assert_eq!(format!("{:?}", LinalgOp::Matmul), "Matmul");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LinalgOp {
    /// (a, b): the product over the last two dims; batch dims broadcast.
    Matmul,
}

impl Family for LinalgOp {
    fn name(&self) -> &'static str {
        "matmul"
    }

    fn grad_fn_name(&self) -> &'static str {
        "MatmulBackward"
    }

    fn attrs(&self) -> String {
        String::new()
    }

    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        infer(inputs)
    }

    fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        compute(inputs)
    }

    fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
        backward(ctx, g)
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b11)
    }

    fn is_differentiable(&self) -> bool {
        true
    }
}

/// (batch dims, m, k, n) of a matmul, or the error.
fn split(a: &Shape, b: &Shape) -> Result<(Shape, usize, usize, usize)> {
    if a.rank() < 2 || b.rank() < 2 {
        return Err(Error::shapes("matmul", a, b, "both operands need at least 1 dim; a scalar operand is a multiplication: use `*`"));
    }
    let (m, k) = (a[a.rank() - 2], a[a.rank() - 1]);
    let (k2, n) = (b[b.rank() - 2], b[b.rank() - 1]);
    if k != k2 && k != UNKNOWN && k2 != UNKNOWN {
        return Err(Error::shapes("matmul", a, b, format!("the inner dims differ ({k} vs {k2}): a [.., m, k] @ b [.., k, n] needs equal k")));
    }
    let ba = Shape::new(&a.dims()[..a.rank() - 2]);
    let bb = Shape::new(&b.dims()[..b.rank() - 2]);
    let batch = broadcast_shapes(&ba, &bb).ok_or_else(|| Error::shapes("matmul", a, b, "the batch dims do not broadcast"))?;
    Ok((batch, m, k, n))
}

fn infer(inputs: &[TypeRef]) -> Result<(DType, Shape)> {
    let (a, b) = (inputs[0], inputs[1]);
    if a.dtype != b.dtype {
        return Err(Error::dtype_mismatch("matmul", a.dtype, b.dtype));
    }
    need_numeric("matmul", a.dtype)?;
    let (batch, m, _, n) = split(a.shape, b.shape)?;
    let mut out = batch;
    out.dims_mut().extend([m, n]);
    Ok((a.dtype, out))
}

fn compute(inputs: &[&Storage]) -> Result<Storage> {
    let (batch, ..) = split(&inputs[0].shape(), &inputs[1].shape())?;
    Ok(match (inputs[0], inputs[1]) {
        (Storage::F32(a), Storage::F32(b)) => Storage::F32(matmul(a, b, batch.dims())),
        (Storage::F64(a), Storage::F64(b)) => Storage::F64(matmul(a, b, batch.dims())),
        (Storage::I32(a), Storage::I32(b)) => Storage::I32(matmul(a, b, batch.dims())),
        (Storage::I64(a), Storage::I64(b)) => Storage::I64(matmul(a, b, batch.dims())),
        _ => unreachable!("dtypes checked by infer"),
    })
}

/// d(a@b)/da = g @ b^T, d(a@b)/db = a^T @ g, each summed over broadcast batch dims.
fn backward(ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let ga = if ctx.needs_grad(0) { Some(g.matmul(&b.t()?)?.sum_to(ctx.input_shape(0))?) } else { None };
    let gb = if ctx.needs_grad(1) { Some(rhs_grad(ctx, &a, g)?) } else { None };
    Ok(smallvec![ga, gb])
}

/// `a^T @ g` summed over the batch dims. For a 2-d `b` (a layer's weight) and a batched `a`,
/// that is one product over all rows: `a` as `[rows, k]`, transposed, times `g` as `[rows, n]`
/// — a GEMM with a long inner dim rather than a product per batch and a sum.
fn rhs_grad(ctx: &BackwardCtx, a: &Tensor, g: &Tensor) -> Result<Tensor> {
    let (sa, sb) = (ctx.input_shape(0), ctx.input_shape(1));
    let (k, n) = (sb[0], sb[sb.rank().saturating_sub(1)]);
    if sb.rank() == 2 && sa.rank() > 2 && k != UNKNOWN && n != UNKNOWN {
        return a.reshape([-1, k as isize])?.t()?.matmul(&g.reshape([-1, n as isize])?);
    }
    a.t()?.matmul(g)?.sum_to(sb)
}
