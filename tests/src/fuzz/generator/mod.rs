//! The seeded program generator. It keeps every value's type, builds each step from values
//! that fit (adding an input or a constant when none does), and so makes programs that run
//! without error by construction: a program the eager run rejects is counted as invalid,
//! and the fuzz reports how many there were.
//!
//! `ops.rs` picks an op family per step; `elementwise.rs` (broadcasting, scalars, in-place
//! updates), `shapes.rs` (reductions, layout, indexing) and `nn.rs` (matmul, softmax and
//! cross-entropy, conv, pooling) build them; `control.rs` the `cond` and `while_loop` blocks
//! and the ops that keep a value's type, which their branches and bodies are made of.

mod control;
mod elementwise;
mod nn;
mod ops;
mod shapes;

use super::data::{Dist, InputSpec};
use super::program::{Block, GradMode, Id, Node, Program, Reduce, Step, Ty};
use super::rng::Rng;
use tensor_core::DType;

/// Limits of the programs generated.
#[derive(Clone, Debug)]
pub struct Config {
    /// The most top-level steps (a step may add a few helpers).
    pub max_steps: usize,
    /// The largest dim.
    pub max_dim: usize,
    /// The most elements of any value.
    pub max_numel: usize,
    /// How deep `cond`/`while_loop` nest.
    pub max_depth: usize,
    /// Let values that require grad flow through `cond`/`while_loop`. Off by default: their
    /// gradients are known to differ from eager (see docs/TESTING.md).
    pub control_grads: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config { max_steps: 8, max_dim: 6, max_numel: 400, max_depth: 2, control_grads: false }
    }
}

/// What the generator knows about a value.
#[derive(Clone, Debug)]
struct Info {
    ty: Ty,
    /// Requires grad (an input leaf that does, or a float result of one).
    grad: bool,
    /// Read by a step already (an in-place update must not change a value a gradient saved).
    read: bool,
    /// The block nesting depth it was made at.
    depth: usize,
    /// An input of the program.
    input: bool,
    /// Known to hold integers in `0..bound` (index tensors, labels, argmax results).
    bound: Option<i64>,
    /// Made by an op whose gradient reads its output (exp, softmax, max, ...), so an
    /// in-place update of it would break that gradient.
    saved: bool,
    /// An output of a `cond` or `while_loop` (which may alias one of its inputs eagerly).
    control: bool,
}

/// A point to roll the generator back to.
struct Checkpoint {
    values: usize,
    inputs: usize,
    steps: usize,
    scope: usize,
    inputs_scope: usize,
}

/// The generator's state while it builds one program.
pub(super) struct Gen {
    rng: Rng,
    cfg: Config,
    info: Vec<Info>,
    inputs: Vec<(Id, InputSpec)>,
    /// The steps of the blocks being built, innermost last.
    blocks: Vec<Vec<Step>>,
    /// The values visible in each open block, innermost last.
    scopes: Vec<Vec<Id>>,
    /// The program takes a gradient, so float inputs may require grad.
    grad: bool,
    /// The program's main dtype.
    main: DType,
    seed: u64,
    /// Inside a `cond`/`while_loop` (unless `control_grads`): only values that do not
    /// require grad may be used, and new inputs do not.
    no_grad: usize,
}

/// Generates program `index` of the stream `seed`.
///
/// ```
/// use tests::fuzz::{generate, Config};
/// let p = generate(7, 0, &Config::default());
/// assert_eq!(p, generate(7, 0, &Config::default())); // deterministic
/// assert!(p.op_count() >= 1);
/// ```
pub fn generate(seed: u64, index: u64, cfg: &Config) -> Program {
    let mut rng = Rng::derive(seed, index);
    let main = [DType::F32, DType::F32, DType::F32, DType::F32, DType::F64, DType::F64, DType::I32, DType::I64][rng.below(8)];
    let grad = main.is_float() && rng.chance(0.6);
    let data_seed = rng.next_u64() >> 16;
    let mut g = Gen {
        rng,
        cfg: cfg.clone(),
        info: Vec::new(),
        inputs: Vec::new(),
        blocks: vec![Vec::new()],
        scopes: vec![Vec::new()],
        grad,
        main,
        seed: data_seed,
        no_grad: 0,
    };
    g.program()
}

