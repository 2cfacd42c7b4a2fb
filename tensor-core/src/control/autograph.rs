//! Run-time support for `if` and `while` with tensor conditions in `#[graph_fn]` bodies (the
//! macro's rewriting is in `tensor-macros/src/autograph.rs`).
//!
//! The macro cannot know a condition's type, so it emits code that asks at run time:
//! [`branching`] says whether the condition is a plain `bool` (or a tensor whose value is
//! known now) — then the code runs as the Rust the user wrote — or a traced tensor — then the
//! branch or loop is traced once into a `Cond` or `While` node. The graph path is driven
//! imperatively ([`GraphIf`], [`GraphLoop`]) rather than through closures, so the user's code
//! keeps plain block semantics (borrows, moves and `self` work as written).
//!
//! Variables the code assigns are carried through the node. Which Rust type a carried variable
//! has is only known to the compiler, so [`Carry`] uses method resolution to pick a real
//! implementation for `Tensor` (and `()`, for an `if` used as a statement) and a fallback for
//! every other type, which reports the variable at trace time.

use super::{check_predicate, cond::cond_graphs, while_loop};
use crate::error::{Error, Result};
use crate::function::GraphReturn;
use crate::trace::{self, TraceGuard};
use crate::{DType, Shape, Tensor};
use std::marker::PhantomData;

/// What a condition asks for.
pub enum Branching {
    /// A value known now: run the Rust code as written.
    Plain(bool),
    /// A traced tensor: trace both branches (or the loop) into the graph.
    Graph(Tensor),
}

