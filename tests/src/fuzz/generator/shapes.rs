//! Families that change shapes: reductions and `argmax`, layout ops, and indexing.

use super::ops::{norm, reduced};
use super::Gen;
use crate::fuzz::program::{Id, Node, Reduce, Ty};
use tensor_core::DType;

impl Gen {
    // ---------------------------------------------------------------- reductions

    pub(super) fn reduce(&mut self) -> Option<()> {
        let x = self.pick(|i| i.ty.dtype.is_numeric())?;
        let ty = self.ty(x);
        if self.rng.chance(0.2) && ty.rank() >= 1 {
            let axis = self.axis(ty.rank());
            let keep = self.rng.chance(0.5);
            let k = norm(axis, ty.rank());
            let bound = ty.dims[k] as i64;
            let dims: Vec<usize> = reduced(&ty.dims, &[k], keep);
            self.emit_bounded(Node::Argmax(x, axis, keep), Ty::new(DType::I64, &dims), Some(bound));
            return Some(());
        }
        let ops: &[Reduce] =
            if ty.dtype.is_float() { &[Reduce::Sum, Reduce::Mean, Reduce::Max, Reduce::Min] } else { &[Reduce::Sum, Reduce::Max, Reduce::Min] };
        let op = *self.rng.pick(ops);
        if ty.rank() == 0 || self.rng.chance(0.3) {
            self.emit(Node::Reduce(op, x, None, false), Ty::new(ty.dtype, &[]));
            return Some(());
        }
        let mut axes: Vec<usize> = (0..ty.rank()).filter(|_| self.rng.chance(0.5)).collect();
        if axes.is_empty() {
            axes.push(self.rng.below(ty.rank()));
        }
        let keep = self.rng.chance(0.5);
        let dims = reduced(&ty.dims, &axes, keep);
        let rank = ty.rank() as isize;
        let signed: Vec<isize> = axes.iter().map(|&a| if self.rng.chance(0.3) { a as isize - rank } else { a as isize }).collect();
        self.emit(Node::Reduce(op, x, Some(signed), keep), Ty::new(ty.dtype, &dims));
        Some(())
    }

    /// An axis of a rank-`rank` value, negative now and then.
    pub(super) fn axis(&mut self, rank: usize) -> isize {
        let a = self.rng.below(rank) as isize;
        if self.rng.chance(0.3) {
            a - rank as isize
        } else {
            a
        }
    }

    // ---------------------------------------------------------------- layout

    pub(super) fn layout(&mut self) -> Option<()> {
        let x = self.pick(|_| true)?;
        let ty = self.ty(x);
        let r = ty.rank();
        match self.rng.below(12) {
            0 => {
                let dims = self.factor(ty.numel());
                let mut spec: Vec<isize> = dims.iter().map(|&d| d as isize).collect();
                if !spec.is_empty() && self.rng.chance(0.3) {
                    let k = self.rng.below(spec.len());
                    spec[k] = -1;
                }
                self.emit(Node::Reshape(x, spec), Ty::new(ty.dtype, &dims));
            }
            1 if r >= 2 => {
                let mut perm: Vec<usize> = (0..r).collect();
                for i in (1..r).rev() {
                    let j = self.rng.below(i + 1);
                    perm.swap(i, j);
                }
                let dims: Vec<usize> = perm.iter().map(|&p| ty.dims[p]).collect();
                self.emit(Node::Permute(x, perm.iter().map(|&p| p as isize).collect()), Ty::new(ty.dtype, &dims));
            }
            2 if r >= 2 => {
                let (a, b) = (self.axis(r), self.axis(r));
                let mut dims = ty.dims.clone();
                dims.swap(norm(a, r), norm(b, r));
                self.emit(Node::Transpose(x, a, b), Ty::new(ty.dtype, &dims));
            }
            3 if r == 2 => {
                self.emit(Node::T(x), Ty::new(ty.dtype, &[ty.dims[1], ty.dims[0]]));
            }
            4 => {
                let dims = self.broadcast_target(&ty.dims)?;
                self.emit(Node::BroadcastTo(x, dims.clone()), Ty::new(ty.dtype, &dims));
            }
            5 if r < 4 => {
                let a = self.rng.below(r + 1) as isize - if self.rng.chance(0.3) { r as isize + 1 } else { 0 };
                let mut dims = ty.dims.clone();
                dims.insert(norm(a, r + 1), 1);
                self.emit(Node::Unsqueeze(x, a), Ty::new(ty.dtype, &dims));
            }
            6 if ty.dims.contains(&1) => {
                let k = ty.dims.iter().position(|&d| d == 1).expect("has a 1");
                let mut dims = ty.dims.clone();
                dims.remove(k);
                self.emit(Node::Squeeze(x, k as isize), Ty::new(ty.dtype, &dims));
            }
            7 if r >= 1 => {
                let start = self.rng.below(r);
                let mut dims = ty.dims[..start].to_vec();
                dims.push(ty.dims[start..].iter().product());
                self.emit(Node::FlattenFrom(x, start as isize), Ty::new(ty.dtype, &dims));
            }
            8 if r >= 1 => self.concat(x)?,
            9 => self.stack(x)?,
            10 if r >= 1 => {
                let axis = self.axis(r);
                let d = ty.dims[norm(axis, r)];
                let start = self.rng.below(d);
                let len = self.rng.range(1, d - start);
                let mut dims = ty.dims.clone();
                dims[norm(axis, r)] = len;
                self.emit(Node::Narrow(x, axis, start, len), Ty::new(ty.dtype, &dims));
            }
            11 if r >= 1 => {
                let axis = self.axis(r);
                let index = self.rng.below(ty.dims[norm(axis, r)]);
                let mut dims = ty.dims.clone();
                dims.remove(norm(axis, r));
                self.emit(Node::Select(x, axis, index), Ty::new(ty.dtype, &dims));
            }
            _ => {
                self.emit(Node::Detach(x), ty);
            }
        }
        Some(())
    }

