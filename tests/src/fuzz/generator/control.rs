//! `cond` and `while_loop` steps, and the ops that keep a value's type, which their branches
//! and loop bodies are made of (a branch must return its sibling's types, a body its loop
//! variables' types).

use super::Gen;
use crate::fuzz::data::Dist;
use crate::fuzz::program::{Binary, Block, Id, InPlace, Node, Reduce, Rhs, Scalar, Step, Ty, Unary};
use tensor_core::ops::CmpOp;
use tensor_core::DType;

impl Gen {
    fn open_block(&mut self) {
        self.blocks.push(Vec::new());
        self.scopes.push(Vec::new());
    }

    fn close_block(&mut self, params: Vec<Id>, results: Vec<Id>) -> Block {
        self.scopes.pop();
        Block { params, steps: self.blocks.pop().expect("an open block"), results }
    }

    /// Parameters of the open block with `types` (loop variables). They count as read, so no
    /// in-place update targets them: eagerly they are the caller's tensors (a leaf that
    /// requires grad refuses it), in a graph they are not.
    fn params(&mut self, types: &[Ty], grads: &[bool]) -> Vec<Id> {
        types
            .iter()
            .zip(grads)
            .map(|(ty, &g)| {
                let p = self.new_value(ty.clone(), g, None);
                self.info[p].read = true;
                p
            })
            .collect()
    }

    /// Runs `f` so that, unless `control_grads`, no value it uses requires grad.
    fn without_grads<R>(&mut self, f: impl FnOnce(&mut Gen) -> R) -> R {
        let off = !self.cfg.control_grads;
        self.no_grad += off as usize;
        let r = f(self);
        self.no_grad -= off as usize;
        r
    }

    /// `cond(pred, then, else)` whose branches transform the same values in different ways.
    pub(super) fn cond(&mut self) -> Option<()> {
        if self.depth() >= self.cfg.max_depth {
            return None;
        }
        self.without_grads(Gen::cond_step)
    }

    fn cond_step(&mut self) -> Option<()> {
        let pred = self.predicate();
        let count = self.rng.range(1, 2);
        let seeds: Vec<Id> = (0..count).map(|_| self.pick(|i| i.ty.numel() > 0).unwrap_or_else(|| self.operand())).collect();
        let then = self.branch(&seeds);
        let other = self.branch(&seeds);
        let grad = self.reads_grad(&then) || self.reads_grad(&other);
        self.info[pred].read = true;
        self.finish_control(Node::Cond { pred, then, other }, &seeds, grad);
        Some(())
    }

    fn branch(&mut self, seeds: &[Id]) -> Block {
        self.open_block();
        if self.rng.chance(0.3) {
            self.any_step();
        }
        let results = seeds.iter().map(|&s| self.chain(s, 0)).collect();
        self.close_block(vec![], results)
    }

    /// `x` after 0 to 3 type-keeping ops (at least `min`).
    fn chain(&mut self, x: Id, min: usize) -> Id {
        let n = self.rng.range(min, 3);
        (0..n).fold(x, |v, _| self.same_type(v))
    }

    /// Whether anything `b` reads requires grad.
    fn reads_grad(&self, b: &Block) -> bool {
        let mut reads = Vec::new();
        b.reads(&mut reads);
        reads.iter().any(|&v| self.info[v].grad)
    }

    /// Appends a control node defining values of the types of `like`, then marks what it
    /// read.
    fn finish_control(&mut self, node: Node, like: &[Id], grad: bool) {
        let mut reads = node.operands();
        for b in node.blocks() {
            b.reads(&mut reads);
        }
        for v in reads {
            self.info[v].read = true;
        }
        let outs: Vec<Id> = like
            .iter()
            .map(|&v| {
                let ty = self.ty(v);
                let g = ty.dtype.is_float() && (grad || self.info[v].grad);
                let out = self.new_value(ty, g, None);
                // Eagerly an output may be an input's very tensor (a loop that ran no
                // iteration, a branch that returns a value it captured), in a graph it is
                // a new one: an in-place update of it would tell them apart. Not tested.
                self.info[out].read = true;
                self.info[out].control = true;
                out
            })
            .collect();
        self.blocks.last_mut().expect("a block").push(Step { outs, node });
    }