/// A type usable as the condition of a rewritten `if` or `while`.
pub trait Condition {
    fn branching(self, construct: &'static str) -> Result<Branching>;
    /// The condition as a bool tensor (inside a traced loop condition).
    fn into_predicate(self, construct: &'static str) -> Result<Tensor>;
}

impl Condition for bool {
    #[inline(always)]
    fn branching(self, _: &'static str) -> Result<Branching> {
        Ok(Branching::Plain(self))
    }
    fn into_predicate(self, _: &'static str) -> Result<Tensor> {
        Ok(Tensor::scalar(self))
    }
}

impl Condition for &bool {
    #[inline(always)]
    fn branching(self, _: &'static str) -> Result<Branching> {
        Ok(Branching::Plain(*self))
    }
    fn into_predicate(self, _: &'static str) -> Result<Tensor> {
        Ok(Tensor::scalar(*self))
    }
}

impl Condition for &Tensor {
    fn branching(self, construct: &'static str) -> Result<Branching> {
        check_predicate(construct, self)?;
        // A condition made only of constants is decided now, as AutoGraph does with Python
        // values: the loop unrolls into the trace.
        if crate::tensor::context::is_known_now(self) {
            Ok(Branching::Plain(self.item::<bool>()?))
        } else {
            Ok(Branching::Graph(self.clone()))
        }
    }
    fn into_predicate(self, construct: &'static str) -> Result<Tensor> {
        check_predicate(construct, self)?;
        Ok(self.clone())
    }
}

impl Condition for Tensor {
    fn branching(self, construct: &'static str) -> Result<Branching> {
        (&self).branching(construct)
    }
    fn into_predicate(self, construct: &'static str) -> Result<Tensor> {
        (&self).into_predicate(construct)
    }
}

/// Asks a condition which way to go.
#[inline(always)]
pub fn branching(c: impl Condition, construct: &'static str) -> Result<Branching> {
    c.branching(construct)
}

/// Leaves a graph function's body with an error: `Err` for functions that return `Result`,
/// a panic with the error's message for the others (as the operators do).
#[cold]
pub fn fail<R: GraphReturn>(e: Error) -> R {
    R::from_error(e)
}

// ------------------------------------------------------------------------ carried values

/// The type of a carried variable (or of an `if`'s value), named by a value of it:
/// `Carry::of(&x)`. Calls go through `(&marker).method(..)` so that the compiler picks
/// [`CarrySupported`] when the type is supported and [`CarryFallback`] otherwise.
pub struct Carry<T>(PhantomData<fn() -> T>);

impl<T> Carry<T> {
    #[inline(always)]
    pub fn of(_: &T) -> Self {
        Carry(PhantomData)
    }
}

impl<T> Clone for Carry<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Carry<T> {}

/// The carried types: a `Tensor` is one leaf; `()` (the value of an `if` statement) is none.
pub trait CarrySupported {
    type Value;
    /// The tensors that stand for `value`.
    fn leaves(&self, value: &Self::Value, name: &str) -> Result<Vec<Tensor>>;
    /// The value rebuilt from the node's outputs.
    fn rebuild(&self, outputs: &mut std::vec::IntoIter<Tensor>) -> Self::Value;
}

impl CarrySupported for Carry<Tensor> {
    type Value = Tensor;
    fn leaves(&self, value: &Tensor, _: &str) -> Result<Vec<Tensor>> {
        Ok(vec![value.clone()])
    }
    fn rebuild(&self, outputs: &mut std::vec::IntoIter<Tensor>) -> Tensor {
        outputs.next().expect("the node has one output per carried tensor")
    }
}

impl CarrySupported for Carry<()> {
    type Value = ();
    fn leaves(&self, _: &(), _: &str) -> Result<Vec<Tensor>> {
        Ok(Vec::new())
    }
    fn rebuild(&self, _: &mut std::vec::IntoIter<Tensor>) {}
}

/// Every other type: an error at trace time naming the variable and its type.
pub trait CarryFallback {
    type Value;
    fn leaves(&self, value: &Self::Value, name: &str) -> Result<Vec<Tensor>>;
    fn rebuild(&self, outputs: &mut std::vec::IntoIter<Tensor>) -> Self::Value;
}

impl<T> CarryFallback for &Carry<T> {
    type Value = T;
    fn leaves(&self, _: &T, name: &str) -> Result<Vec<Tensor>> {
        let ty = std::any::type_name::<T>();
        Err(Error::ControlFlow {
            construct: format!(
                "{name} is assigned under a tensor condition, so the graph must carry it through a Cond/While node, but it is a `{ty}`, \
                 not a Tensor; make it a tensor (e.g. Tensor::scalar(..)), or assign it outside the tensor-conditioned code"
            ),
        })
    }
    fn rebuild(&self, _: &mut std::vec::IntoIter<Tensor>) -> T {
        unreachable!("`leaves` refused this type before the graph was built")
    }
}

/// Gathers the carried leaves, each with its dtype and shape, failing on the first variable
/// that cannot be carried.
fn gather(carried: Vec<Result<Vec<Tensor>>>) -> Result<Vec<Tensor>> {
    let mut out = Vec::new();
    for leaves in carried {
        out.extend(leaves?);
    }
    Ok(out)
}

// ------------------------------------------------------------------------------- if

/// Traces an `if` on a traced condition: the then-branch, then the else-branch, each into a
/// subgraph; [`GraphIf::finish`] adds the `Cond` node. Dropping it early (an error in a branch)
/// pops the branch's trace.
pub struct GraphIf {
    pred: Tensor,
    vars: Vec<Tensor>,
    names: Vec<String>,
    guard: Option<TraceGuard>,
    then: Option<TracedThen>,
}

/// A traced then-branch: its graph, the outer values it captured, its outputs' types.
type TracedThen = (crate::graph::Graph, Vec<Tensor>, Vec<(DType, Shape)>);

impl GraphIf {
    /// Starts tracing the then-branch. `carried` holds each assigned variable's current value.
    pub fn begin(pred: Tensor, names: &[&str], carried: Vec<Result<Vec<Tensor>>>) -> Result<GraphIf> {
        let vars = gather(carried)?;
        let pred = trace::resolve(&pred, "if")?;
        let names = std::iter::once("the value of the `if`").chain(names.iter().copied()).map(|n| n.to_string()).collect();
        Ok(GraphIf { pred, vars, names, guard: Some(TraceGuard::begin_nested("then")), then: None })
    }

    /// The carried variables' values on entry to a branch.
    pub fn vars(&self) -> std::vec::IntoIter<Tensor> {
        self.vars.clone().into_iter()
    }

    /// Ends the then-branch with its value and carried variables; starts the else-branch.
    pub fn then_done(&mut self, outputs: Vec<Result<Vec<Tensor>>>) -> Result<()> {
        let outs = gather(outputs)?;
        let (graph, captured) = self.guard.take().expect("then-branch is being traced").finish_nested(&outs)?;
        self.then = Some((graph, captured, super::types_of(&outs)));
        self.guard = Some(TraceGuard::begin_nested("else"));
        Ok(())
    }

    /// Ends the else-branch and adds the `Cond` node; its outputs are the value's leaves then
    /// the carried variables.
    pub fn finish(mut self, outputs: Vec<Result<Vec<Tensor>>>) -> Result<Vec<Tensor>> {
        let outs = gather(outputs)?;
        let (else_graph, else_in) = self.guard.take().expect("else-branch is being traced").finish_nested(&outs)?;
        let (then_graph, then_in, then_types) = self.then.take().expect("then-branch was traced");
        let else_types = super::types_of(&outs);
        for (i, (a, b)) in then_types.iter().zip(&else_types).enumerate() {
            if a != b {
                return Err(Error::BranchMismatch {
                    index: i,
                    then_desc: format!("{}{} ({})", a.0, a.1, self.name_of(i, then_types.len())),
                    else_desc: format!("{}{}", b.0, b.1),
                });
            }
        }
        cond_graphs(&self.pred, then_graph, else_graph, &then_in, &else_in)
    }

    /// The name of output `i` of `n`: the carried variables are the last ones.
    fn name_of(&self, i: usize, n: usize) -> &str {
        let vars = self.names.len() - 1;
        if i + vars >= n {
            &self.names[1 + i + vars - n]
        } else {
            &self.names[0]
        }
    }
}

// ---------------------------------------------------------------------------- while

/// Traces a `while` on a traced condition: the condition, then the body, each once into a
/// subgraph over the carried variables; [`GraphLoop::finish`] adds the `While` node.
pub struct GraphLoop {
    inits: Vec<Tensor>,
    names: Vec<String>,
    types: Vec<(DType, Shape)>,
    guard: Option<TraceGuard>,
    params: Vec<Tensor>,
    cond: Option<(crate::graph::Graph, Vec<Tensor>)>,
}

impl GraphLoop {
    /// Starts tracing the condition. `carried` holds each assigned variable's current value.
    pub fn begin(names: &[&str], carried: Vec<Result<Vec<Tensor>>>) -> Result<GraphLoop> {
        let leaves = gather(carried)?;
        let inits = leaves.iter().map(|t| trace::resolve(t, "while")).collect::<Result<Vec<_>>>()?;
        let types = super::types_of(&leaves);
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let guard = TraceGuard::begin_nested("while_cond");
        let params = while_loop::placeholders(&guard, &types, &names);
        Ok(GraphLoop { inits, names, types, guard: Some(guard), params, cond: None })
    }

    /// The carried variables as the current subgraph's parameters.
    pub fn params(&self) -> std::vec::IntoIter<Tensor> {
        self.params.clone().into_iter()
    }

    /// Ends the condition; starts the body.
    pub fn cond_done(&mut self, c: impl Condition) -> Result<()> {
        let c = c.into_predicate("while")?;
        let guard = self.guard.take().expect("the condition is being traced");
        self.cond = Some(guard.finish_nested(&[c])?);
        let guard = TraceGuard::begin_nested("while_body");
        self.params = while_loop::placeholders(&guard, &self.types, &self.names);
        self.guard = Some(guard);
        Ok(())
    }

    /// Ends the body with the carried variables' new values and adds the `While` node.
    pub fn finish(mut self, outputs: Vec<Result<Vec<Tensor>>>) -> Result<Vec<Tensor>> {
        let outs = gather(outputs)?;
        while_loop::check_loop_vars(&outs, &self.types, &self.names)?;
        let (body_graph, body_in) = self.guard.take().expect("the body is being traced").finish_nested(&outs)?;
        let (cond_graph, cond_in) = self.cond.take().expect("the condition was traced");
        while_loop::while_graphs(&self.inits, cond_graph, body_graph, &cond_in, &body_in, None, &self.types)
    }
}

// ------------------------------------------------------- constructs a graph cannot carry

// Conditions of an `if`/`while` whose code the macro saw contain a construct a graph node
// cannot carry. Only `bool` implements these traits, so a tensor condition there is a compile
// error that says why (written out rather than by `macro_rules!`, which would show up in the
// error).

#[diagnostic::on_unimplemented(
    message = "`break` or `continue` inside code controlled by a `{Self}` condition cannot be carried into a graph loop",
    label = "this condition is a `{Self}`, so `break`/`continue` below it is not allowed",
    note = "a tensor condition makes the `if`/`while` one graph node when traced, and a node cannot jump out of itself; compute a `bool` condition instead, or move the construct out of the tensor-conditioned code"
)]
pub trait PlainConditionForBreak {
    fn holds(self) -> bool;
}

