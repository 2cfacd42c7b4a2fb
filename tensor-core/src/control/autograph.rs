//! Run-time support for `if` and `while` with tensor conditions in `#[graph_fn]` bodies (the
//! macro's rewriting is in `tensor-macros/src/autograph/`).
//!
//! The macro cannot know a condition's type, so it emits code that asks at run time. The
//! user's code appears once in the expansion, driven by a small state machine: [`IfState`]
//! for an `if`, [`WhileState`] for a `while`. When the condition is a plain `bool` (or a
//! tensor whose value is known now), only the code Rust would run runs, and entering or
//! leaving it changes nothing. When it is a traced tensor, the state machine runs both
//! branches (or the condition and the body) once each, each inside its own nested trace,
//! and adds one `Cond` or `While` node. The code keeps plain block semantics (borrows, moves
//! and `self` work as written) because it is never put in a closure.
//!
//! Variables the code assigns are carried through the node. Which Rust type a carried variable
//! has is only known to the compiler, so [`Carry`] uses method resolution to pick a real
//! implementation for `Tensor` (and `()`, for an `if` used as a statement) and a fallback for
//! every other type, which reports the variable at trace time.

use super::{check_predicate, cond::cond_nodes, while_loop};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::tensor::Tensor;
use crate::trace::{self, GraphReturn, TraceGuard};
use std::marker::PhantomData;
use std::vec::IntoIter;

/// What a condition asks for.
pub enum Branching {
    /// A value known now: run the Rust code as written.
    Plain(bool),
    /// A traced tensor: trace both branches (or the loop) into the graph.
    Graph(Tensor),
}

/// A type usable as the condition of a rewritten `if` or `while`: `bool`, a bool scalar
/// `Tensor`, references to them, and a `Result` of either (an `Err` leaves the function
/// through [`fail`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the condition of an `if` or `while` in a #[graph_fn] body",
    label = "expected a `bool` or a bool scalar `Tensor`, found `{Self}`",
    note = "a condition is a `bool`, a one-element bool `Tensor` (a comparison such as `x.gt(0.0)`), a reference to one, or a `Result` of one"
)]
pub trait Condition {
    /// Which way to go: plain Rust, or a traced branch.
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

/// References to conditions: a place used as a condition is passed by reference (`&flag`), so
/// a `&Tensor` argument arrives as `&&Tensor`. (Written out rather than by a blanket `&C`
/// impl, which would overlap with `&Result<Tensor>` below, or by `macro_rules!`, which would
/// show up in the error for a type that is no condition.)
impl Condition for &bool {
    #[inline(always)]
    fn branching(self, construct: &'static str) -> Result<Branching> {
        (*self).branching(construct)
    }
    fn into_predicate(self, construct: &'static str) -> Result<Tensor> {
        (*self).into_predicate(construct)
    }
}

impl Condition for &&bool {
    #[inline(always)]
    fn branching(self, construct: &'static str) -> Result<Branching> {
        (*self).branching(construct)
    }
    fn into_predicate(self, construct: &'static str) -> Result<Tensor> {
        (*self).into_predicate(construct)
    }
}

impl Condition for &&Tensor {
    #[inline(always)]
    fn branching(self, construct: &'static str) -> Result<Branching> {
        (*self).branching(construct)
    }
    fn into_predicate(self, construct: &'static str) -> Result<Tensor> {
        (*self).into_predicate(construct)
    }
}

impl Condition for &&&Tensor {
    #[inline(always)]
    fn branching(self, construct: &'static str) -> Result<Branching> {
        (*self).branching(construct)
    }
    fn into_predicate(self, construct: &'static str) -> Result<Tensor> {
        (*self).into_predicate(construct)
    }
}

/// A fallible comparison (`x.lt(&y)?` returning `Result<Tensor>`): its error leaves the body.
impl<C: Condition> Condition for Result<C> {
    #[inline(always)]
    fn branching(self, construct: &'static str) -> Result<Branching> {
        self?.branching(construct)
    }
    fn into_predicate(self, construct: &'static str) -> Result<Tensor> {
        self?.into_predicate(construct)
    }
}

/// A variable holding a fallible comparison's result, used as `if c`.
impl Condition for &Result<Tensor> {
    #[inline(always)]
    fn branching(self, construct: &'static str) -> Result<Branching> {
        self.as_ref().map_err(Error::clone)?.branching(construct)
    }
    fn into_predicate(self, construct: &'static str) -> Result<Tensor> {
        self.as_ref().map_err(Error::clone)?.into_predicate(construct)
    }
}

/// Leaves a graph function's body with an error: `Err` for functions that return `Result`,
/// a panic with the error's message for the others (as the operators do).
#[cold]
pub fn fail<R: GraphReturn>(e: Error) -> R {
    R::from_error(e)
}

/// The carried values' leaves, one entry per variable (an `Err` names a type that cannot be
/// carried). The expansion builds it lazily: only the graph path asks.
pub type Leaves = Vec<Result<Vec<Tensor>>>;

// ------------------------------------------------------------------------ carried values

/// The type of a carried variable (or of an `if`'s value), named by a value of it:
/// `Carry::of(&x)`. Calls go through `(&marker).method(..)` so that the compiler picks
/// [`CarrySupported`] when the type is supported and [`CarryFallback`] otherwise.
pub struct Carry<T>(PhantomData<fn() -> T>);

impl<T> Carry<T> {
    /// The marker of `T`, named by a value.
    #[inline(always)]
    pub fn of(_: &T) -> Self {
        Carry(PhantomData)
    }

