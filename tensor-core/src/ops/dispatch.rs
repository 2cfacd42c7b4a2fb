//! The one place every op goes through. Eagerly: check types, run the kernel, record a grad
//! node if an input requires grad. While tracing: the trace resolves the inputs to graph
//! values, appends a node and returns a symbolic tensor — and the same autograd recording
//! runs on it, so backward passes trace too.

use super::{Op, TypeRef};
use crate::error::{Error, Result};
use crate::storage::Storage;
use crate::tensor::{Tensor, Value};
use smallvec::SmallVec;

/// Applies `op` to `inputs`, returning a new tensor.
pub(crate) fn apply(op: Op, inputs: &[&Tensor]) -> Result<Tensor> {
    if crate::trace::is_active() {
        let resolved = crate::trace::resolve_inputs(inputs, op.name())?;
        let refs: SmallVec<[&Tensor; 3]> = resolved.iter().collect();
        let out = crate::trace::append(&op, &refs)?;
        crate::autograd::record(op, &refs, &out);
        return Ok(out);
    }
    let storage = run_eager(&op, inputs)?;
    let out = Tensor::from_storage(storage);
    crate::autograd::record(op, inputs, &out);
    Ok(out)
}

/// Checks types and runs the kernel of `op` on concrete inputs.
pub(crate) fn run_eager(op: &Op, inputs: &[&Tensor]) -> Result<Storage> {
    let types: SmallVec<[TypeRef; 3]> = inputs.iter().map(|t| TypeRef { dtype: t.0.dtype, shape: &t.0.shape }).collect();
    op.infer(&types)?;
    let storages: SmallVec<[Storage; 3]> = inputs.iter().map(|t| t.storage(op.name())).collect::<Result<_>>()?;
    let refs: SmallVec<[&Storage; 3]> = storages.iter().collect();
    op.compute(&refs)
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
    let storage = run_eager(&op, &inputs)?;
    target.set_value(Value::Concrete(storage));
    if needs_grad {
        // PyTorch's rebase_history: the old value (the alias) feeds the new grad node.
        crate::autograd::record(op, &inputs, target);
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
