//! The symbol table of the trace being made on this thread, when some of its argument dims
//! are relaxed: the symbols (`n0`, `n1`, … for the relaxed input dims) and the expressions
//! built on them, the guards recorded so far, and, for each traced value with unknown dims,
//! its dims at the traced call (the *hint*) and at a *probe* call whose symbols take large
//! distinct values. A value's unknown dim is symbol expression `e` when it equals `e` at
//! both calls; otherwise reading it specializes the trace to the traced call's dims.

use super::guard::{BinOp, Cmp, Expr, Guard, Guards, Term};
use crate::shape::{Shape, UNKNOWN};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

/// Probe values: large, distinct, and small enough that products of a few stay in range.
fn probe(index: usize) -> usize {
    10_007 + 1_009 * index
}

/// Probe shapes whose element count exceeds this are not propagated (no overflow in rules).
const PROBE_LIMIT: usize = 1 << 60;

pub(crate) struct Table {
    /// The function's trace (the outermost one on this thread).
    root: u64,
    guards: Guards,
    hints: Vec<usize>,
    probes: Vec<Option<usize>>,
    inputs: u32,
    /// (trace, value) -> (dims at the traced call, dims at the probe call)
    values: HashMap<(u64, usize), (Shape, Option<Shape>)>,
    seen: HashSet<Guard>,
    /// Why the trace cannot serve other dims (a read that no guard can express).
    pub(crate) poisoned: Option<String>,
}

thread_local! {
    static TABLE: RefCell<Option<Table>> = const { RefCell::new(None) };
}

fn with<R>(f: impl FnOnce(&mut Table) -> R) -> Option<R> {
    TABLE.with(|t| t.borrow_mut().as_mut().map(f))
}

/// True while the trace on this thread has relaxed dims.
pub(crate) fn is_active() -> bool {
    TABLE.with(|t| t.borrow().is_some())
}

/// Drops the table of trace `root` (its trace ended or unwound).
pub(crate) fn end(root: u64) {
    let old = TABLE.with(|t| {
        let mut t = t.borrow_mut();
        if t.as_ref().is_some_and(|t| t.root == root) {
            t.take()
        } else {
            None
        }
    });
    drop(old);
}

/// Takes the guards of trace `root` when it finishes: `Ok(None)` when it had no relaxed
/// dims; an `Err` with the reason when a read of a dim could not be guarded.
pub(crate) fn take(root: u64) -> Result<Option<Guards>, String> {
    let table = TABLE.with(|t| {
        let mut t = t.borrow_mut();
        if t.as_ref().is_some_and(|t| t.root == root) {
            t.take()
        } else {
            None
        }
    });
    match table {
        None => Ok(None),
        Some(t) => match t.poisoned {
            Some(why) => Err(why),
            None => Ok(Some(t.guards)),
        },
    }
}

/// Binds argument leaf `leaf` (value `value` of trace `trace`): traced with `relaxed`, called
/// with `actual`. Each unknown dim of `relaxed` becomes a symbol.
pub(crate) fn bind_input(trace: u64, value: usize, leaf: usize, relaxed: &Shape, actual: &Shape) {
    if relaxed.is_known() {
        if is_active() {
            with(|t| t.values.insert((trace, value), (actual.clone(), Some(actual.clone()))));
        }
        return;
    }
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        if t.as_ref().is_some_and(|t| t.root != trace) {
            return; // a trace inside another's: its dims are not symbols of the outer one
        }
        let table = t.get_or_insert_with(|| Table {
            root: trace,
            guards: Guards::default(),
            hints: Vec::new(),
            probes: Vec::new(),
            inputs: 0,
            values: HashMap::new(),
            seen: HashSet::new(),
            poisoned: None,
        });
        if relaxed.is_unknown_rank() {
            table.values.insert((trace, value), (actual.clone(), None));
            return;
        }
        if !actual.is_known() || !relaxed.admits(actual) {
            return; // a placeholder (a gradient's), not the call's value: no symbols
        }
        let mut probe_dims = relaxed.clone();
        for (axis, &d) in relaxed.dims().iter().enumerate() {
            if d == UNKNOWN {
                let index = table.inputs;
                table.inputs += 1;
                let p = probe(table.probes.len());
                table.guards.exprs.push(Expr::Input { leaf: leaf as u32, axis: axis as u32, index });
                table.hints.push(actual.dims()[axis]);
                table.probes.push(Some(p));
                probe_dims.dims_mut()[axis] = p;
            }
        }
        table.values.insert((trace, value), (actual.clone(), Some(probe_dims)));
    });
}