    /// The marker of `T`, named by an `Option<T>` (an `if`'s value, which only one branch
    /// may have produced).
    #[inline(always)]
    pub fn of_some(_: &Option<T>) -> Self {
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
    /// The carried type.
    type Value;
    /// The tensors that stand for `value`.
    fn leaves(&self, value: &Self::Value, name: &str) -> Result<Vec<Tensor>>;
    /// The value rebuilt from the node's outputs.
    fn rebuild(&self, outputs: &mut IntoIter<Tensor>) -> Self::Value;
}

impl CarrySupported for Carry<Tensor> {
    type Value = Tensor;
    fn leaves(&self, value: &Tensor, _: &str) -> Result<Vec<Tensor>> {
        Ok(vec![value.clone()])
    }
    fn rebuild(&self, outputs: &mut IntoIter<Tensor>) -> Tensor {
        outputs.next().expect("the node has one output per carried tensor")
    }
}

impl CarrySupported for Carry<()> {
    type Value = ();
    fn leaves(&self, _: &(), _: &str) -> Result<Vec<Tensor>> {
        Ok(Vec::new())
    }
    fn rebuild(&self, _: &mut IntoIter<Tensor>) {}
}

/// Every other type: an error at trace time naming the variable and its type.
pub trait CarryFallback {
    /// The carried type.
    type Value;
    /// Always an error: the type cannot be carried.
    fn leaves(&self, value: &Self::Value, name: &str) -> Result<Vec<Tensor>>;
    /// Never called: `leaves` refused the type before the node was made.
    fn rebuild(&self, outputs: &mut IntoIter<Tensor>) -> Self::Value;
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
    fn rebuild(&self, _: &mut IntoIter<Tensor>) -> T {
        unreachable!("`leaves` refused this type before the graph was built")
    }
}

/// Gathers the carried leaves, failing on the first variable that cannot be carried.
fn gather(carried: Leaves) -> Result<Vec<Tensor>> {
    let mut out = Vec::new();
    for leaves in carried {
        out.extend(leaves?);
    }
    Ok(out)
}

// ------------------------------------------------------------------------------- if

/// A rewritten `if`, from its condition to its value. The expansion reads:
///
/// ```text
/// let mut st = IfState::begin(cond, names, || carried leaves)?;
/// let then = if st.run_then() { let (a, b) = st.enter((a, b), params); <then>; st.leave_then(..)?; .. };
/// let other = if st.run_else() { .. the same with <else> .. };
/// match st.finish()? { None => taken(then, other), Some(outputs) => rebuilt from outputs }
/// ```
///
/// With a plain condition only the taken branch runs, and `enter` hands the variables back
/// unchanged; with a traced one both branches run, each in its own nested trace, `enter`
/// gives them the branch's view of the carried values, and `finish` adds the `Cond` node.
pub struct IfState {
    /// The traced branches; `None` when the condition was known now.
    graph: Option<GraphIf>,
    /// The branch plain code takes.
    taken: bool,
}

impl IfState {
    /// Asks the condition which way to go; on the graph path, records the carried
    /// variables' values (`carried` is only called there) and starts the then-branch.
    #[inline]
    pub fn begin(c: impl Condition, names: &[&str], carried: impl FnOnce() -> Leaves) -> Result<IfState> {
        match c.branching("if")? {
            Branching::Plain(taken) => Ok(IfState { graph: None, taken }),
            Branching::Graph(pred) => Ok(IfState { graph: Some(GraphIf::begin(pred, names, carried())?), taken: true }),
        }
    }

    /// Whether the then-branch runs (both do on the graph path).
    #[inline(always)]
    pub fn run_then(&self) -> bool {
        self.graph.is_some() || self.taken
    }

    /// Whether the else-branch runs (both do on the graph path).
    #[inline(always)]
    pub fn run_else(&self) -> bool {
        self.graph.is_some() || !self.taken
    }

