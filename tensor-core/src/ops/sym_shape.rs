//! Ops whose shape is computed when the graph runs: a relaxed trace's `reshape`,
//! `broadcast_to` (and so `zeros`/`ones`/`full`), `narrow` (and `split`) and `arange`, given
//! a size that is an expression of the call's argument dims (`n0 * 2`). Each call evaluates
//! the expressions on the call's dims ([`SymShapeOp::at`]) and runs the concrete op — the
//! layout op eager dispatch runs, or the range eager `arange` computes — so the bits are
//! eager's. These ops exist only in graphs traced with relaxed dims.

use super::{Family, InputGrads, LayoutOp, Op, Saves, TypeRef};
use crate::dim::{Dim, SizeAttr};
use crate::dtype::DType;
use crate::dtype::Scalar;
use crate::error::{Error, Result};
use crate::math::op_names;
use crate::shape::{Shape, UNKNOWN};
use crate::storage::{Array, Element, Storage};
use crate::tensor::grad_node::BackwardCtx;
use crate::tensor::Tensor;
use ndarray::IxDyn;
use smallvec::{smallvec, SmallVec};

/// An op with sizes that may be expressions of the call's argument dims. Inputs as for the
/// layout op of the same name; `Arange` reads a 0-d start value.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::graph::NodeKind;
/// use tensor_core::ops::{Op, SymShapeOp};
/// #[graph_fn(reduce_retracing)]
/// fn halves(x: &Tensor) -> Result<Tensor> {
///     let n = x.dim(0);
///     x.reshape([n / 2, Dim::from(2)])
/// }
/// halves(&Tensor::ones(&[4], DType::F32))?;
/// halves(&Tensor::ones(&[6], DType::F32))?; // relaxed: [n0]
/// let f = &tensor_core::function::lookup("halves").unwrap().concrete_functions()[1];
/// assert!(f.graph().nodes.iter().any(|n| matches!(n.kind, NodeKind::Op(Op::SymShape(SymShapeOp::Reshape(_))))));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[allow(missing_docs)] // the fields are the Tensor methods' arguments
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SymShapeOp {
    /// (x): the requested dims, one of them possibly inferred (-1).
    Reshape(SmallVec<[SizeAttr; 4]>),
    /// (x): the target dims.
    BroadcastTo(SmallVec<[SizeAttr; 4]>),
    /// (x)
    Narrow { axis: usize, start: SizeAttr, len: SizeAttr },
    /// (start, 0-d): `start, start + 1, ...`, `len` values, as `arange` computes them.
    Arange { len: SizeAttr },
}

impl Family for SymShapeOp {
    op_names! { SymShapeOp {
        Reshape(d) => "reshape", "ReshapeBackward", format!("shape={d:?}");
        BroadcastTo(d) => "broadcast_to", "BroadcastToBackward", format!("shape={d:?}");
        Narrow { axis, start, len } => "narrow", "NarrowBackward", format!("axis={axis} start={start} len={len}");
        Arange { len } => "arange", "ArangeBackward", format!("len={len}");
    }}

    fn infer(&self, inputs: &[TypeRef]) -> Result<(DType, Shape)> {
        if let Some(op) = self.concrete() {
            return op.infer(inputs);
        }
        let x = inputs[0];
        let unknown_or = |a: &SizeAttr| a.fixed().unwrap_or(UNKNOWN);
        let shape = match self {
            SymShapeOp::Reshape(dims) => {
                if dims.iter().filter(|d| **d == SizeAttr::Inferred).count() > 1 {
                    return Err(Error::invalid("reshape", "dims", format!("{dims:?}: only one dim may be -1")));
                }
                // The inferred dim depends on the symbolic ones: unknown in the graph.
                Shape::from(dims.iter().map(unknown_or).collect::<Vec<_>>())
            }
            SymShapeOp::BroadcastTo(dims) => {
                let target = Shape::from(dims.iter().map(unknown_or).collect::<Vec<_>>());
                return Op::Layout(LayoutOp::BroadcastTo(target)).infer(inputs);
            }
            SymShapeOp::Narrow { axis, len, .. } => {
                if *axis >= x.shape.rank() {
                    return Err(Error::Axis { op: "narrow", axis: *axis as isize, rank: x.shape.rank() });
                }
                x.shape.with_dim(*axis, unknown_or(len))
            }
            SymShapeOp::Arange { len } => {
                arange_input(x)?;
                Shape::new(&[unknown_or(len)])
            }
        };
        Ok((x.dtype, shape))
    }

