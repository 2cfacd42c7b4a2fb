//! The one place every op goes through. Eagerly: check types, run the kernel, record a grad
//! node if an input requires grad. While tracing: the trace resolves the inputs to graph
//! values, appends a node and returns a symbolic tensor — and the same autograd recording
//! runs on it, so backward passes trace too.

use super::{Op, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::storage::Storage;
use crate::tensor::{Tensor, Value};
use smallvec::SmallVec;
use std::sync::RwLockReadGuard;

/// Applies `op` to `inputs`, returning a new tensor.
pub(crate) fn apply(op: impl Into<Op>, inputs: &[&Tensor]) -> Result<Tensor> {
    let op = op.into();
    if crate::trace::is_active() {
        let resolved = crate::trace::resolve_inputs(inputs, op.name())?;
        let refs: SmallVec<[&Tensor; 3]> = resolved.iter().collect();
        let out = crate::trace::append(&op, &refs)?;
        record(op, &refs, &out);
        return Ok(out);
    }
    let (dtype, shape, storage) = run_eager(&op, inputs)?;
    let out = Tensor::from_value(Value::Concrete(storage), dtype, shape);
    record(op, inputs, &out);
    Ok(out)
}

/// Records `out = op(inputs)` for backward if the op has a gradient.
pub(crate) fn record(op: Op, inputs: &[&Tensor], out: &Tensor) {
    if op.is_differentiable() {
        crate::tensor::grad_node::record(op, inputs, out);
    }
}

/// Checks types and runs the kernel of `op` on concrete inputs: the result's dtype, shape
/// (from the shape rule, which is exact for concrete inputs) and data.
pub(crate) fn run_eager(op: &Op, inputs: &[&Tensor]) -> Result<(DType, Shape, Storage)> {
    let types: SmallVec<[TypeRef; 3]> = inputs.iter().map(|t| TypeRef { dtype: t.0.dtype, shape: &t.0.shape }).collect();
    let (dtype, shape) = op.infer(&types)?;
    let storage = with_storages(inputs, op.name(), |s| op.compute(s))??;
    debug_assert!(storage.dtype() == dtype && storage.shape() == shape, "{}: the kernel's result does not match the shape rule", op.name());
    Ok((dtype, shape, storage))
}

/// An input's data while a kernel reads it: the tensor's read guard (no copy of the
/// storage), or — on a rayon worker thread, where a parallel kernel may run other tasks
/// that write the same tensor while this frame waits — a clone of the storage.
enum Held<'a> {
    Guard(RwLockReadGuard<'a, Value>),
    Owned(Storage),
}

/// Runs `f` on the data of `inputs` (an `Err` naming `op` for a symbolic input). A tensor
/// passed several times is read once.
fn with_storages<R>(inputs: &[&Tensor], op: &'static str, f: impl FnOnce(&[&Storage]) -> R) -> Result<R> {
    let on_worker = rayon::current_thread_index().is_some();
    let mut held: SmallVec<[Held; 3]> = SmallVec::new();
    let mut which: SmallVec<[usize; 3]> = SmallVec::new();
    for (i, t) in inputs.iter().enumerate() {
        match inputs[..i].iter().position(|u| u.same_as(t)) {
            Some(j) => which.push(which[j]),
            None => {
                held.push(if on_worker { Held::Owned(t.storage(op)?) } else { Held::Guard(t.read_value()) });
                which.push(held.len() - 1);
            }
        }
    }
    let mut refs: SmallVec<[&Storage; 3]> = SmallVec::new();
    for &k in &which {
        refs.push(match &held[k] {
            Held::Owned(s) => s,
            Held::Guard(g) => match &**g {
                Value::Concrete(s) => s,
                Value::Symbolic(sym) => return Err(sym.value_error(op)),
            },
        });
    }
    Ok(f(&refs))
}

/// Applies `op` to `(target, others...)` — or to `others` alone when `reads_target` is false
/// (assignment) — and stores the result in `target`, bumping its version. Fails, changing
/// nothing, if the result would not have `target`'s dtype and shape, or if `target` is a leaf
/// that requires grad while grad mode is on.
pub(crate) fn apply_in_place(op: Op, target: &Tensor, reads_target: bool, others: &[&Tensor], name: &'static str) -> Result<()> {
    let grad_on = crate::autograd::is_grad_enabled();
    if grad_on && target.requires_grad_raw() && target.is_leaf_raw() {
        return Err(Error::InPlaceOnLeaf { op: name });
    }
    if crate::trace::is_active() {
        return crate::trace::apply_in_place(op, target, reads_target, others, name);
    }
    let needs_grad =
        grad_on && op.is_differentiable() && (reads_target && target.requires_grad_raw() || others.iter().any(|t| t.requires_grad_raw()));
    // Autograd keeps the old value as an alias the new grad node saves — also where the
    // target is an operand too (`y.mul_(&y)`), or the node would save the new value (and
    // hold its own output); without autograd the target itself is the input.
    let reads_old = reads_target || others.iter().any(|t| t.same_as(target));
    let alias = (reads_old && needs_grad).then(|| target.alias());
    let mut inputs: SmallVec<[&Tensor; 3]> = SmallVec::new();
    if reads_target {
        inputs.push(alias.as_ref().unwrap_or(target));
    }
    inputs.extend(others.iter().map(|&t| match &alias {
        Some(a) if t.same_as(target) => a,
        _ => t,
    }));
    check_in_place_type(&op, &inputs, target, name)?;
    let (_, _, storage) = run_eager(&op, &inputs)?;
    target.set_value(Value::Concrete(storage));
    if needs_grad {
        // PyTorch's rebase_history: the old value (the alias) feeds the new grad node.
        record(op, &inputs, target);
    } else if grad_on && !reads_target {
        // An assignment from values that need no grad cuts the target's history.
        target.detach_in_place();
    }
    Ok(())
}

/// The in-place result must keep the target's dtype and shape.
pub(crate) fn check_in_place_type(op: &Op, inputs: &[&Tensor], target: &Tensor, name: &'static str) -> Result<()> {
    let types: SmallVec<[TypeRef; 3]> = inputs.iter().map(|t| TypeRef { dtype: t.0.dtype, shape: &t.0.shape }).collect();
    let (dtype, shape) = op.infer(&types)?;
    if dtype != target.0.dtype {
        return Err(Error::dtype_mismatch(name, target.0.dtype, dtype));
    }
    if shape != target.0.shape {
        let other = inputs.last().map(|t| t.0.shape.clone()).unwrap_or_default();
        return Err(Error::shapes(
            name,
            &target.0.shape,
            &other,
            format!("an in-place result must keep the target's shape, but broadcasting gives {shape}"),
        ));
    }
    Ok(())
}
