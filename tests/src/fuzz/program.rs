//! The programs the fuzz builds: inputs, a list of steps over numbered values (with nested
//! blocks for `cond` and `while_loop`), outputs and what gradient to take. The interpreter
//! (`interp.rs`) runs one through the public API, `print.rs` prints it as Rust code.

use super::data::InputSpec;
use tensor_core::DType;

/// A value's number. Inputs, step results and block parameters each get their own.
pub type Id = usize;

/// A value's dtype and dims.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ty {
    /// The element type.
    pub dtype: DType,
    /// The dims (empty for a scalar).
    pub dims: Vec<usize>,
}

impl Ty {
    /// A type from a dtype and dims.
    pub fn new(dtype: DType, dims: &[usize]) -> Ty {
        Ty { dtype, dims: dims.to_vec() }
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// The number of dims.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
}

/// Elementwise functions of one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Unary {
    Neg,
    Exp,
    Log,
    Sqrt,
    Tanh,
    Sigmoid,
    Relu,
    Abs,
    Sign,
    Not,
}

impl Unary {
    /// The method name.
    pub fn name(self) -> &'static str {
        match self {
            Unary::Neg => "neg",
            Unary::Exp => "exp",
            Unary::Log => "log",
            Unary::Sqrt => "sqrt",
            Unary::Tanh => "tanh",
            Unary::Sigmoid => "sigmoid",
            Unary::Relu => "relu",
            Unary::Abs => "abs",
            Unary::Sign => "sign",
            Unary::Not => "logical_not",
        }
    }
}

/// Elementwise functions of two arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
}

impl Binary {
    /// The method name.
    pub fn name(self) -> &'static str {
        match self {
            Binary::Add => "add",
            Binary::Sub => "sub",
            Binary::Mul => "mul",
            Binary::Div => "div",
            Binary::Pow => "pow",
            Binary::Maximum => "maximum",
            Binary::Minimum => "minimum",
        }
    }

    /// The Rust operator, for the four the operators support with a scalar on the left.
    pub fn operator(self) -> Option<&'static str> {
        match self {
            Binary::Add => Some("+"),
            Binary::Sub => Some("-"),
            Binary::Mul => Some("*"),
            Binary::Div => Some("/"),
            _ => None,
        }
    }
}

/// Reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Reduce {
    Sum,
    Mean,
    Max,
    Min,
}

impl Reduce {
    /// The method name for reducing over axes.
    pub fn axes_name(self) -> &'static str {
        match self {
            Reduce::Sum => "sum_axes",
            Reduce::Mean => "mean_axes",
            Reduce::Max => "max_axes",
            Reduce::Min => "min_axes",
        }
    }
}

/// In-place updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum InPlace {
    Add,
    Sub,
    Mul,
    Div,
}

impl InPlace {
    /// The method name.
    pub fn name(self) -> &'static str {
        match self {
            InPlace::Add => "add_",
            InPlace::Sub => "sub_",
            InPlace::Mul => "mul_",
            InPlace::Div => "div_",
        }
    }
}

/// A Rust scalar operand (it takes the tensor's dtype).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A float literal.
    F(f64),
    /// An integer literal.
    I(i64),
}

/// The right-hand side of a binary or in-place op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rhs {
    /// A tensor (broadcast).
    Value(Id),
    /// A Rust scalar.
    Scalar(Scalar),
}

/// A nested list of steps: the body of a `cond` branch, or a `while_loop` condition or body.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Block {
    /// Values bound when the block runs (a loop's variables); none for `cond` branches.
    pub params: Vec<Id>,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// What the block returns.
    pub results: Vec<Id>,
}

/// One step: an op and the values it defines.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The values this step defines (none for an in-place update).
    pub outs: Vec<Id>,
    /// What it computes.
    pub node: Node,
}