    fn compute(&self, inputs: &[&Storage]) -> Result<Storage> {
        if let SymShapeOp::Arange { len: SizeAttr::Fixed(len) } = self {
            return Ok(crate::storage::map_numeric!(inputs[0], a => range(a, *len), bool => unreachable!("refused by the dtype rule")));
        }
        match self.concrete() {
            Some(op) => op.compute(inputs),
            None => Err(Error::invalid(self.name(), "dims", format!("{}: a symbolic dim has a value only when its graph runs", self.attrs()))),
        }
    }

    fn backward(&self, ctx: &BackwardCtx, g: &Tensor) -> Result<InputGrads> {
        Ok(match self {
            SymShapeOp::Reshape(_) => smallvec![Some(g.reshape_to(ctx.input_shape(0))?)],
            SymShapeOp::BroadcastTo(_) => smallvec![Some(g.sum_to(ctx.input_shape(0))?)],
            SymShapeOp::Narrow { axis, start: SizeAttr::Fixed(start), len: SizeAttr::Fixed(len) } if ctx.input_shape(0)[*axis] != UNKNOWN => {
                let d = ctx.input_shape(0)[*axis];
                smallvec![Some(g.pad_axis(*axis, *start, d - start - len)?)]
            }
            SymShapeOp::Narrow { .. } => {
                return Err(Error::NotDifferentiable { op: "narrow", detail: " with a start or length computed from a symbolic dim" })
            }
            SymShapeOp::Arange { .. } => smallvec![None],
        })
    }

    fn saves(&self) -> Saves {
        Saves::default()
    }

    fn is_differentiable(&self) -> bool {
        !matches!(self, SymShapeOp::Arange { .. })
    }
}

impl Tensor {
    /// The values `0, 1, ..., n - 1` in `dtype` (numeric), as `arange(0, n)` gives them. `n`
    /// may be a [`Dim`](crate::dim::Dim): in a relaxed trace a symbolic one makes the range a
    /// graph op whose length each call computes (a causal mask of size `n`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Tensor::arange_len(3, DType::I64)?.to_vec::<i64>()?, vec![0, 1, 2]);
    /// let x = Tensor::zeros(&[2, 4], DType::F32);
    /// assert_eq!(Tensor::arange_len(x.dim(1), DType::F32)?.to_vec::<f32>()?, vec![0.0, 1.0, 2.0, 3.0]);
    /// assert!(Tensor::arange_len(3, DType::Bool).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn arange_len(n: impl Into<crate::dim::Dim>, dtype: DType) -> Result<Tensor> {
        let start = Storage::full(&Shape::scalar(), dtype, Scalar::Int(0));
        let range = SymShapeOp::Arange { len: size_attr(n.into()) };
        if range.is_symbolic() {
            return super::dispatch::apply(range, &[&Tensor::from_storage(start)]);
        }
        // A known length: data (a constant when traced), as `arange` makes it.
        let range = Op::SymShape(range);
        range.infer(&[TypeRef { dtype, shape: &Shape::scalar() }])?;
        Ok(Tensor::from_storage(range.compute(&[&start])?))
    }
}

