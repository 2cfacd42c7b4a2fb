//! Elementwise families: unary and binary ops (broadcasting, scalars on either side),
//! comparisons, `where_`, `clamp`, casts, and in-place updates.

use super::ops::{as_f64, broadcast};
use super::Gen;
use crate::fuzz::program::{Binary, Id, InPlace, Node, Rhs, Ty, Unary};
use tensor_core::ops::CmpOp;
use tensor_core::DType;

impl Gen {
    // ---------------------------------------------------------------- elementwise

    /// A unary function `x`'s dtype supports.
    pub(super) fn unary_on(&mut self, x: Id) -> Id {
        let ty = self.ty(x);
        let op = match ty.dtype {
            DType::Bool => Unary::Not,
            d if d.is_int() => *self.rng.pick(&[Unary::Neg, Unary::Relu, Unary::Abs, Unary::Sign]),
            _ => {
                *self.rng.pick(&[Unary::Neg, Unary::Exp, Unary::Log, Unary::Sqrt, Unary::Tanh, Unary::Sigmoid, Unary::Relu, Unary::Abs, Unary::Sign])
            }
        };
        self.emit(Node::Unary(op, x), ty)
    }

    /// A binary op on `x` with a scalar or a tensor that broadcasts with it.
    pub(super) fn binary_on(&mut self, x: Id) -> Id {
        let ty = self.ty(x);
        if ty.dtype == DType::Bool {
            return self.unary_on(x);
        }
        let ops: &[Binary] = if ty.dtype.is_float() {
            &[Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Pow, Binary::Maximum, Binary::Minimum]
        } else {
            &[Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Maximum, Binary::Minimum, Binary::Pow]
        };
        let op = *self.rng.pick(ops);
        if self.rng.chance(0.35) {
            let s = self.scalar(ty.dtype);
            return self.emit(Node::Binary(op, x, Rhs::Scalar(s)), ty);
        }
        let (y, out) = self.broadcast_partner(&ty);
        if self.rng.chance(0.3) {
            // The partner on the left.
            return self.emit(Node::Binary(op, y, Rhs::Value(x)), out);
        }
        self.emit(Node::Binary(op, x, Rhs::Value(y)), out)
    }

    /// A value of `ty`'s dtype whose shape broadcasts with `ty`'s, and the broadcast type:
    /// `ty` itself, `ty` with some dims 1 or leading dims dropped, a visible value that
    /// fits, or (rarely) one that widens the result.
    pub(super) fn broadcast_partner(&mut self, ty: &Ty) -> (Id, Ty) {
        let dtype = ty.dtype;
        if self.rng.chance(0.3) {
            let max_numel = self.cfg.max_numel;
            let dims = ty.dims.clone();
            if let Some(v) =
                self.pick(|i| i.ty.dtype == dtype && broadcast(&dims, &i.ty.dims).is_some_and(|b| b.iter().product::<usize>() <= max_numel))
            {
                let out = broadcast(&ty.dims, &self.info[v].ty.dims).expect("checked");
                return (v, Ty::new(dtype, &out));
            }
        }
        let mut dims: Vec<usize> = ty.dims.clone();
        if self.rng.chance(0.2) && ty.numel() * 3 <= self.cfg.max_numel && ty.dims.contains(&1) {
            // Widen a dim of length 1: the result is larger than `ty`.
            let k = ty.dims.iter().position(|&d| d == 1).expect("has a 1");
            dims[k] = self.rng.range(2, 3);
            let out = broadcast(&ty.dims, &dims).expect("widened from 1");
            let y = self.value_of(&Ty::new(dtype, &dims));
            return (y, Ty::new(dtype, &out));
        }
        let drop = self.rng.below(dims.len() + 1);
        let mut dims = dims.split_off(drop.min(dims.len()));
        for d in dims.iter_mut() {
            if self.rng.chance(0.3) {
                *d = 1;
            }
        }
        let y = self.value_of(&Ty::new(dtype, &dims));
        (y, ty.clone())
    }

    pub(super) fn scalar_lhs(&mut self) -> Option<()> {
        let x = self.pick(|i| i.ty.dtype.is_numeric())?;
        let ty = self.ty(x);
        let op = *self.rng.pick(&[Binary::Add, Binary::Sub, Binary::Mul, Binary::Div]);
        let s = self.scalar(ty.dtype);
        self.emit(Node::ScalarLhs(op, s, x), ty);
        Some(())
    }