/// The dims of value `v` of trace `trace` at the traced and the probe call, when the table
/// is active and knows them.
pub(crate) fn value_dims(trace: u64, v: usize) -> Option<(Shape, Option<Shape>)> {
    with(|t| t.values.get(&(trace, v)).cloned()).flatten()
}

/// Notes the dims of value `v` of trace `trace` at the traced and the probe call (the trace
/// works them out with the op's shape rule).
pub(crate) fn set_value_dims(trace: u64, v: usize, hint: Shape, probe: Option<Shape>) {
    with(|t| t.values.insert((trace, v), (hint, probe)));
}

/// True when a probe shape may be handed to a shape rule (its element count is in range).
pub(crate) fn fits(s: &Shape) -> bool {
    !s.is_unknown_rank() && s.dims().iter().try_fold(1usize, |n, &d| n.checked_mul(d)).is_some_and(|n| n < PROBE_LIMIT)
}

/// Gives value `to` of trace `trace` the dims of value `from` of trace `from_trace` (a
/// captured parameter of a nested trace).
pub(crate) fn alias(from_trace: u64, from: usize, trace: u64, to: usize) {
    with(|t| {
        if let Some(d) = t.values.get(&(from_trace, from)).cloned() {
            t.values.insert((trace, to), d);
        }
    });
}

/// What reading dim `axis` of value (`trace`, `v`) gives: a symbol expression, or — where
/// none fits — the traced call's value with the trace specialized to it; `None` when it has
/// no value at the traced call either (the trace is then poisoned).
pub(crate) fn read(trace: u64, v: usize, axis: usize, what: &str) -> Option<super::Dim> {
    with(|t| {
        let Some((hint, probe)) = t.values.get(&(trace, v)).cloned() else {
            t.poison(format!("{what}: dim {axis} of a value whose dims at the traced call are not known"));
            return None;
        };
        let h = *hint.dims().get(axis)?;
        if let Some(p) = probe.as_ref().and_then(|p| p.dims().get(axis).copied())
            && let Some(e) = (0..t.hints.len()).find(|&e| t.hints[e] == h && t.probes[e] == Some(p))
        {
            return Some(super::Dim::sym(t.root, e as u32, h));
        }
        t.specialize_all();
        Some(super::Dim::from(h))
    })
    .flatten()
}

/// The rank of value (`trace`, `v`) at the traced call (a value of unknown rank): the trace
/// cannot serve other ranks from it, so it is poisoned.
pub(crate) fn read_rank(trace: u64, v: usize, what: &str) -> Option<Shape> {
    with(|t| {
        t.poison(format!("{what}: the dims of a tensor whose rank is unknown in the trace"));
        t.values.get(&(trace, v)).map(|(h, _)| h.clone())
    })
    .flatten()
}

impl Table {
    fn poison(&mut self, why: String) {
        self.poisoned.get_or_insert(why);
    }

    /// Guards every input symbol on its traced value: the trace then serves only the dims
    /// it was traced with.
    fn specialize_all(&mut self) {
        for e in 0..self.hints.len() {
            if matches!(self.guards.exprs[e], Expr::Input { .. }) {
                let h = self.hints[e];
                self.add_guard(Guard { lhs: Term::Sym(e as u32), cmp: Cmp::Eq, rhs: Term::Const(h) });
            }
        }
    }

    fn add_guard(&mut self, g: Guard) {
        if self.seen.insert(g) {
            self.guards.guards.push(g);
        }
    }

    fn value(&self, t: Term) -> (usize, Option<usize>) {
        match t {
            Term::Const(c) => (c, Some(c)),
            Term::Sym(e) => (self.hints[e as usize], self.probes[e as usize]),
        }
    }
}

