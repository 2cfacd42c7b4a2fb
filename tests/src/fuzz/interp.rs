//! Runs a [`Program`] through the public API, one method call per step. The same code runs
//! eagerly and inside a trace, so whatever differs between the two runs is the library's.

use super::program::{Binary, Block, Id, InPlace, Node, Program, Reduce, Rhs, Scalar, Unary};
use super::Fallible;
use std::cell::RefCell;
use tensor_core::control::{cond, while_loop_opts, WhileOptions};
use tensor_core::{Error, Result, Tensor};

/// The values of a run, by id.
struct Env(RefCell<Vec<Option<Tensor>>>);

impl Env {
    fn get(&self, id: Id) -> Result<Tensor> {
        self.0.borrow().get(id).cloned().flatten().ok_or_else(|| Error::InvalidArgument {
            op: "fuzz program",
            arg: "value",
            reason: format!("v{id} is used before it is defined"),
        })
    }

    fn set(&self, id: Id, t: Tensor) {
        self.0.borrow_mut()[id] = Some(t);
    }
}

/// Runs `p` on `inputs` (in the order of `p.inputs`) and returns its results.
pub fn run(p: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    let env = Env(RefCell::new(vec![None; p.types.len()]));
    for ((id, _), t) in p.inputs.iter().zip(inputs) {
        env.set(*id, t.clone());
    }
    run_block(&env, &p.body)
}

fn run_block(env: &Env, b: &Block) -> Result<Vec<Tensor>> {
    for s in &b.steps {
        let outs = step(env, &s.node)?;
        for (&id, t) in s.outs.iter().zip(outs) {
            env.set(id, t);
        }
    }
    b.results.iter().map(|&r| env.get(r)).collect()
}

fn bind(env: &Env, params: &[Id], values: &[Tensor]) {
    for (&id, t) in params.iter().zip(values) {
        env.set(id, t.clone());
    }
}

fn operand(s: Scalar) -> tensor_core::Scalar {
    match s {
        Scalar::F(v) => tensor_core::Scalar::from(v),
        Scalar::I(v) => tensor_core::Scalar::from(v),
    }
}

pub(super) fn binary(op: Binary, x: &Tensor, rhs: tensor_core::ops::Operand) -> Result<Tensor> {
    match op {
        Binary::Add => x.add(rhs),
        Binary::Sub => x.sub(rhs),
        Binary::Mul => x.mul(rhs),
        Binary::Div => x.div(rhs),
        Binary::Pow => x.pow(rhs),
        Binary::Maximum => x.maximum(rhs),
        Binary::Minimum => x.minimum(rhs),
    }
}

pub(super) fn unary(op: Unary, x: &Tensor) -> Result<Tensor> {
    match op {
        Unary::Neg => x.neg(),
        Unary::Exp => x.exp(),
        Unary::Log => x.log(),
        Unary::Sqrt => x.sqrt(),
        Unary::Tanh => x.tanh(),
        Unary::Sigmoid => x.sigmoid(),
        Unary::Relu => x.relu(),
        Unary::Abs => x.abs(),
        Unary::Sign => x.sign(),
        Unary::Not => x.logical_not(),
    }
}

/// `s op x` through the operators, which take f64 or i64 scalars.
fn scalar_lhs(op: Binary, s: Scalar, x: &Tensor) -> Tensor {
    match (op, s) {
        (Binary::Add, Scalar::F(v)) => v + x,
        (Binary::Sub, Scalar::F(v)) => v - x,
        (Binary::Mul, Scalar::F(v)) => v * x,
        (Binary::Div, Scalar::F(v)) => v / x,
        (Binary::Add, Scalar::I(v)) => v + x,
        (Binary::Sub, Scalar::I(v)) => v - x,
        (Binary::Mul, Scalar::I(v)) => v * x,
        (Binary::Div, Scalar::I(v)) => v / x,
        _ => panic!("no operator for {op:?} with a scalar on the left"),
    }
}

fn reduce(op: Reduce, x: &Tensor, axes: &Option<Vec<isize>>, keepdim: bool) -> Result<Tensor> {
    match (op, axes) {
        (Reduce::Sum, None) => x.sum().fallible(),
        (Reduce::Mean, None) => x.mean(),
        (Reduce::Max, None) => x.max(),
        (Reduce::Min, None) => x.min(),
        (Reduce::Sum, Some(a)) => x.sum_axes(a, keepdim),
        (Reduce::Mean, Some(a)) => x.mean_axes(a, keepdim),
        (Reduce::Max, Some(a)) => x.max_axes(a, keepdim),
        (Reduce::Min, Some(a)) => x.min_axes(a, keepdim),
    }
}

fn in_place(op: InPlace, t: &Tensor, rhs: tensor_core::ops::Operand) -> Result<()> {
    match op {
        InPlace::Add => t.add_(rhs),
        InPlace::Sub => t.sub_(rhs),
        InPlace::Mul => t.mul_(rhs),
        InPlace::Div => t.div_(rhs),
    }
}