    /// The carried variables as a branch sees them: `vars` as they are on the plain path,
    /// built by `params` from the carried values on the graph path.
    #[inline(always)]
    pub fn enter<T>(&self, vars: T, params: impl FnOnce(&mut IntoIter<Tensor>) -> T) -> T {
        match &self.graph {
            None => vars,
            Some(g) => params(&mut g.vars.clone().into_iter()),
        }
    }

    /// Ends the then-branch with its value's and carried variables' leaves (`outputs` is only
    /// called on the graph path) and starts the else-branch.
    #[inline]
    pub fn leave_then(&mut self, outputs: impl FnOnce() -> Leaves) -> Result<()> {
        match &mut self.graph {
            None => Ok(()),
            Some(g) => g.then_done(outputs()),
        }
    }

    /// Ends the else-branch, as [`IfState::leave_then`] does the then-branch.
    #[inline]
    pub fn leave_else(&mut self, outputs: impl FnOnce() -> Leaves) -> Result<()> {
        match &mut self.graph {
            None => Ok(()),
            Some(g) => g.else_done(outputs()),
        }
    }

    /// On the graph path, adds the `Cond` node and gives its outputs (the value's leaves, then
    /// the carried variables'); `None` on the plain path, where the branch already ran.
    #[inline]
    pub fn finish(self) -> Result<Option<IntoIter<Tensor>>> {
        match self.graph {
            None => Ok(None),
            Some(g) => g.finish().map(|outs| Some(outs.into_iter())),
        }
    }
}

/// The value of the branch that ran, on the plain path.
#[inline(always)]
pub fn taken<V>(then: Option<V>, other: Option<V>) -> V {
    match (then, other) {
        (Some(v), _) | (None, Some(v)) => v,
        (None, None) => unreachable!("one branch of a plain `if` runs"),
    }
}

/// Traces an `if` on a traced condition: the then-branch, then the else-branch, each into a
/// subgraph; [`GraphIf::finish`] adds the `Cond` node. Dropping it early (an error in a branch)
/// pops the branch's trace.
struct GraphIf {
    pred: Tensor,
    vars: Vec<Tensor>,
    names: Vec<String>,
    guard: Option<TraceGuard>,
    then: Option<TracedBranch>,
    other: Option<TracedBranch>,
}

/// A traced branch: its graph with the outer values it captured and updated, its outputs' types.
type TracedBranch = (trace::Nested, Vec<(DType, Shape)>);

impl GraphIf {
    /// Starts tracing the then-branch. `carried` holds each assigned variable's current value.
    fn begin(pred: Tensor, names: &[&str], carried: Leaves) -> Result<GraphIf> {
        let vars = gather(carried)?;
        let pred = trace::resolve(&pred, "if")?;
        let names = std::iter::once("the value of the `if`").chain(names.iter().copied()).map(|n| n.to_string()).collect();
        Ok(GraphIf { pred, vars, names, guard: Some(TraceGuard::begin_nested("then")), then: None, other: None })
    }

    /// Ends the branch being traced with its value and carried variables.
    fn branch_done(&mut self, outputs: Leaves) -> Result<TracedBranch> {
        let outs = gather(outputs)?;
        let nested = self.guard.take().expect("a branch is being traced").finish_nested(&outs)?;
        Ok((nested, super::types_of(&outs)))
    }

    /// Ends the then-branch; starts the else-branch.
    fn then_done(&mut self, outputs: Leaves) -> Result<()> {
        self.then = Some(self.branch_done(outputs)?);
        self.guard = Some(TraceGuard::begin_nested("else"));
        Ok(())
    }

    /// Ends the else-branch.
    fn else_done(&mut self, outputs: Leaves) -> Result<()> {
        self.other = Some(self.branch_done(outputs)?);
        Ok(())
    }