impl PlainConditionForBreak for bool {
    #[inline(always)]
    fn holds(self) -> bool {
        self
    }
}

#[inline(always)]
pub fn plain_for_break(c: impl PlainConditionForBreak) -> bool {
    c.holds()
}

#[diagnostic::on_unimplemented(
    message = "`return` inside code controlled by a `{Self}` condition cannot be carried into a graph node",
    label = "this condition is a `{Self}`, so `return` below it is not allowed",
    note = "a tensor condition makes the `if`/`while` one graph node when traced, and a node cannot jump out of itself; compute a `bool` condition instead, or move the construct out of the tensor-conditioned code"
)]
pub trait PlainConditionForReturn {
    fn holds(self) -> bool;
}

impl PlainConditionForReturn for bool {
    #[inline(always)]
    fn holds(self) -> bool {
        self
    }
}

#[inline(always)]
pub fn plain_for_return(c: impl PlainConditionForReturn) -> bool {
    c.holds()
}

#[diagnostic::on_unimplemented(
    message = "`?` inside code controlled by a `{Self}` condition cannot be carried into a graph node",
    label = "this condition is a `{Self}`, so `?` below it is not allowed; use the operators (+ - * /), which return tensors",
    note = "a tensor condition makes the `if`/`while` one graph node when traced, and a node cannot jump out of itself; compute a `bool` condition instead, or move the construct out of the tensor-conditioned code"
)]
pub trait PlainConditionForTry {
    fn holds(self) -> bool;
}