impl Gen {
    fn program(&mut self) -> Program {
        let first = self.rng.range(1, 2);
        for _ in 0..first {
            let ty = self.random_ty(self.main, 1, 3);
            self.new_input(ty);
        }
        let steps = self.rng.range(1, self.cfg.max_steps);
        for _ in 0..steps {
            self.any_step();
        }
        let mut results = self.pick_outputs();
        let grad = self.grad_mode(&mut results);
        let body = Block { params: vec![], steps: self.blocks.pop().expect("the top block"), results };
        let preset_grads = matches!(grad, GradMode::Backward | GradMode::BackwardSgd(_)) && self.rng.chance(0.3);
        Program { inputs: std::mem::take(&mut self.inputs), body, grad, preset_grads, types: self.info.iter().map(|i| Some(i.ty.clone())).collect() }
    }

    /// One to three outputs, preferring values nothing has read yet (the ends of chains).
    fn pick_outputs(&mut self) -> Vec<Id> {
        let top: Vec<Id> = self.scopes[0].iter().copied().filter(|&v| !self.info[v].input).collect();
        let top = if top.is_empty() { self.scopes[0].clone() } else { top };
        let unread: Vec<Id> = top.iter().copied().filter(|&v| !self.info[v].read).collect();
        let mut outs: Vec<Id> = unread.iter().rev().take(3).copied().collect();
        if outs.is_empty() || self.rng.chance(0.3) {
            outs.push(*self.rng.pick(&top));
        }
        outs.dedup();
        outs
    }

    /// Chooses the gradient to take; when there is one, appends the loss
    /// `sum_i sum(out_i * w_i)` (each `w_i` a new input) to `results`.
    fn grad_mode(&mut self, results: &mut Vec<Id>) -> GradMode {
        let diff: Vec<Id> = results.iter().copied().filter(|&v| self.info[v].grad).collect();
        if !self.grad || diff.is_empty() {
            return GradMode::None;
        }
        let mut loss: Option<Id> = None;
        for v in diff {
            let ty = self.info[v].ty.clone();
            let w = self.new_input_with(ty.clone(), Dist::Normal, false);
            let p = self.emit(Node::Binary(super::program::Binary::Mul, v, super::program::Rhs::Value(w)), ty.clone());
            let s = self.emit(Node::Reduce(Reduce::Sum, p, None, false), Ty::new(ty.dtype, &[]));
            let s = if ty.dtype == self.main { s } else { self.emit(Node::Cast(s, self.main), Ty::new(self.main, &[])) };
            loss = Some(match loss {
                None => s,
                Some(l) => self.emit(Node::Binary(super::program::Binary::Add, l, super::program::Rhs::Value(s)), Ty::new(self.main, &[])),
            });
        }
        let mode = match self.rng.below(10) {
            0..=4 => GradMode::Backward,
            5..=7 => GradMode::Functional,
            _ => GradMode::BackwardSgd(*self.rng.pick(&[0.1, 0.5, -2.0])),
        };
        if let GradMode::BackwardSgd(_) = mode {
            // The SGD step updates the inputs in place after the outputs are computed; an
            // output of `cond`/`while_loop` may be an input's tensor eagerly (see `Info`).
            for r in results.iter_mut() {
                if self.info[*r].control {
                    let ty = self.ty(*r);
                    let op = if ty.dtype == DType::Bool { super::program::Unary::Not } else { super::program::Unary::Neg };
                    *r = self.emit(Node::Unary(op, *r), ty);
                }
            }
        }
        results.push(loss.expect("at least one differentiable output"));
        mode
    }

    // ---------------------------------------------------------------- values and inputs