    /// Random dims with `numel` elements (rank 1 to 4).
    fn factor(&mut self, numel: usize) -> Vec<usize> {
        let mut dims = Vec::new();
        let mut left = numel;
        let rank = self.rng.range(1, 4);
        for _ in 1..rank {
            let divisors: Vec<usize> = (1..=left).filter(|&d| left.is_multiple_of(d) && d <= self.cfg.max_dim).collect();
            let d = *self.rng.pick(&divisors);
            dims.push(d);
            left /= d;
        }
        dims.push(left);
        dims
    }

    /// Dims `dims` broadcasts to: 1s widened, a leading dim added.
    fn broadcast_target(&mut self, dims: &[usize]) -> Option<Vec<usize>> {
        let mut out: Vec<usize> = dims.iter().map(|&d| if d == 1 && self.rng.chance(0.6) { self.rng.range(1, 4) } else { d }).collect();
        if out.len() < 4 && self.rng.chance(0.5) {
            out.insert(0, self.rng.range(1, 3));
        }
        (out.iter().product::<usize>() <= self.cfg.max_numel).then_some(out)
    }

    fn concat(&mut self, x: Id) -> Option<()> {
        let ty = self.ty(x);
        let r = ty.rank();
        let axis = self.axis(r);
        let k = norm(axis, r);
        let mut parts = vec![x];
        let mut total = ty.dims[k];
        for _ in 0..self.rng.range(1, 2) {
            let part = if self.rng.chance(0.3) {
                x
            } else {
                let mut dims = ty.dims.clone();
                dims[k] = self.rng.range(1, 3);
                self.value_of(&Ty::new(ty.dtype, &dims))
            };
            total += self.ty(part).dims[k];
            parts.push(part);
        }
        let mut dims = ty.dims.clone();
        dims[k] = total;
        if dims.iter().product::<usize>() > self.cfg.max_numel {
            return None;
        }
        self.emit(Node::Concat(parts, axis), Ty::new(ty.dtype, &dims));
        Some(())
    }

    fn stack(&mut self, x: Id) -> Option<()> {
        let ty = self.ty(x);
        let count = self.rng.range(2, 3);
        if ty.numel() * count > self.cfg.max_numel || ty.rank() >= 4 {
            return None;
        }
        let parts: Vec<Id> = (0..count).map(|i| if i == 0 || self.rng.chance(0.3) { x } else { self.value_of(&ty) }).collect();
        let axis = self.rng.below(ty.rank() + 1) as isize;
        let mut dims = ty.dims.clone();
        dims.insert(axis as usize, count);
        self.emit(Node::Stack(parts, axis), Ty::new(ty.dtype, &dims));
        Some(())
    }

    // ---------------------------------------------------------------- indexing

    pub(super) fn index(&mut self) -> Option<()> {
        let x = self.pick(|i| i.ty.rank() >= 1)?;
        let ty = self.ty(x);
        let r = ty.rank();
        let axis = self.axis(r);
        let k = norm(axis, r);
        let size = ty.dims[k];
        match self.rng.below(3) {
            0 => {
                let len = self.rng.range(1, 5);
                let idx = self.index_from_argmax(&[len], size).unwrap_or_else(|| self.index_tensor(&[len], size));
                let mut dims = ty.dims.clone();
                dims[k] = len;
                self.emit(Node::IndexSelect(x, axis, idx), Ty::new(ty.dtype, &dims));
            }
            1 => {
                let mut dims = ty.dims.clone();
                dims[k] = self.rng.range(1, 4);
                let idx = self.index_tensor(&dims, size);
                self.emit(Node::Gather(x, axis, idx), Ty::new(ty.dtype, &dims));
            }
            _ => {
                let idx = self.pick(|i| i.bound.is_some() && i.ty.numel() * 6 <= 216)?;
                let bound = self.info[idx].bound.expect("picked for its bound") as usize;
                let classes = bound + self.rng.below(2);
                let dtype = *self.rng.pick(&[self.main, DType::F32, DType::I64, DType::Bool]);
                let mut dims = self.ty(idx).dims;
                dims.push(classes);
                self.emit(Node::OneHot(idx, classes, dtype), Ty::new(dtype, &dims));
            }
        }
        Some(())
    }

    /// A visible argmax result of `dims` with values below `size`, now and then.
    pub(super) fn index_from_argmax(&mut self, dims: &[usize], size: usize) -> Option<Id> {
        if !self.rng.chance(0.3) {
            return None;
        }
        self.pick(|i| i.ty.dims == dims && i.bound.is_some_and(|b| b as usize <= size) && matches!(i.ty.dtype, DType::I64 | DType::I32))
    }
}