impl PlainConditionForTry for bool {
    #[inline(always)]
    fn holds(self) -> bool {
        self
    }
}

#[inline(always)]
pub fn plain_for_try(c: impl PlainConditionForTry) -> bool {
    c.holds()
}

#[diagnostic::on_unimplemented(
    message = "assigning to a field, index or dereference inside code controlled by a `{Self}` condition cannot be carried into a graph node",
    label = "this condition is a `{Self}`; only local variables can be carried through the node",
    note = "a tensor condition makes the `if`/`while` one graph node when traced, and a node cannot jump out of itself; compute a `bool` condition instead, or move the construct out of the tensor-conditioned code"
)]
pub trait PlainConditionForPlace {
    fn holds(self) -> bool;
}

impl PlainConditionForPlace for bool {
    #[inline(always)]
    fn holds(self) -> bool {
        self
    }
}

#[inline(always)]
pub fn plain_for_place(c: impl PlainConditionForPlace) -> bool {
    c.holds()
}

#[diagnostic::on_unimplemented(
    message = "`panic!` inside code controlled by a `{Self}` condition would fire whenever the function is traced",
    label = "this condition is a `{Self}`: tracing runs both branches, so a panic below it always fires",
    note = "check the result after the call instead, or move the panic out of the tensor-conditioned code"
)]
pub trait PlainConditionForPanic {
    fn holds(self) -> bool;
}

impl PlainConditionForPanic for bool {
    #[inline(always)]
    fn holds(self) -> bool {
        self
    }
}

#[inline(always)]
pub fn plain_for_panic(c: impl PlainConditionForPanic) -> bool {
    c.holds()
}