/// An operation, named after the public method that runs it.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum Node {
    Unary(Unary, Id),
    Binary(Binary, Id, Rhs),
    /// `scalar op x` through the operators (`2.0 - &x`).
    ScalarLhs(Binary, Scalar, Id),
    Compare(tensor_core::ops::CmpOp, Id, Rhs),
    Where(Id, Id, Id),
    Clamp(Id, Option<Scalar>, Option<Scalar>),
    Cast(Id, DType),
    /// Over all dims with `sum()`/`mean()`/`max()`/`min()` when `axes` is `None`.
    Reduce(Reduce, Id, Option<Vec<isize>>, bool),
    Argmax(Id, isize, bool),
    Matmul(Id, Id),
    /// `matmul_t`: the operands stored transposed where the flags say.
    MatmulT(Id, Id, bool, bool),
    Reshape(Id, Vec<isize>),
    Permute(Id, Vec<isize>),
    Transpose(Id, isize, isize),
    T(Id),
    BroadcastTo(Id, Vec<usize>),
    Unsqueeze(Id, isize),
    Squeeze(Id, isize),
    FlattenFrom(Id, isize),
    Concat(Vec<Id>, isize),
    Stack(Vec<Id>, isize),
    Narrow(Id, isize, usize, usize),
    Select(Id, isize, usize),
    IndexSelect(Id, isize, Id),
    Gather(Id, isize, Id),
    OneHot(Id, usize, DType),
    Softmax(Id, isize),
    LogSoftmax(Id, isize),
    CrossEntropy(Id, Id),
    Conv2d {
        x: Id,
        w: Id,
        bias: Option<Id>,
        stride: [usize; 2],
        padding: [usize; 2],
    },
    MaxPool2d(Id, [usize; 2], [usize; 2]),
    Detach(Id),
    /// A tensor made inside the function (a constant of the graph), from its values.
    Const(Ty, Vec<f64>),
    /// `target op= rhs`, in place.
    InPlace(InPlace, Id, Rhs),
    /// `target.assign_(src)`.
    Assign(Id, Id),
    /// `target.zero_()`.
    Zero(Id),
    Cond {
        pred: Id,
        then: Block,
        other: Block,
    },
    While {
        vars: Vec<Id>,
        cond: Block,
        body: Block,
        max_iterations: Option<usize>,
    },
}

impl Node {
    /// The values this node reads directly (not those its blocks read).
    pub fn operands(&self) -> Vec<Id> {
        let rhs = |r: &Rhs| match r {
            Rhs::Value(v) => vec![*v],
            Rhs::Scalar(_) => vec![],
        };
        match self {
            Node::Unary(_, x)
            | Node::ScalarLhs(_, _, x)
            | Node::Clamp(x, ..)
            | Node::Cast(x, _)
            | Node::Reduce(_, x, ..)
            | Node::Argmax(x, ..)
            | Node::Reshape(x, _)
            | Node::Permute(x, _)
            | Node::Transpose(x, ..)
            | Node::T(x)
            | Node::BroadcastTo(x, _)
            | Node::Unsqueeze(x, _)
            | Node::Squeeze(x, _)
            | Node::FlattenFrom(x, _)
            | Node::Narrow(x, ..)
            | Node::Select(x, ..)
            | Node::OneHot(x, ..)
            | Node::Softmax(x, _)
            | Node::LogSoftmax(x, _)
            | Node::MaxPool2d(x, ..)
            | Node::Detach(x)
            | Node::Zero(x) => vec![*x],
            Node::Binary(_, x, r) | Node::Compare(_, x, r) | Node::InPlace(_, x, r) => [vec![*x], rhs(r)].concat(),
            Node::Where(a, b, c) => vec![*a, *b, *c],
            Node::Matmul(a, b) | Node::IndexSelect(a, _, b) | Node::Gather(a, _, b) | Node::CrossEntropy(a, b) | Node::Assign(a, b) => vec![*a, *b],
            Node::MatmulT(a, b, ..) => vec![*a, *b],
            Node::Concat(xs, _) | Node::Stack(xs, _) => xs.clone(),
            Node::Conv2d { x, w, bias, .. } => [vec![*x, *w], bias.iter().copied().collect()].concat(),
            Node::Const(..) => vec![],
            Node::Cond { pred, .. } => vec![*pred],
            Node::While { vars, .. } => vars.clone(),
        }
    }