fn step(env: &Env, node: &Node) -> Result<Vec<Tensor>> {
    let g = |id: Id| env.get(id);
    let one = |t: Result<Tensor>| t.map(|t| vec![t]);
    let rhs_value = |r: &Rhs| -> Result<Option<Tensor>> {
        match r {
            Rhs::Value(v) => Ok(Some(env.get(*v)?)),
            Rhs::Scalar(_) => Ok(None),
        }
    };
    match node {
        Node::Unary(op, x) => one(unary(*op, &g(*x)?)),
        Node::Binary(op, x, r) => {
            let (x, y) = (g(*x)?, rhs_value(r)?);
            one(match (y, r) {
                (Some(y), _) => binary(*op, &x, (&y).into()),
                (None, Rhs::Scalar(s)) => binary(*op, &x, operand(*s).into()),
                (None, Rhs::Value(_)) => unreachable!("a value operand was read above"),
            })
        }
        Node::ScalarLhs(op, s, x) => Ok(vec![scalar_lhs(*op, *s, &g(*x)?)]),
        Node::Compare(op, x, r) => {
            let (x, y) = (g(*x)?, rhs_value(r)?);
            one(match (y, r) {
                (Some(y), _) => x.compare(*op, &y),
                (None, Rhs::Scalar(s)) => x.compare(*op, operand(*s)),
                (None, Rhs::Value(_)) => unreachable!("a value operand was read above"),
            })
        }
        Node::Where(c, a, b) => one(Tensor::where_(&g(*c)?, &g(*a)?, &g(*b)?)),
        Node::Clamp(x, lo, hi) => {
            let x = g(*x)?;
            one(match (lo, hi) {
                (Some(lo), Some(hi)) => x.clamp(operand(*lo), operand(*hi)),
                (Some(lo), None) => x.clamp_min(operand(*lo)),
                (None, Some(hi)) => x.clamp_max(operand(*hi)),
                (None, None) => Ok(x),
            })
        }
        Node::Cast(x, d) => one(g(*x)?.cast(*d).fallible()),
        Node::Reduce(op, x, axes, keep) => one(reduce(*op, &g(*x)?, axes, *keep)),
        Node::Argmax(x, axis, keep) => one(g(*x)?.argmax(*axis, *keep)),
        Node::Matmul(a, b) => one(g(*a)?.matmul(&g(*b)?)),
        Node::MatmulT(a, b, ta, tb) => one(g(*a)?.matmul_t(&g(*b)?, *ta, *tb)),
        Node::Reshape(x, dims) => one(g(*x)?.reshape(dims)),
        Node::Permute(x, perm) => one(g(*x)?.permute(perm)),
        Node::Transpose(x, a, b) => one(g(*x)?.transpose(*a, *b)),
        Node::T(x) => one(g(*x)?.t()),
        Node::BroadcastTo(x, dims) => one(g(*x)?.broadcast_to(dims)),
        Node::Unsqueeze(x, a) => one(g(*x)?.unsqueeze(*a)),
        Node::Squeeze(x, a) => one(g(*x)?.squeeze(*a)),
        Node::FlattenFrom(x, a) => one(g(*x)?.flatten_from(*a)),
        Node::Concat(xs, axis) => {
            let ts: Vec<Tensor> = xs.iter().map(|&x| g(x)).collect::<Result<_>>()?;
            one(Tensor::concat(&ts.iter().collect::<Vec<_>>(), *axis))
        }
        Node::Stack(xs, axis) => {
            let ts: Vec<Tensor> = xs.iter().map(|&x| g(x)).collect::<Result<_>>()?;
            one(Tensor::stack(&ts.iter().collect::<Vec<_>>(), *axis))
        }
        Node::Narrow(x, axis, start, len) => one(g(*x)?.narrow(*axis, *start, *len)),
        Node::Select(x, axis, index) => one(g(*x)?.select(*axis, *index)),
        Node::IndexSelect(x, axis, i) => one(g(*x)?.index_select(*axis, &g(*i)?)),
        Node::Gather(x, axis, i) => one(g(*x)?.gather(*axis, &g(*i)?)),
        Node::OneHot(x, classes, d) => one(g(*x)?.one_hot(*classes, *d)),
        Node::Softmax(x, axis) => one(g(*x)?.softmax(*axis)),
        Node::LogSoftmax(x, axis) => one(g(*x)?.log_softmax(*axis)),
        Node::CrossEntropy(x, l) => one(g(*x)?.cross_entropy(&g(*l)?)),
        Node::Conv2d { x, w, bias, stride, padding } => {
            let b = bias.map(g).transpose()?;
            one(g(*x)?.conv2d(&g(*w)?, b.as_ref(), *stride, *padding))
        }
        Node::MaxPool2d(x, k, s) => one(g(*x)?.max_pool2d(*k, *s)),
        Node::Detach(x) => Ok(vec![g(*x)?.detach()]),
        Node::Const(ty, values) => Ok(vec![super::data::from_f64(ty.dtype, &ty.dims, values)]),
        Node::InPlace(op, t, r) => {
            let (t, y) = (g(*t)?, rhs_value(r)?);
            match (y, r) {
                (Some(y), _) => in_place(*op, &t, (&y).into())?,
                (None, Rhs::Scalar(s)) => in_place(*op, &t, operand(*s).into())?,
                (None, Rhs::Value(_)) => unreachable!("a value operand was read above"),
            }
            Ok(vec![])
        }
        Node::Assign(t, src) => g(*t)?.assign_(&g(*src)?).map(|()| vec![]),
        Node::Zero(t) => g(*t)?.zero_().map(|()| vec![]),
        Node::Cond { pred, then, other } => cond(&g(*pred)?, || run_block(env, then), || run_block(env, other)),
        Node::While { vars, cond: c, body, max_iterations } => {
            let init: Vec<Tensor> = vars.iter().map(|&v| g(v)).collect::<Result<_>>()?;
            let opts = WhileOptions { max_iterations: *max_iterations, ..WhileOptions::default() };
            let check = |vs: &Vec<Tensor>| {
                bind(env, &c.params, vs);
                Ok(run_block(env, c)?.remove(0))
            };
            let next = |vs: Vec<Tensor>| {
                bind(env, &body.params, &vs);
                run_block(env, body)
            };
            while_loop_opts(&opts, check, next, init)
        }
    }
}