    /// Where the program is now, to undo a step that made a value too large.
    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            values: self.info.len(),
            inputs: self.inputs.len(),
            steps: self.blocks.last().map_or(0, Vec::len),
            scope: self.scopes.last().map_or(0, Vec::len),
            inputs_scope: self.scopes[0].len(),
        }
    }

    /// Whether every value made since `mark` is within `max_numel`.
    fn within_limits(&self, mark: &Checkpoint) -> bool {
        self.info[mark.values..].iter().all(|i| i.ty.numel() <= self.cfg.max_numel)
    }

    /// Undoes everything since `mark` (values stay marked read: that is only conservative).
    fn rollback(&mut self, mark: Checkpoint) {
        self.info.truncate(mark.values);
        self.inputs.truncate(mark.inputs);
        self.blocks.last_mut().expect("a block").truncate(mark.steps);
        let depth = self.scopes.len() - 1;
        self.scopes[depth].truncate(mark.scope);
        self.scopes[0].truncate(if depth == 0 { mark.scope } else { mark.inputs_scope });
    }

    fn depth(&self) -> usize {
        self.blocks.len() - 1
    }

    /// A new value of type `ty` in the current block.
    fn new_value(&mut self, ty: Ty, grad: bool, bound: Option<i64>) -> Id {
        let id = self.info.len();
        let depth = self.depth();
        self.info.push(Info { ty, grad, read: false, depth, input: false, bound, saved: false, control: false });
        self.scopes.last_mut().expect("a scope").push(id);
        id
    }

    /// Appends `node` (defining one value of type `ty`) to the current block.
    fn emit(&mut self, node: Node, ty: Ty) -> Id {
        self.emit_bounded(node, ty, None)
    }

    fn emit_bounded(&mut self, node: Node, ty: Ty, bound: Option<i64>) -> Id {
        let ops = node.operands();
        let grad = ty.dtype.is_float() && differentiable(&node) && ops.iter().any(|&o| self.info[o].grad);
        for &o in &ops {
            self.info[o].read = true;
        }
        let id = self.new_value(ty, grad, bound);
        self.info[id].saved = saves_output(&node);
        self.blocks.last_mut().expect("a block").push(Step { outs: vec![id], node });
        id
    }

    /// Appends an in-place update (it defines no value; its right-hand side is read).
    fn emit_in_place(&mut self, node: Node) {
        let target = node.in_place_target().expect("an in-place node");
        // The value written from (which may be the target itself: `y.assign_(&y)`).
        let src = match &node {
            Node::InPlace(_, _, super::program::Rhs::Value(v)) | Node::Assign(_, v) => Some(*v),
            _ => None,
        };
        if let Some(v) = src.filter(|&v| v != target) {
            self.info[v].read = true;
        }
        let src_grad = src.is_some_and(|v| self.info[v].grad);
        let grad = match &node {
            Node::Zero(_) => false,
            Node::Assign(..) => src_grad,
            _ => self.info[target].grad || src_grad,
        };
        let target_info = &mut self.info[target];
        target_info.grad = grad && target_info.ty.dtype.is_float();
        // The values change: an index bound no longer holds.
        target_info.bound = None;
        self.blocks.last_mut().expect("a block").push(Step { outs: vec![], node });
    }

    /// A new program input of type `ty` (normal values, mostly; may require grad).
    fn new_input(&mut self, ty: Ty) -> Id {
        let dist = if !ty.dtype.is_float() {
            Dist::Normal
        } else {
            match self.rng.below(10) {
                0 => Dist::Ties,
                1 => Dist::Special,
                _ => Dist::Normal,
            }
        };
        let grad = self.grad && self.no_grad == 0 && ty.dtype.is_float() && self.rng.chance(0.6);
        self.new_input_with(ty, dist, grad)
    }

    fn new_input_with(&mut self, ty: Ty, dist: Dist, grad: bool) -> Id {
        let bound = match dist {
            Dist::Ints(0, hi) => Some(hi),
            _ => None,
        };
        let id = self.info.len();
        self.info.push(Info { ty: ty.clone(), grad, read: false, depth: 0, input: true, bound, saved: false, control: false });
        self.scopes[0].push(id);
        let seed = self.seed.wrapping_mul(131).wrapping_add(id as u64);
        let mut spec = InputSpec::new(ty.dtype, &ty.dims, dist, seed);
        spec.requires_grad = grad;
        // Captured tensors never require grad (their `.grad` would outlive one call).
        spec.capture = !grad && self.rng.chance(0.2);
        self.inputs.push((id, spec));
        id
    }

    /// Integers in `0..bound` of `dims`: an input, or a constant made in the function.
    fn index_tensor(&mut self, dims: &[usize], bound: usize) -> Id {
        let dtype = if self.rng.chance(0.7) { DType::I64 } else { DType::I32 };
        let ty = Ty::new(dtype, dims);
        if self.rng.chance(0.25) {
            let values: Vec<f64> = (0..ty.numel()).map(|_| self.rng.below(bound) as f64).collect();
            return self.emit_bounded(Node::Const(ty, values), Ty::new(dtype, dims), Some(bound as i64));
        }
        self.new_input_with(ty, Dist::Ints(0, bound as i64), false)
    }

    /// A value of exactly `ty`: a visible one, a new input, or (sometimes) a constant.
    fn value_of(&mut self, ty: &Ty) -> Id {
        if self.rng.chance(0.6)
            && let Some(v) = self.pick(|i| i.ty == *ty)
        {
            return v;
        }
        if self.rng.chance(0.15) && ty.numel() <= 16 {
            let values: Vec<f64> = (0..ty.numel()).map(|_| self.const_element(ty.dtype)).collect();
            return self.emit(Node::Const(ty.clone(), values), ty.clone());
        }
        self.new_input(ty.clone())
    }

    fn const_element(&mut self, dtype: DType) -> f64 {
        match dtype {
            DType::Bool => self.rng.below(2) as f64,
            d if d.is_int() => self.rng.range(0, 6) as f64 - 3.0,
            _ => (self.rng.normal() * 4.0).round() / 4.0,
        }
    }

    /// A visible value satisfying `ok`, preferring recent ones.
    fn pick(&mut self, ok: impl Fn(&Info) -> bool) -> Option<Id> {
        let no_grad = self.no_grad > 0;
        let fits: Vec<Id> = self.scopes.iter().flatten().copied().filter(|&v| ok(&self.info[v]) && !(no_grad && self.info[v].grad)).collect();
        if fits.is_empty() {
            return None;
        }
        let recent = self.rng.chance(0.5);
        Some(if recent { fits[fits.len() - 1 - self.rng.below(fits.len().min(3))] } else { *self.rng.pick(&fits) })
    }

    /// A visible numeric value of the main dtype, or a new input.
    fn operand(&mut self) -> Id {
        let main = self.main;
        if self.rng.chance(0.9)
            && let Some(v) = self.pick(|i| i.ty.dtype == main)
        {
            return v;
        }
        let ty = self.random_ty(main, 0, 3);
        self.new_input(ty)
    }

    /// A type of `dtype` with a rank in `lo..=hi` (within the size limits).
    fn random_ty(&mut self, dtype: DType, lo: usize, hi: usize) -> Ty {
        loop {
            let rank = self.rng.range(lo, hi);
            let dims: Vec<usize> = (0..rank).map(|_| self.rng.range(1, self.cfg.max_dim)).collect();
            if dims.iter().product::<usize>() <= self.cfg.max_numel {
                return Ty::new(dtype, &dims);
            }
        }
    }

    fn ty(&self, v: Id) -> Ty {
        self.info[v].ty.clone()
    }

    /// A scalar operand for `dtype`: small values, zeros of both signs, now and then NaN or
    /// infinity.
    fn scalar(&mut self, dtype: DType) -> super::program::Scalar {
        use super::program::Scalar;
        if dtype.is_float() {
            let v = *self.rng.pick(&[0.5, -1.5, 2.0, 3.0, 1.0, 0.0, -0.0, 1e-3, 0.25, -4.0, 1.0001, 7.5]);
            let v = if self.rng.chance(0.03) { *self.rng.pick(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e30]) } else { v };
            Scalar::F(v)
        } else {
            Scalar::I(self.rng.range(0, 8) as i64 - 3)
        }
    }
}

/// Whether a node's float result carries its operands' gradients.
fn differentiable(node: &Node) -> bool {
    use super::program::Unary;
    !matches!(node, Node::Compare(..) | Node::Argmax(..) | Node::Unary(Unary::Sign, _) | Node::OneHot(..) | Node::Detach(_) | Node::Const(..))
}

/// Whether a node's gradient reads its output.
fn saves_output(node: &Node) -> bool {
    use super::program::Unary;
    matches!(
        node,
        Node::Unary(Unary::Exp | Unary::Sqrt | Unary::Tanh | Unary::Sigmoid, _)
            | Node::Reduce(Reduce::Max | Reduce::Min, ..)
            | Node::Softmax(..)
            | Node::LogSoftmax(..)
    )
}