/// The operand of a table expression for `d` (a dim of trace `root` or a constant).
fn term(root: u64, d: super::Dim) -> Option<Term> {
    match d.sym_of(root) {
        Some(e) => Some(Term::Sym(e)),
        None => d.known().map(Term::Const),
    }
}

/// `a op b` as a new expression (the traced call's value is `hint`), when the trace of `a`
/// or `b` is still active.
pub(crate) fn binop(op: BinOp, a: super::Dim, b: super::Dim, hint: usize) -> Option<super::Dim> {
    with(|t| {
        let (ta, tb) = (term(t.root, a)?, term(t.root, b)?);
        let probe = match (t.value(ta).1, t.value(tb).1) {
            (Some(x), Some(y)) => op.apply(x, y),
            _ => None,
        };
        t.guards.exprs.push(Expr::Bin(op, ta, tb));
        t.hints.push(hint);
        t.probes.push(probe);
        Some(super::Dim::sym(t.root, (t.hints.len() - 1) as u32, hint))
    })
    .flatten()
}

/// Records the guard `a cmp b` — or its negation, whichever held at the traced call — and
/// returns whether it held. `None` when neither is a dim of the active trace.
pub(crate) fn compare(cmp: Cmp, a: super::Dim, b: super::Dim, holds: bool) -> Option<bool> {
    with(|t| {
        let (lhs, rhs) = (term(t.root, a)?, term(t.root, b)?);
        if lhs == rhs {
            return Some(holds); // decided whatever the dims: nothing to guard
        }
        t.add_guard(Guard { lhs, cmp: if holds { cmp } else { cmp.negated() }, rhs });
        Some(holds)
    })
    .flatten()
}

/// The text of `d` (`n0 * 2`), when its trace is active.
pub(crate) fn text(d: super::Dim) -> Option<String> {
    with(|t| d.sym_of(t.root).map(|e| t.guards.term_text(Term::Sym(e), false))).flatten()
}

/// `d` as an expression a graph can hold, when it is a symbolic dim of the active trace.
pub(crate) fn extract(d: super::Dim) -> Option<super::SymDim> {
    with(|t| d.sym_of(t.root).map(|e| super::SymDim::extract(&t.guards.exprs, e))).flatten()
}

/// The value of input dim (`slot`, `axis`) at the traced call (`probe`: false) or at the
/// probe call; `None` when it is not a symbol of the active trace.
fn input_value(t: &Table, slot: usize, axis: usize, probe: bool) -> Option<usize> {
    let e = t.guards.exprs.iter().position(|e| matches!(*e, Expr::Input { leaf, axis: a, .. } if leaf as usize == slot && a as usize == axis))?;
    match probe {
        false => Some(t.hints[e]),
        true => t.probes[e],
    }
}

/// Runs `f` with the input dims of the active trace at the traced call and at the probe
/// call (`dim(slot, axis)`, `None` for a dim that is not a symbol), so a shape rule can give
/// an op's output dims at both; `None` when no table is active.
pub(crate) fn at_hint_and_probe<R>(f: impl FnOnce(&dyn Fn(usize, usize) -> Option<usize>, &dyn Fn(usize, usize) -> Option<usize>) -> R) -> Option<R> {
    with(|t| f(&|slot, axis| input_value(t, slot, axis, false), &|slot, axis| input_value(t, slot, axis, true)))
}

/// Each dim of value (`trace`, `v`) as the expression it equals at the traced and the probe
/// call (`None` for a dim no expression names), for printing (`f32[n0, 784]`).
pub(crate) fn named_dims(trace: u64, v: usize) -> Option<Vec<Option<super::SymDim>>> {
    with(|t| {
        let (hint, probe) = t.values.get(&(trace, v))?;
        let probe = probe.as_ref()?;
        if hint.is_unknown_rank() || hint.rank() != probe.rank() {
            return None;
        }
        let named: Vec<Option<super::SymDim>> = hint
            .dims()
            .iter()
            .zip(probe.dims())
            .map(|(&h, &p)| {
                (0..t.hints.len()).find(|&e| t.hints[e] == h && t.probes[e] == Some(p)).map(|e| super::SymDim::extract(&t.guards.exprs, e as u32))
            })
            .collect();
        named.iter().any(Option::is_some).then_some(named)
    })
    .flatten()
}