    /// The blocks nested in this node.
    pub fn blocks(&self) -> Vec<&Block> {
        match self {
            Node::Cond { then, other, .. } => vec![then, other],
            Node::While { cond, body, .. } => vec![cond, body],
            _ => vec![],
        }
    }

    /// The blocks nested in this node, mutably.
    pub fn blocks_mut(&mut self) -> Vec<&mut Block> {
        match self {
            Node::Cond { then, other, .. } => vec![then, other],
            Node::While { cond, body, .. } => vec![cond, body],
            _ => vec![],
        }
    }

    /// Every value id this node mentions, its blocks' included, renamed by `f`.
    pub fn rename(&mut self, f: &impl Fn(Id) -> Id) {
        let r = |x: &mut Id| *x = f(*x);
        let rr = |x: &mut Rhs| {
            if let Rhs::Value(v) = x {
                *v = f(*v)
            }
        };
        match self {
            Node::Unary(_, x)
            | Node::ScalarLhs(_, _, x)
            | Node::Clamp(x, ..)
            | Node::Cast(x, _)
            | Node::Reduce(_, x, ..)
            | Node::Argmax(x, ..)
            | Node::Reshape(x, _)
            | Node::Permute(x, _)
            | Node::Transpose(x, ..)
            | Node::T(x)
            | Node::BroadcastTo(x, _)
            | Node::Unsqueeze(x, _)
            | Node::Squeeze(x, _)
            | Node::FlattenFrom(x, _)
            | Node::Narrow(x, ..)
            | Node::Select(x, ..)
            | Node::OneHot(x, ..)
            | Node::Softmax(x, _)
            | Node::LogSoftmax(x, _)
            | Node::MaxPool2d(x, ..)
            | Node::Detach(x)
            | Node::Zero(x) => r(x),
            Node::Binary(_, x, y) | Node::Compare(_, x, y) | Node::InPlace(_, x, y) => {
                r(x);
                rr(y);
            }
            Node::Where(a, b, c) => {
                r(a);
                r(b);
                r(c);
            }
            Node::Matmul(a, b) | Node::IndexSelect(a, _, b) | Node::Gather(a, _, b) | Node::CrossEntropy(a, b) | Node::Assign(a, b) => {
                r(a);
                r(b);
            }
            Node::MatmulT(a, b, ..) => {
                r(a);
                r(b);
            }
            Node::Concat(xs, _) | Node::Stack(xs, _) => xs.iter_mut().for_each(r),
            Node::Conv2d { x, w, bias, .. } => {
                r(x);
                r(w);
                bias.iter_mut().for_each(r);
            }
            Node::Const(..) => {}
            Node::Cond { pred, then, other } => {
                r(pred);
                then.rename(f);
                other.rename(f);
            }
            Node::While { vars, cond, body, .. } => {
                vars.iter_mut().for_each(r);
                cond.rename(f);
                body.rename(f);
            }
        }
    }

    /// The value an in-place node updates.
    pub fn in_place_target(&self) -> Option<Id> {
        match self {
            Node::InPlace(_, t, _) | Node::Assign(t, _) | Node::Zero(t) => Some(*t),
            _ => None,
        }
    }
}

impl Block {
    /// Renames the values the block reads (its parameters and step outputs keep their ids).
    pub fn rename(&mut self, f: &impl Fn(Id) -> Id) {
        for s in &mut self.steps {
            s.node.rename(f);
        }
        self.results.iter_mut().for_each(|x| *x = f(*x));
    }

    /// Every id the block and its nested blocks read.
    pub fn reads(&self, out: &mut Vec<Id>) {
        for s in &self.steps {
            out.extend(s.node.operands());
            for b in s.node.blocks() {
                b.reads(out);
            }
        }
        out.extend(&self.results);
    }

    /// The number of steps, nested ones included.
    pub fn op_count(&self) -> usize {
        self.steps.iter().map(|s| 1 + s.node.blocks().iter().map(|b| b.op_count()).sum::<usize>()).sum()
    }
}