    /// Checks that the branches agree and adds the `Cond` node; its outputs are the value's
    /// leaves then the carried variables.
    fn finish(mut self) -> Result<Vec<Tensor>> {
        let (then, then_types) = self.then.take().expect("the then-branch was traced");
        let (other, else_types) = self.other.take().expect("the else-branch was traced");
        for (i, (a, b)) in then_types.iter().zip(&else_types).enumerate() {
            if a != b {
                return Err(Error::BranchMismatch {
                    index: i,
                    then_desc: format!("{}{} ({})", a.0, a.1, self.name_of(i, then_types.len())),
                    else_desc: format!("{}{}", b.0, b.1),
                });
            }
        }
        cond_nodes(&self.pred, then, other)
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

/// What a rewritten `while` does after asking its condition.
pub enum Step {
    /// Run the body (the condition held, or the body is to be traced).
    Body,
    /// The condition is traced: ask it again, on the loop's parameters.
    Retry,
    /// Leave the loop (the condition is false).
    Exit,
}

/// A rewritten `while`. The expansion reads:
///
/// ```text
/// let mut st = WhileState::new();
/// loop {
///     let (a, b) = st.enter((a, b), params);
///     match st.condition(<cond>, names, || carried leaves)? { Body => {}, Retry => continue, Exit => break }
///     let (a, b) = st.enter((a, b), params);
///     <body>
///     if let Some(outputs) = st.leave_body(|| carried leaves)? { (a, b) = rebuilt from outputs; break }
/// }
/// ```
///
/// While the condition is known now, each pass is one plain iteration. The first time it is
/// a traced tensor, the state starts the loop's condition trace and asks again (`Retry`), on
/// the loop variables as that trace's parameters; the body is then traced once on the body
/// trace's parameters, and `leave_body` adds the `While` node.
pub struct WhileState {
    /// The traced loop; `None` while iterations are plain.
    graph: Option<GraphLoop>,
}

impl Default for WhileState {
    fn default() -> Self {
        Self::new()
    }
}

impl WhileState {
    /// A loop that starts plain.
    #[inline(always)]
    pub fn new() -> WhileState {
        WhileState { graph: None }
    }

    /// The carried variables as the condition or body sees them: `vars` as they are on the
    /// plain path, the current trace's parameters (built by `params`) on the graph path.
    #[inline(always)]
    pub fn enter<T>(&self, vars: T, params: impl FnOnce(&mut IntoIter<Tensor>) -> T) -> T {
        match &self.graph {
            None => vars,
            Some(l) => params(&mut l.params.clone().into_iter()),
        }
    }

    /// Takes the condition's value. On the plain path: run the body or leave. The first time
    /// it is traced: record the carried values (`carried` is only called then), start the
    /// condition's trace and ask again. On that second asking: end the condition's trace and
    /// start the body's.
    #[inline]
    pub fn condition(&mut self, c: impl Condition, names: &[&str], carried: impl FnOnce() -> Leaves) -> Result<Step> {
        if let Some(l) = &mut self.graph {
            l.cond_done(c)?;
            return Ok(Step::Body);
        }
        match c.branching("while")? {
            Branching::Plain(true) => Ok(Step::Body),
            Branching::Plain(false) => Ok(Step::Exit),
            Branching::Graph(_) => {
                self.graph = Some(GraphLoop::begin(names, carried())?);
                Ok(Step::Retry)
            }
        }
    }

    /// Ends the body. On the plain path, `None`: ask the condition again. On the graph path,
    /// ends the body's trace with the carried variables' new values (`outputs` is only called
    /// there), adds the `While` node and gives its outputs.
    #[inline]
    pub fn leave_body(&mut self, outputs: impl FnOnce() -> Leaves) -> Result<Option<IntoIter<Tensor>>> {
        match self.graph.take() {
            None => Ok(None),
            Some(l) => l.finish(outputs()).map(|outs| Some(outs.into_iter())),
        }
    }
}

/// Traces a `while` on a traced condition: the condition, then the body, each once into a
/// subgraph over the carried variables; [`GraphLoop::finish`] adds the `While` node.
struct GraphLoop {
    inits: Vec<Tensor>,
    names: Vec<String>,
    types: Vec<(DType, Shape)>,
    guard: Option<TraceGuard>,
    params: Vec<Tensor>,
    cond: Option<trace::Nested>,
}

impl GraphLoop {
    /// Starts tracing the condition. `carried` holds each assigned variable's current value.
    fn begin(names: &[&str], carried: Leaves) -> Result<GraphLoop> {
        let leaves = gather(carried)?;
        let inits = leaves.iter().map(|t| trace::resolve(t, "while")).collect::<Result<Vec<_>>>()?;
        let types = super::types_of(&leaves);
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let guard = TraceGuard::begin_nested("while_cond");
        let params = while_loop::placeholders(&guard, &types, &names);
        Ok(GraphLoop { inits, names, types, guard: Some(guard), params, cond: None })
    }

    /// Ends the condition; starts the body.
    fn cond_done(&mut self, c: impl Condition) -> Result<()> {
        let c = c.into_predicate("while")?;
        let guard = self.guard.take().expect("the condition is being traced");
        self.cond = Some(guard.finish_nested(&[c])?);
        let guard = TraceGuard::begin_nested("while_body");
        self.params = while_loop::placeholders(&guard, &self.types, &self.names);
        self.guard = Some(guard);
        Ok(())
    }

    /// Ends the body with the carried variables' new values and adds the `While` node.
    fn finish(mut self, outputs: Leaves) -> Result<Vec<Tensor>> {
        let outs = gather(outputs)?;
        while_loop::check_loop_vars(&outs, &self.types, &self.names)?;
        let body = self.guard.take().expect("the body is being traced").finish_nested(&outs)?;
        let cond = self.cond.take().expect("the condition was traced");
        while_loop::while_nodes(&self.inits, cond, body, None, &self.types)
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
