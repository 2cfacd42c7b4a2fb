//! Matrix multiplication as NumPy defines it: 2-d, batched with batch dims broadcast, and the
//! vector forms (matrix × vector, vector × matrix, vector · vector).

use super::dispatch::apply;
use super::{need_numeric, Family, InputGrads, Saves, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::matmul::{matmul, Transposed};
use crate::math::op_names;
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
        self.matmul_t(rhs, false, false)
    }

    /// The matrix product with either operand read transposed, as BLAS's `transa`/`transb`:
    /// `op(self) @ op(rhs)`, where `op` swaps the last two dims of an operand whose flag is set
    /// (`self` then holds `[.., k, m]`, `rhs` `[.., n, k]`). The same values as
    /// `self.t()?.matmul(&rhs)` and its kin, but the kernel reads the stored matrix with its
    /// strides swapped instead of copying a transpose first; gradients flow through the flags
    /// too. Batch dims broadcast as in [`matmul`](Tensor::matmul); a 1-d operand is a vector
    /// there and takes no flag.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let q = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// let k = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 0.0, 1.0, 1.0], &[2, 3])?;
    /// // q @ kᵀ, with no transposed copy of k: [[1, 5], [4, 11]]
    /// assert_eq!(q.matmul_t(&k, false, true)?.to_vec::<f32>()?, vec![1.0, 5.0, 4.0, 11.0]);
    /// // qᵀ @ k: [3, 2] @ [2, 3]
    /// assert_eq!(q.matmul_t(&k, true, false)?.dims(), vec![3, 3]);
    /// assert!(q.matmul_t(&k, false, false).is_err()); // [2, 3] @ [2, 3]: the inner dims differ
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn matmul_t(&self, rhs: &Tensor, transpose_a: bool, transpose_b: bool) -> Result<Tensor> {
        let (row, col) = (self.rank() == 1, rhs.rank() == 1);
        let op = LinalgOp::Matmul { transpose_a, transpose_b };
        if (row && transpose_a) || (col && transpose_b) {
            let hint = "a 1-d operand is a vector, which has no transpose: set the flag only for an operand of 2 or more dims";
            return Err(Error::shapes("matmul", &self.raw_shape(), &rhs.raw_shape(), hint));
        }
        if !row && !col {
            return apply(op, &[self, rhs]);
        }
        // The vector forms are the matrix product of a row or column, less the added dim: the
        // graph holds only rank >= 2 products (ONNX MatMul, export and fusion see no new case),
        // and gradients come from reshape's.
        let a = if row { self.unsqueeze(0)? } else { self.clone() };
        let b = if col { rhs.unsqueeze(1)? } else { rhs.clone() };
        let y = apply(op, &[&a, &b]).map_err(|e| vector_operands(e, self, rhs))?;
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
        Error::ShapeMismatch { hint, .. } => Error::shapes("matmul", &a.raw_shape(), &b.raw_shape(), hint),
        other => other,
    }
}

/// Matrix products: one op, whose flags read either operand transposed (batched and vector
/// forms share its rule).
///
/// ```
/// use tensor_core::ops::LinalgOp;
/// assert_eq!(LinalgOp::MATMUL, LinalgOp::Matmul { transpose_a: false, transpose_b: false });
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LinalgOp {
    /// (a, b): `op(a) @ op(b)` over the last two dims, where `op` transposes an operand whose
    /// flag is set (without copying it); batch dims broadcast.
    Matmul {
        /// `a` holds `[.., k, m]` and is read transposed.
        transpose_a: bool,
        /// `b` holds `[.., n, k]` and is read transposed.
        transpose_b: bool,
    },
}

impl LinalgOp {
    /// The plain product `a @ b`.
    ///
    /// ```
    /// use tensor_core::ops::{LinalgOp, Op};
    /// assert_eq!(Op::Linalg(LinalgOp::MATMUL).name(), "matmul");
    /// ```
    pub const MATMUL: LinalgOp = LinalgOp::Matmul { transpose_a: false, transpose_b: false };

    /// The transpose flags as the kernel takes them.
    fn flags(&self) -> Transposed {
        let LinalgOp::Matmul { transpose_a, transpose_b } = *self;
        Transposed { a: transpose_a, b: transpose_b }
    }
}

impl Family for LinalgOp {
    op_names! { LinalgOp {
        Matmul { transpose_a, transpose_b } => "matmul", "MatmulBackward", match transpose_a | transpose_b {
            true => format!("transpose_a={transpose_a} transpose_b={transpose_b}"),
            false => String::new(),
        };
    }}

    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        infer(inputs, self.flags())
    }

    fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        compute(inputs, self.flags())
    }

    fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
        backward(ctx, g, self.flags())
    }

    fn saves(&self) -> Saves {
        Saves::inputs(0b11)
    }

    fn is_differentiable(&self) -> bool {
        true
    }
}

/// The (rows, cols) of the last two dims of `s`, swapped when `transposed`.
fn matrix_dims(s: &Shape, transposed: bool) -> (usize, usize) {
    let (r, c) = (s[s.rank() - 2], s[s.rank() - 1]);
    if transposed {
        (c, r)
    } else {
        (r, c)
    }
}