impl SymShapeOp {
    /// The op for a call whose argument dims `dim(slot, axis)` gives: every size a number.
    pub fn at(&self, dim: &dyn Fn(usize, usize) -> Option<usize>) -> Result<SymShapeOp> {
        let at = |a: &SizeAttr| a.at(dim).map_err(|why| Error::invalid(self.name(), "dims", why));
        let all = |dims: &[SizeAttr]| dims.iter().map(at).collect::<Result<SmallVec<[SizeAttr; 4]>>>();
        Ok(match self {
            SymShapeOp::Reshape(dims) => SymShapeOp::Reshape(all(dims)?),
            SymShapeOp::BroadcastTo(dims) => SymShapeOp::BroadcastTo(all(dims)?),
            SymShapeOp::Narrow { axis, start, len } => SymShapeOp::Narrow { axis: *axis, start: at(start)?, len: at(len)? },
            SymShapeOp::Arange { len } => SymShapeOp::Arange { len: at(len)? },
        })
    }

    /// The layout op it is once every size is a number (`None` for `Arange`, or while a size
    /// is symbolic).
    fn concrete(&self) -> Option<Op> {
        let fixed = |dims: &[SizeAttr]| dims.iter().map(SizeAttr::fixed).collect::<Option<SmallVec<[usize; 4]>>>();
        Some(Op::Layout(match self {
            SymShapeOp::Reshape(dims) => {
                let spec =
                    dims.iter().map(|d| if *d == SizeAttr::Inferred { Some(-1) } else { d.fixed().map(|d| d as isize) }).collect::<Option<_>>()?;
                LayoutOp::Reshape(spec)
            }
            SymShapeOp::BroadcastTo(dims) => LayoutOp::BroadcastTo(Shape::new(&fixed(dims)?)),
            SymShapeOp::Narrow { axis, start, len } => LayoutOp::Narrow { axis: *axis, start: start.fixed()?, len: len.fixed()? },
            SymShapeOp::Arange { .. } => return None,
        }))
    }

    /// True when a size is still an expression (the graph evaluates it at each call).
    pub fn is_symbolic(&self) -> bool {
        let sym = |a: &SizeAttr| matches!(a, SizeAttr::Sym(_));
        match self {
            SymShapeOp::Reshape(dims) | SymShapeOp::BroadcastTo(dims) => dims.iter().any(sym),
            SymShapeOp::Narrow { start, len, .. } => sym(start) || sym(len),
            SymShapeOp::Arange { len } => sym(len),
        }
    }
}

/// `arange`'s start: a 0-d numeric tensor.
fn arange_input(x: TypeRef) -> Result<()> {
    super::need_numeric("arange", x.dtype)?;
    match x.shape.rank() {
        0 => Ok(()),
        _ => Err(Error::invalid("arange", "start", format!("the start is a 0-d tensor, not {}", x.shape))),
    }
}

/// `len` values from `start` on, each `start + i` computed in f64 and converted, as
/// `Tensor::arange` computes them (so the bits are eager's).
fn range<T: Element>(start: &Array<T>, len: usize) -> Array<T> {
    let s = start.iter().next().map_or(0.0, |v| v.to_f64());
    let data: Vec<T> = (0..len).map(|i| T::from_f64(s + i as f64)).collect();
    Array::from_shape_vec(IxDyn(&[len]), data).expect("len values")
}

/// `d` as a size attribute: a symbolic dim of the function's trace stays an expression; any
/// other symbolic dim (inside a `cond` branch or loop body, whose graphs run without the
/// call's dims) specializes, a guard on its value.
pub(crate) fn size_attr(d: Dim) -> SizeAttr {
    if let Some(k) = d.known() {
        return SizeAttr::Fixed(k);
    }
    match crate::tensor::context::depth() == 1 {
        true => crate::dim::table::extract(d).map_or_else(|| SizeAttr::Fixed(usize::from(d)), SizeAttr::Sym),
        false => SizeAttr::Fixed(usize::from(d)),
    }
}

/// The attributes of `dims` when one of them stays symbolic (`None`: all are numbers now).
pub(crate) fn size_attrs(dims: &[Dim]) -> Option<SmallVec<[SizeAttr; 4]>> {
    let attrs: SmallVec<[SizeAttr; 4]> = dims.iter().map(|&d| size_attr(d)).collect();
    attrs.iter().any(|a| matches!(a, SizeAttr::Sym(_))).then_some(attrs)
}