/// Which gradient a program takes of its last output (a float scalar, the loss).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GradMode {
    /// Outputs only.
    None,
    /// `loss.backward()`: the inputs that require grad get a `.grad`.
    Backward,
    /// `vjp(&[loss], &[1], inputs)`: the gradients become outputs; `.grad` stays.
    Functional,
    /// `backward()`, then an SGD step `p -= lr * p.grad` under `no_grad` on each input that
    /// requires grad (an in-place update of the caller's tensor).
    BackwardSgd(f64),
}

/// A whole program.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The inputs, each with its value id.
    pub inputs: Vec<(Id, InputSpec)>,
    /// The function's body.
    pub body: Block,
    /// What gradient to take (the last result is the loss unless `GradMode::None`).
    pub grad: GradMode,
    /// Start every `.grad` of an input that requires grad at a given value before each run
    /// (so a traced `backward()` adds to a `.grad` it reads when the graph runs).
    pub preset_grads: bool,
    /// The type of every value (by id).
    pub types: Vec<Option<Ty>>,
}

impl Program {
    /// The number of ops (steps, nested ones included).
    pub fn op_count(&self) -> usize {
        self.body.op_count()
    }

    /// The input specs in order.
    pub fn specs(&self) -> Vec<InputSpec> {
        self.inputs.iter().map(|(_, s)| s.clone()).collect()
    }

    /// The type of value `id`.
    pub fn ty(&self, id: Id) -> &Ty {
        self.types[id].as_ref().expect("every id of a program has a type")
    }
}

impl Program {
    /// Whether every value is defined before it is read, in its block or an enclosing one,
    /// and every in-place update targets a value made in its own block (not a parameter):
    /// the rules generated programs keep, which shrinking must keep too.
    pub fn well_formed(&self) -> bool {
        let mut scopes: Vec<Vec<Id>> = vec![self.inputs.iter().map(|(id, _)| *id).collect()];
        block_well_formed(&self.body, &mut scopes)
    }
}

fn block_well_formed(b: &Block, scopes: &mut Vec<Vec<Id>>) -> bool {
    scopes.push(b.params.clone());
    let ok = steps_well_formed(b, scopes);
    scopes.pop();
    ok
}

fn steps_well_formed(b: &Block, scopes: &mut Vec<Vec<Id>>) -> bool {
    let visible = |scopes: &Vec<Vec<Id>>, v: Id| scopes.iter().any(|s| s.contains(&v));
    for s in &b.steps {
        if !s.node.operands().iter().all(|&v| visible(scopes, v)) {
            return false;
        }
        if let Some(t) = s.node.in_place_target() {
            // At the top, inputs may be updated too (scope 0); in a block, only its own values.
            let top = scopes.len() == 2 && scopes[0].contains(&t);
            let own = scopes.last().expect("a scope").contains(&t) && !b.params.contains(&t);
            if !(top || own) {
                return false;
            }
        }
        if let Node::While { cond, body, max_iterations: None, .. } = &s.node
            && !counts_up(cond, body)
        {
            return false;
        }
        for inner in s.node.blocks() {
            if !block_well_formed(inner, scopes) {
                return false;
            }
        }
        scopes.last_mut().expect("a scope").extend(&s.outs);
    }
    b.results.iter().all(|&v| visible(scopes, v))
}

/// Whether a loop without `max_iterations` stops: its condition compares its first
/// variable with a bound and its body adds 1 to it (as generated).
fn counts_up(cond: &Block, body: &Block) -> bool {
    let defined = |b: &Block, id: Id| b.steps.iter().find(|s| s.outs.contains(&id)).map(|s| s.node.clone());
    let compares =
        matches!(defined(cond, cond.results[0]), Some(Node::Compare(tensor_core::ops::CmpOp::Lt, p, Rhs::Scalar(_))) if p == cond.params[0]);
    let steps = matches!(defined(body, body.results[0]), Some(Node::Binary(Binary::Add, p, Rhs::Scalar(Scalar::I(1)))) if p == body.params[0]);
    compares && steps
}
