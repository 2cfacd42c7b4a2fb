//! The one place every op goes through. Dispatch hands each op to the executor of the
//! moment behind one interface: the eager executor below (check types, run the kernel,
//! record a grad node if an input requires grad), or, while a trace is active, the tracer,
//! which appends a node and returns a symbolic tensor — and records the same grad nodes on
//! it, so backward passes trace too. Which one runs is decided here, once, from the thread's
//! context; nothing above asks "am I tracing?" to run an op, update a tensor in place or
//! touch a `.grad`.

use super::{Op, TypeRef};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::storage::Storage;
use crate::tensor::grad_mode::is_grad_enabled;
use crate::tensor::{context, Tensor, Value};
use smallvec::SmallVec;
use std::sync::RwLockReadGuard;

/// What runs ops and changes state: eagerly, or into the graph being traced.
pub(crate) trait Executor: Sync {
    /// `op(inputs)` as a new tensor.
    fn apply(&self, op: Op, inputs: &[&Tensor]) -> Result<Tensor>;
    /// `target = op(target?, others)` in place; the leaf rule is already checked.
    fn apply_in_place(&self, update: InPlace) -> Result<()>;
    /// The stand-in of `t` if it is state from outside the code being traced (made on first
    /// use), so its value is read when the graph runs; `None` when `t` is not (eagerly: never).
    fn external(&self, t: &Tensor, op: &'static str) -> Option<Tensor>;
    /// `t.grad` as this execution sees it.
    fn read_grad(&self, t: &Tensor) -> Option<Tensor>;
    /// `t.grad += g` (the first gradient becomes `.grad`).
    fn accumulate_grad(&self, t: &Tensor, g: &Tensor) -> Result<()>;
    /// `t.grad = None`.
    fn clear_grad(&self, t: &Tensor) -> Result<()>;
}

/// The executor of this moment on this thread: the tracer (registered from above, see
/// `seams.rs`) while a trace is active, else eager.
pub(crate) fn executor() -> &'static dyn Executor {
    if context::is_tracing() {
        super::seams::tracer()
    } else {
        &Eager
    }
}

/// Applies `op` to `inputs`, returning a new tensor.
pub(crate) fn apply(op: impl Into<Op>, inputs: &[&Tensor]) -> Result<Tensor> {
    executor().apply(op.into(), inputs)
}

/// Applies `op` to `(target, others...)` — or to `others` alone when `reads_target` is false
/// (assignment) — and stores the result in `target`, bumping its version. Fails, changing
/// nothing, if the result would not have `target`'s dtype and shape, or if `target` is a leaf
/// that requires grad while grad mode is on.
pub(crate) fn apply_in_place(op: Op, target: &Tensor, reads_target: bool, others: &[&Tensor], name: &'static str) -> Result<()> {
    if is_grad_enabled() && target.requires_grad_raw() && target.is_leaf_raw() {
        return Err(Error::InPlaceOnLeaf { op: name });
    }
    executor().apply_in_place(InPlace { op, target, reads_target, others, name })
}

/// Records `out = op(inputs)` for backward if the op has a gradient.
pub(crate) fn record(op: Op, inputs: &[&Tensor], out: &Tensor) {
    if op.is_differentiable() {
        crate::tensor::grad_node::record(op, inputs, out);
    }
}

/// An in-place update as the caller asked for it.
pub(crate) struct InPlace<'a> {
    pub op: Op,
    pub target: &'a Tensor,
    pub reads_target: bool,
    pub others: &'a [&'a Tensor],
    pub name: &'static str,
}

impl InPlace<'_> {
    /// PyTorch's in-place rules, for every executor, on `target` and `others` as the executor
    /// sees them: the op reads the old value through an alias when autograd needs it (also
    /// where the target is an operand too, `y.mul_(&y)`, or the node would save its own
    /// output); `store` computes the new value from the inputs, stores it and returns the
    /// handle that holds it from then on; then the history is rebased onto the new node
    /// (PyTorch's `rebase_history`) or, for an assignment from values that need no grad, cut.
    pub(crate) fn run(&self, target: &Tensor, others: &[&Tensor], store: impl FnOnce(&Op, &[&Tensor]) -> Result<Tensor>) -> Result<()> {
        let grad_on = is_grad_enabled();
        let reads = self.reads_target;
        let needs_grad =
            grad_on && self.op.is_differentiable() && (reads && target.requires_grad_raw() || others.iter().any(|t| t.requires_grad_raw()));
        let reads_old = reads || others.iter().any(|t| t.same_as(target));
        let alias = (reads_old && needs_grad).then(|| target.alias());
        let mut inputs: SmallVec<[&Tensor; 3]> = SmallVec::new();
        if reads {
            inputs.push(alias.as_ref().unwrap_or(target));
        }
        inputs.extend(others.iter().map(|&t| match &alias {
            Some(a) if t.same_as(target) => a,
            _ => t,
        }));
        check_in_place_type(&self.op, &inputs, target, self.name)?;
        let holder = store(&self.op, &inputs)?;
        if needs_grad {
            record(self.op.clone(), &inputs, &holder);
        } else if grad_on && !reads {
            holder.detach_in_place();
        }
        Ok(())
    }
}