    /// A scalar bool computed from data: a reduction compared with a scalar.
    fn predicate(&mut self) -> Id {
        if self.rng.chance(0.2)
            && let Some(p) = self.pick(|i| i.ty.dtype == DType::Bool && i.ty.rank() == 0)
        {
            return p;
        }
        let x = self.operand();
        self.data_predicate(x)
    }

    fn data_predicate(&mut self, x: Id) -> Id {
        let ty = self.ty(x);
        let x = if ty.dtype == DType::Bool { self.emit(Node::Cast(x, DType::I64), Ty::new(DType::I64, &ty.dims)) } else { x };
        let dtype = self.ty(x).dtype;
        let s = if ty.rank() == 0 {
            x
        } else {
            let op = *self.rng.pick(&[Reduce::Sum, Reduce::Max, Reduce::Min]);
            self.emit(Node::Reduce(op, x, None, false), Ty::new(dtype, &[]))
        };
        let op = *self.rng.pick(&[CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Ne]);
        let c = if dtype.is_float() { Scalar::F(*self.rng.pick(&[0.0, 1.0, -1.0, 0.5])) } else { Scalar::I(self.rng.range(0, 2) as i64) };
        self.emit(Node::Compare(op, s, Rhs::Scalar(c)), Ty::new(DType::Bool, &[]))
    }

    /// `while_loop` over an optional counter and one or two values: the condition compares
    /// the counter with a trip count or tests the data (then `max_iterations` bounds it).
    pub(super) fn while_loop(&mut self) -> Option<()> {
        if self.depth() >= self.cfg.max_depth {
            return None;
        }
        self.without_grads(Gen::while_step)
    }

    fn while_step(&mut self) -> Option<()> {
        let counter = self.rng.chance(0.7);
        let mut vars = Vec::new();
        if counter {
            let dtype = *self.rng.pick(&[DType::I32, DType::I64]);
            let start = if self.rng.chance(0.5) {
                self.emit(Node::Const(Ty::new(dtype, &[]), vec![0.0]), Ty::new(dtype, &[]))
            } else {
                self.new_input_with(Ty::new(dtype, &[]), Dist::Ints(0, 2), false)
            };
            vars.push(start);
        }
        for _ in 0..self.rng.range(1, 2) {
            let v = self.pick(|i| i.ty.numel() > 0).unwrap_or_else(|| self.operand());
            vars.push(v);
        }
        let types: Vec<Ty> = vars.iter().map(|&v| self.ty(v)).collect();
        let grads: Vec<bool> = vars.iter().map(|&v| self.info[v].grad).collect();
        let max_iterations = if !counter || self.rng.chance(0.3) { Some(self.rng.range(0, 4)) } else { None };
        let trips = self.rng.range(0, 3) as i64;

        self.open_block();
        let ps = self.params(&types, &grads);
        let pred = if counter {
            self.emit(Node::Compare(CmpOp::Lt, ps[0], Rhs::Scalar(Scalar::I(trips))), Ty::new(DType::Bool, &[]))
        } else {
            self.data_predicate(ps[0])
        };
        let cond = self.close_block(ps, vec![pred]);

        self.open_block();
        let ps = self.params(&types, &grads);
        let results: Vec<Id> = ps
            .iter()
            .enumerate()
            .map(|(k, &p)| {
                if k == 0 && counter {
                    self.emit(Node::Binary(Binary::Add, p, Rhs::Scalar(Scalar::I(1))), types[0].clone())
                } else {
                    self.chain(p, 1)
                }
            })
            .collect();
        let body = self.close_block(ps, results);

        let grad = self.reads_grad(&body);
        self.finish_control(Node::While { vars: vars.clone(), cond, body, max_iterations }, &vars, grad);
        Some(())
    }

