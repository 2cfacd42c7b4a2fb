//! Families of layers: `matmul` (transposed and batched operands, transposes as ops and as
//! `matmul_t`'s flags), `softmax`,
//! `log_softmax`, `cross_entropy`, `conv2d`, `max_pool2d`.

use super::Gen;
use crate::fuzz::program::{Id, Node, Ty};
use tensor_core::DType;

impl Gen {
    // ---------------------------------------------------------------- matmul

    /// `a @ b` with either operand possibly a transpose, and batch dims that broadcast.
    pub(super) fn matmul(&mut self) -> Option<()> {
        let dtype = if self.main.is_float() || self.rng.chance(0.5) { self.main } else { DType::I64 };
        let d = self.cfg.max_dim;
        let (m, k, n) = if self.rng.chance(0.1) {
            // Now and then an output over 256 elements: gemm's blocked kernel rather than its
            // small-product ones.
            (self.rng.range(12, 20), self.rng.range(1, 20), self.rng.range(12, 20))
        } else {
            (self.rng.range(1, d), self.rng.range(1, d), self.rng.range(1, d))
        };
        let batch: Vec<usize> = if m * n <= 36 && self.rng.chance(0.25) { vec![self.rng.range(1, 3)] } else { vec![] };
        let b_batch = if batch.is_empty() || self.rng.chance(0.5) { vec![] } else { batch.clone() };
        let mut dims = batch.clone();
        dims.extend([m, n]);
        if self.rng.chance(0.4) {
            // Read transposed through the op's flags: the operand is stored [.., cols, rows]
            // (and may itself be a transpose, so gemm gets it transposed twice).
            let (ta, tb) = (self.rng.chance(0.5), self.rng.chance(0.5));
            let a = if ta { self.matrix(dtype, &batch, k, m) } else { self.matrix(dtype, &batch, m, k) };
            let b = if tb { self.matrix(dtype, &b_batch, n, k) } else { self.matrix(dtype, &b_batch, k, n) };
            self.emit(Node::MatmulT(a, b, ta, tb), Ty::new(dtype, &dims));
            return Some(());
        }
        let a = self.matrix(dtype, &batch, m, k);
        let b = self.matrix(dtype, &b_batch, k, n);
        self.emit(Node::Matmul(a, b), Ty::new(dtype, &dims));
        Some(())
    }

    /// A `[batch.., rows, cols]` operand: a visible value, a new one, or the transpose of a
    /// `[batch.., cols, rows]` one (the layout gemm reads differently).
    fn matrix(&mut self, dtype: DType, batch: &[usize], rows: usize, cols: usize) -> Id {
        let dims = |r: usize, c: usize| batch.iter().copied().chain([r, c]).collect::<Vec<_>>();
        if self.rng.chance(0.45) {
            let src = self.value_of(&Ty::new(dtype, &dims(cols, rows)));
            let node = match (batch.len(), self.rng.below(3)) {
                (0, 0) => Node::T(src),
                (0, 1) => Node::Permute(src, vec![1, 0]),
                (_, 2) if !batch.is_empty() => Node::Permute(src, vec![0, 2, 1]),
                _ => Node::Transpose(src, -1, -2),
            };
            return self.emit(node, Ty::new(dtype, &dims(rows, cols)));
        }
        self.value_of(&Ty::new(dtype, &dims(rows, cols)))
    }

    // ---------------------------------------------------------------- nn

    pub(super) fn softmax(&mut self) -> Option<()> {
        if !self.main.is_float() {
            return None;
        }
        let main = self.main;
        if self.rng.chance(0.3) {
            let (n, c) = (self.rng.range(1, 5), self.rng.range(1, 5));
            let logits = self.value_of(&Ty::new(main, &[n, c]));
            let labels = self.index_from_argmax(&[n], c).unwrap_or_else(|| self.index_tensor(&[n], c));
            self.emit(Node::CrossEntropy(logits, labels), Ty::new(main, &[]));
            return Some(());
        }
        let x = self.pick(|i| i.ty.dtype == main && i.ty.rank() >= 1)?;
        let ty = self.ty(x);
        let axis = self.axis(ty.rank());
        let node = if self.rng.chance(0.5) { Node::Softmax(x, axis) } else { Node::LogSoftmax(x, axis) };
        self.emit(node, ty);
        Some(())
    }

    /// A `[n, c, h, w]` value of the main float dtype: a visible one or a new input.
    fn image(&mut self, min_hw: usize) -> Option<Id> {
        let main = self.main;
        if !main.is_float() {
            return None;
        }
        if self.rng.chance(0.5)
            && let Some(x) = self.pick(|i| i.ty.dtype == main && i.ty.rank() == 4 && i.ty.dims[2] >= min_hw && i.ty.dims[3] >= min_hw)
        {
            return Some(x);
        }
        let dims = [self.rng.range(1, 2), self.rng.range(1, 3), self.rng.range(min_hw, 6), self.rng.range(min_hw, 6)];
        Some(self.value_of(&Ty::new(main, &dims)))
    }

    pub(super) fn conv(&mut self) -> Option<()> {
        let x = self.image(1)?;
        let [n, c, h, w] = self.ty(x).dims[..] else { unreachable!("an image is 4-d") };
        let padding = [self.rng.below(2), self.rng.below(2)];
        let stride = [self.rng.range(1, 2), self.rng.range(1, 2)];
        let kh = self.rng.range(1, (h + 2 * padding[0]).min(3));
        let kw = self.rng.range(1, (w + 2 * padding[1]).min(3));
        let o = self.rng.range(1, 3);
        let weight = self.value_of(&Ty::new(self.main, &[o, c, kh, kw]));
        let bias = self.rng.chance(0.5).then(|| self.value_of(&Ty::new(self.main, &[o])));
        let oh = (h + 2 * padding[0] - kh) / stride[0] + 1;
        let ow = (w + 2 * padding[1] - kw) / stride[1] + 1;
        self.emit(Node::Conv2d { x, w: weight, bias, stride, padding }, Ty::new(self.main, &[n, o, oh, ow]));
        Some(())
    }

    pub(super) fn pool(&mut self) -> Option<()> {
        let x = self.image(2)?;
        let [n, c, h, w] = self.ty(x).dims[..] else { unreachable!("an image is 4-d") };
        let (kernel, stride) = if self.rng.chance(0.5) {
            ([2, 2], [2, 2])
        } else {
            let k = [self.rng.range(1, h.min(3)), self.rng.range(1, w.min(3))];
            (k, [self.rng.range(1, 2), self.rng.range(1, 2)])
        };
        let oh = (h - kernel[0]) / stride[0] + 1;
        let ow = (w - kernel[1]) / stride[1] + 1;
        self.emit(Node::MaxPool2d(x, kernel, stride), Ty::new(self.main, &[n, c, oh, ow]));
        Some(())
    }
}