    /// `x op y` or `x op scalar` as a bool tensor.
    pub(super) fn compare_on(&mut self, x: Id) -> Id {
        let ty = self.ty(x);
        let x = if ty.dtype == DType::Bool { self.emit(Node::Cast(x, DType::I32), Ty::new(DType::I32, &ty.dims)) } else { x };
        let ty = self.ty(x);
        let op = *self.rng.pick(&[CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge]);
        if self.rng.chance(0.5) {
            let s = self.scalar(ty.dtype);
            return self.emit(Node::Compare(op, x, Rhs::Scalar(s)), Ty::new(DType::Bool, &ty.dims));
        }
        let (y, out) = self.broadcast_partner(&ty);
        self.emit(Node::Compare(op, x, Rhs::Value(y)), Ty::new(DType::Bool, &out.dims))
    }

    /// `where_(cond, x, y)` with a condition and an alternative that broadcast with `x`.
    pub(super) fn where_on(&mut self, x: Id) -> Option<Id> {
        let ty = self.ty(x);
        let (y, out) = self.broadcast_partner(&ty);
        let cond_dims = if self.rng.chance(0.7) { out.dims.clone() } else { out.dims[self.rng.below(out.dims.len() + 1)..].to_vec() };
        let cond = match self.pick(|i| i.ty.dtype == DType::Bool && i.ty.dims == cond_dims) {
            Some(c) if self.rng.chance(0.5) => c,
            _ => {
                let src = self.value_of(&Ty::new(self.main, &cond_dims));
                self.compare_on(src)
            }
        };
        let cond_dims = self.ty(cond).dims;
        let dims = broadcast(&cond_dims, &out.dims)?;
        let (a, b) = if self.rng.chance(0.5) { (x, y) } else { (y, x) };
        Some(self.emit(Node::Where(cond, a, b), Ty::new(ty.dtype, &dims)))
    }

    pub(super) fn clamp(&mut self) -> Option<()> {
        let x = self.pick(|i| i.ty.dtype.is_numeric())?;
        let ty = self.ty(x);
        let (mut lo, mut hi) = (self.scalar(ty.dtype), self.scalar(ty.dtype));
        if as_f64(lo) > as_f64(hi) && self.rng.chance(0.9) {
            std::mem::swap(&mut lo, &mut hi);
        }
        let node = match self.rng.below(3) {
            0 => Node::Clamp(x, Some(lo), Some(hi)),
            1 => Node::Clamp(x, Some(lo), None),
            _ => Node::Clamp(x, None, Some(hi)),
        };
        self.emit(node, ty);
        Some(())
    }

    pub(super) fn cast(&mut self) -> Option<()> {
        let x = self.pick(|_| true)?;
        let ty = self.ty(x);
        let to = *self.rng.pick(&[DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool]);
        if to == ty.dtype {
            return None;
        }
        self.emit(Node::Cast(x, to), Ty::new(to, &ty.dims));
        Some(())
    }

    // ---------------------------------------------------------------- in place

    /// An in-place update of a value no step has read (so no gradient saved it) and that is
    /// not a leaf requiring grad, made in the current block (a branch or loop body may not
    /// update a value from outside).
    pub(super) fn in_place(&mut self) -> Option<()> {
        let depth = self.depth();
        let updatable = |i: &super::Info| {
            let leaf_with_grad = i.input && i.grad;
            let gradient_reads_it = i.grad && i.saved;
            !i.read && i.depth == depth && !leaf_with_grad && !gradient_reads_it && i.ty.numel() > 0
        };
        let t = self.pick(updatable)?;
        let ty = self.ty(t);
        let node = match self.rng.below(6) {
            0 => Node::Zero(t),
            1 => {
                let src = self.partner_into(&ty);
                Node::Assign(t, src)
            }
            _ if ty.dtype == DType::Bool => Node::Zero(t),
            _ => {
                let op = *self.rng.pick(&[InPlace::Add, InPlace::Sub, InPlace::Mul, InPlace::Div]);
                let rhs = if self.rng.chance(0.4) { Rhs::Scalar(self.scalar(ty.dtype)) } else { Rhs::Value(self.partner_into(&ty)) };
                Node::InPlace(op, t, rhs)
            }
        };
        self.emit_in_place(node);
        Some(())
    }

    /// A value of `ty`'s dtype that broadcasts to exactly `ty`'s shape.
    pub(super) fn partner_into(&mut self, ty: &Ty) -> Id {
        let dtype = ty.dtype;
        let dims = ty.dims.clone();
        if self.rng.chance(0.3)
            && let Some(v) = self.pick(|i| i.ty.dtype == dtype && broadcast(&dims, &i.ty.dims).is_some_and(|b| b == dims))
        {
            return v;
        }
        let drop = self.rng.below(dims.len() + 1);
        let mut small = dims[drop..].to_vec();
        for d in small.iter_mut() {
            if self.rng.chance(0.3) {
                *d = 1;
            }
        }
        self.value_of(&Ty::new(dtype, &small))
    }
}