    /// One op whose result has `x`'s type.
    pub(super) fn same_type(&mut self, x: Id) -> Id {
        let ty = self.ty(x);
        if ty.dtype == DType::Bool {
            if self.rng.chance(0.5) {
                return self.emit(Node::Unary(Unary::Not, x), ty);
            }
            let other = self.partner_into(&ty);
            return self.emit(Node::Where(x, other, x), ty);
        }
        let float = ty.dtype.is_float();
        match self.rng.below(11) {
            0 | 1 => self.unary_on(x),
            2 | 3 => {
                let op = *self.rng.pick(&[Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Maximum, Binary::Minimum]);
                let s = self.scalar(ty.dtype);
                self.emit(Node::Binary(op, x, Rhs::Scalar(s)), ty)
            }
            4 => {
                let op = *self.rng.pick(&[Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Maximum, Binary::Pow]);
                let p = self.partner_into(&ty);
                let node = if self.rng.chance(0.5) { Node::Binary(op, x, Rhs::Value(p)) } else { Node::Binary(op, p, Rhs::Value(x)) };
                self.emit(node, ty)
            }
            5 => {
                let (lo, hi) = if float { (Scalar::F(-1.0), Scalar::F(2.0)) } else { (Scalar::I(-1), Scalar::I(2)) };
                self.emit(Node::Clamp(x, Some(lo), Some(hi)), ty)
            }
            6 if float && ty.rank() >= 1 => {
                let axis = self.axis(ty.rank());
                let node = if self.rng.chance(0.5) { Node::Softmax(x, axis) } else { Node::LogSoftmax(x, axis) };
                self.emit(node, ty)
            }
            7 if ty.rank() >= 1 => {
                let axis = self.axis(ty.rank());
                let mut dims = ty.dims.clone();
                dims[super::ops::norm(axis, ty.rank())] = 1;
                let m = self.emit(Node::Reduce(Reduce::Max, x, Some(vec![axis]), true), Ty::new(ty.dtype, &dims));
                self.emit(Node::Binary(Binary::Sub, x, Rhs::Value(m)), ty)
            }
            8 if ty.rank() >= 2 => {
                let n = ty.dims[ty.rank() - 1];
                let w = self.value_of(&Ty::new(ty.dtype, &[n, n]));
                let w = if self.rng.chance(0.5) { self.emit(Node::T(w), Ty::new(ty.dtype, &[n, n])) } else { w };
                self.emit(Node::Matmul(x, w), ty)
            }
            9 => {
                let s = if float { Scalar::F(1.5) } else { Scalar::I(2) };
                let y = self.emit(Node::Binary(Binary::Mul, x, Rhs::Scalar(s)), ty.clone());
                let op = *self.rng.pick(&[InPlace::Add, InPlace::Sub, InPlace::Mul, InPlace::Div]);
                let p = self.partner_into(&ty);
                self.emit_in_place(Node::InPlace(op, y, Rhs::Value(p)));
                y
            }
            10 if ty.dims.iter().any(|&d| d >= 2) => {
                // The two halves of a dim swapped: narrow, narrow, concat.
                let long: Vec<usize> = (0..ty.rank()).filter(|&k| ty.dims[k] >= 2).collect();
                let k = *self.rng.pick(&long);
                let axis = if self.rng.chance(0.3) { k as isize - ty.rank() as isize } else { k as isize };
                let half = ty.dims[k] / 2;
                let with = |len: usize| {
                    Ty::new(ty.dtype, &{
                        let mut d = ty.dims.clone();
                        d[k] = len;
                        d
                    })
                };
                let a = self.emit(Node::Narrow(x, axis, 0, half), with(half));
                let b = self.emit(Node::Narrow(x, axis, half, ty.dims[k] - half), with(ty.dims[k] - half));
                self.emit(Node::Concat(vec![b, a], axis), ty)
            }
            _ => {
                let s = self.scalar(ty.dtype);
                let c = self.emit(Node::Compare(CmpOp::Gt, x, Rhs::Scalar(s)), Ty::new(DType::Bool, &ty.dims));
                let p = self.partner_into(&ty);
                self.emit(Node::Where(c, x, p), ty)
            }
        }
    }
}