/// The in-place result must keep the target's dtype and shape.
fn check_in_place_type(op: &Op, inputs: &[&Tensor], target: &Tensor, name: &'static str) -> Result<()> {
    let (dtype, shape) = op.infer(&types_of(inputs))?;
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

/// The inputs' dtypes and shapes, as an op's rule takes them.
pub(crate) fn types_of<'a>(inputs: &[&'a Tensor]) -> SmallVec<[TypeRef<'a>; 3]> {
    inputs.iter().map(|t| TypeRef { dtype: t.0.dtype, shape: &t.0.shape }).collect()
}

// ------------------------------------------------------------------------------------ eagerly

/// Runs ops at once on data.
struct Eager;

impl Executor for Eager {
    fn apply(&self, op: Op, inputs: &[&Tensor]) -> Result<Tensor> {
        let (dtype, shape, value) = run_anywhere(&op, inputs)?;
        let out = Tensor::from_value(value, dtype, shape);
        record(op, inputs, &out);
        Ok(out)
    }

    fn apply_in_place(&self, u: InPlace) -> Result<()> {
        u.run(u.target, u.others, |op, inputs| {
            let (_, _, value) = run_anywhere(op, inputs)?;
            u.target.set_value(value);
            Ok(u.target.clone())
        })
    }

    fn external(&self, _: &Tensor, _: &'static str) -> Option<Tensor> {
        None
    }

    fn read_grad(&self, t: &Tensor) -> Option<Tensor> {
        t.grad_slot().grad.clone()
    }

    fn accumulate_grad(&self, t: &Tensor, g: &Tensor) -> Result<()> {
        accumulate_into(t, g)?;
        // Without a hook (every run but a distributed one), one atomic load: no lock, no clone.
        if let Some(hook) = super::seams::grad_hook() {
            hook(t);
        }
        Ok(())
    }

    fn clear_grad(&self, t: &Tensor) -> Result<()> {
        t.set_grad_raw(None);
        Ok(())
    }
}

/// `t.grad += g` on the tensor's own `.grad` slot.
pub(crate) fn accumulate_into(t: &Tensor, g: &Tensor) -> Result<()> {
    let old = t.grad_slot().grad.clone();
    let new = match old {
        Some(o) => o.add(g)?,
        // A tensor of its own (PyTorch clones here), so `.grad` aliases neither the gradient
        // the caller passed nor another leaf's `.grad`. With create_graph it keeps the
        // gradient's history: the same grad_fn, or a recorded copy of a leaf.
        None if is_grad_enabled() && g.requires_grad_raw() => match g.is_leaf_raw() {
            true => g.reshape_to(&g.0.shape)?,
            false => g.alias(),
        },
        None => g.detach(),
    };
    t.set_grad_raw(Some(new));
    Ok(())
}

/// Runs `op` where its inputs live: on the CPU, or on their GPU (feature `cuda`).
fn run_anywhere(op: &Op, inputs: &[&Tensor]) -> Result<(DType, Shape, Value)> {
    // Until a tensor has been put on a GPU, no input can be on one: no need to ask.
    #[cfg(feature = "cuda")]
    if crate::tensor::any_on_device()
        && let Some(device) = super::device::placement(op.name(), inputs)?
    {
        return super::device::run(op, inputs, device);
    }
    let (dtype, shape, storage) = run_eager(op, inputs)?;
    Ok((dtype, shape, Value::Concrete(storage)))
}

/// Checks types and runs the kernel of `op` on concrete inputs: the result's dtype, shape
/// (from the shape rule, which is exact for concrete inputs) and data.
pub(crate) fn run_eager(op: &Op, inputs: &[&Tensor]) -> Result<(DType, Shape, Storage)> {
    let (dtype, shape) = op.infer(&types_of(inputs))?;
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
                Value::Device(d) => return Err(crate::tensor::on_device_error(op, d.device)),
            },
        });
    }
    Ok(f(&refs))
}