/// (batch dims, m, k, n) of a matmul, or the error.
fn split(a: &Shape, b: &Shape, t: Transposed) -> Result<(Shape, usize, usize, usize)> {
    if a.rank() < 2 || b.rank() < 2 {
        return Err(Error::shapes("matmul", a, b, "both operands need at least 1 dim; a scalar operand is a multiplication: use `*`"));
    }
    let (m, k) = matrix_dims(a, t.a);
    let (k2, n) = matrix_dims(b, t.b);
    if k != k2 && k != UNKNOWN && k2 != UNKNOWN {
        let form = match (t.a, t.b) {
            (false, false) => "a [.., m, k] @ b [.., k, n]",
            (true, false) => "aᵀ @ b, with a [.., k, m] and b [.., k, n],",
            (false, true) => "a @ bᵀ, with a [.., m, k] and b [.., n, k],",
            (true, true) => "aᵀ @ bᵀ, with a [.., k, m] and b [.., n, k],",
        };
        return Err(Error::shapes("matmul", a, b, format!("the inner dims differ ({k} vs {k2}): {form} needs equal k")));
    }
    let ba = Shape::new(&a.dims()[..a.rank() - 2]);
    let bb = Shape::new(&b.dims()[..b.rank() - 2]);
    let batch = broadcast_shapes(&ba, &bb).ok_or_else(|| Error::shapes("matmul", a, b, "the batch dims do not broadcast"))?;
    Ok((batch, m, k, n))
}

fn infer(inputs: &[TypeRef], t: Transposed) -> Result<(DType, Shape)> {
    let (a, b) = (inputs[0], inputs[1]);
    if a.dtype != b.dtype {
        return Err(Error::operand_dtypes("matmul", ("self", a.dtype), ("other", b.dtype)));
    }
    need_numeric("matmul", a.dtype)?;
    let (batch, m, _, n) = split(a.shape, b.shape, t)?;
    let mut out = batch;
    out.dims_mut().extend([m, n]);
    Ok((a.dtype, out))
}

fn compute(inputs: &[&Storage], t: Transposed) -> Result<Storage> {
    let (batch, ..) = split(&inputs[0].shape(), &inputs[1].shape(), t)?;
    Ok(match (inputs[0], inputs[1]) {
        (Storage::F32(a), Storage::F32(b)) => Storage::F32(matmul(a, b, batch.dims(), t)),
        (Storage::F64(a), Storage::F64(b)) => Storage::F64(matmul(a, b, batch.dims(), t)),
        (Storage::I32(a), Storage::I32(b)) => Storage::I32(matmul(a, b, batch.dims(), t)),
        (Storage::I64(a), Storage::I64(b)) => Storage::I64(matmul(a, b, batch.dims(), t)),
        _ => unreachable!("dtypes checked by infer"),
    })
}

/// For `y = op(a) @ op(b)`: d/d op(a) = g @ op(b)ᵀ and d/d op(b) = op(a)ᵀ @ g, transposed back
/// where a flag is set, each summed over broadcast batch dims. Every transpose in these is a
/// flag of the product, never a copy:
///
/// | flags (a, b) | grad a     | grad b     |
/// |--------------|------------|------------|
/// | (no, no)     | g @ bᵀ     | aᵀ @ g     |
/// | (no, yes)    | g @ b      | gᵀ @ a     |
/// | (yes, no)    | b @ gᵀ     | a @ g      |
/// | (yes, yes)   | bᵀ @ gᵀ    | gᵀ @ aᵀ    |
fn backward(ctx: &BackwardCtx, g: &Tensor, t: Transposed) -> Result<InputGrads> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let ga = if ctx.needs_grad(0) { Some(lhs_grad(&b, g, t)?.sum_to(ctx.input_shape(0))?) } else { None };
    let gb = if ctx.needs_grad(1) { Some(rhs_grad(ctx, &a, g, t)?) } else { None };
    Ok(smallvec![ga, gb])
}

/// The gradient of `a` before the sum over batch dims.
fn lhs_grad(b: &Tensor, g: &Tensor, t: Transposed) -> Result<Tensor> {
    if t.a {
        b.matmul_t(g, t.b, true)
    } else {
        g.matmul_t(b, false, !t.b)
    }
}

/// The gradient of `b`, summed over the batch dims. For a 2-d `b` (a layer's weight) and a
/// batched `a` read untransposed, that is one product over all rows: `a` as `[rows, k]` and
/// `g` as `[rows, n]` — a GEMM with a long inner dim rather than a product per batch and a sum.
fn rhs_grad(ctx: &BackwardCtx, a: &Tensor, g: &Tensor, t: Transposed) -> Result<Tensor> {
    let (sa, sb) = (ctx.input_shape(0), ctx.input_shape(1));
    let (k, n) = matrix_dims(sb, t.b);
    if sb.rank() == 2 && sa.rank() > 2 && !t.a && k != UNKNOWN && n != UNKNOWN {
        let (a2, g2) = (a.reshape([-1, k as isize])?, g.reshape([-1, n as isize])?);
        return if t.b { g2.matmul_t(&a2, true, false) } else { a2.matmul_t(&g2, true, false) };
    }
    let gb = if t.b { g.matmul_t(a, true, t.a) } else { a.matmul_t(g, !t.a, false) }?;
    gb.sum_to(sb)
}
