//! The autograd methods of `Tensor`, with PyTorch's semantics, and the functional `grad`.

use super::engine::{self, BackwardOptions, Sink};
use super::grad_fn::GradFn;
use crate::error::{Error, Result};
use crate::ops::dispatch::executor;
use crate::tensor::{context, Tensor};
use std::sync::atomic::Ordering;

impl Tensor {
    /// Marks this tensor as a leaf whose gradient `backward()` computes (float dtypes only).
    /// Returns the tensor, for chaining.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// assert!(w.requires_grad() && w.is_leaf());
    /// assert!(Tensor::scalar(1i32).requires_grad_(true).is_err());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn requires_grad_(&self, on: bool) -> Result<Tensor> {
        if on && !self.0.dtype.is_float() {
            return Err(Error::UnsupportedDType { op: "requires_grad_", dtype: self.0.dtype, needs: "a float dtype (only floats carry gradients)" });
        }
        if !on && !self.is_leaf_raw() {
            return Err(Error::invalid("requires_grad_", "on", "only a leaf can stop requiring grad; use detach() for a non-leaf"));
        }
        if on && context::is_trace_constant(self) {
            return Err(Error::ParameterInTrace);
        }
        // An argument or a capture: the traced code sees the flag through its stand-in.
        if let Some(proxy) = executor().external(self, "requires_grad_")
            && proxy.is_leaf_raw()
        {
            proxy.0.requires_grad.store(on, Ordering::Release);
        }
        self.0.requires_grad.store(on, Ordering::Release);
        Ok(self.clone())
    }

    /// True when gradients flow to this tensor: a leaf marked with `requires_grad_(true)` or
    /// a result of ops on such tensors (while grad mode was on).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// assert!(w.requires_grad());
    /// assert!(w.mul(2.0)?.requires_grad()); // computed from it
    /// assert!(!w.detach().requires_grad());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn requires_grad(&self) -> bool {
        self.stand_in().requires_grad_raw()
    }

    /// True when this tensor was not computed by a recorded op (it has no `grad_fn`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// assert!(w.is_leaf());
    /// assert!(!w.add(1.0)?.is_leaf());
    /// assert!(Tensor::scalar(3.0f32).is_leaf()); // data with no history
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_leaf(&self) -> bool {
        self.stand_in().is_leaf_raw()
    }

    /// The gradient accumulated by `backward()`: kept for leaves, and for non-leaves that
    /// called `retain_grad()`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::scalar(3.0f64).requires_grad_(true)?;
    /// assert!(x.grad().is_none());
    /// x.mul(&x)?.backward()?;
    /// assert_eq!(x.grad().unwrap().item::<f64>()?, 6.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn grad(&self) -> Option<Tensor> {
        executor().read_grad(self)
    }

    /// Asks a non-leaf to keep its gradient after `backward()` (a no-op on leaves).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let a = &w * 3.0;
    /// a.retain_grad()?;
    /// (&a * 2.0).backward()?;
    /// assert_eq!(a.grad().unwrap().item::<f32>()?, 2.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn retain_grad(&self) -> Result<()> {
        let t = self.stand_in();
        if !t.requires_grad_raw() {
            return Err(Error::invalid("retain_grad", "self", "the tensor does not require grad"));
        }
        if !t.is_leaf_raw() {
            t.grad_slot().retains_grad = true;
        }
        Ok(())
    }

    /// The backward function of the op that computed this tensor (`None` for leaves).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::scalar(3.0f32).requires_grad_(true)?;
    /// assert!(x.grad_fn().is_none());
    /// assert_eq!(x.exp()?.grad_fn().unwrap().name(), "ExpBackward");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn grad_fn(&self) -> Option<GradFn> {
        let t = self.stand_in();
        t.grad_fn_raw().map(GradFn)
    }

    /// Computes the gradient of this scalar with respect to every leaf that requires grad,
    /// adding it to their `.grad`. The saved tensors are freed afterwards.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
    /// let y = (&w + &x) * (&w + 1.0);
    /// y.backward()?;
    /// assert_eq!(w.grad().unwrap().item::<f32>()?, 5.0);
    /// assert_eq!(x.grad().unwrap().item::<f32>()?, 2.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn backward(&self) -> Result<()> {
        self.backward_opts(None, BackwardOptions::default())
    }

    /// Like `backward`, from an explicit gradient of this tensor's shape (any shape).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
    /// let y = x.mul(3.0)?;
    /// assert!(y.backward().is_err()); // not a scalar: needs a gradient
    /// y.backward_from(&Tensor::from_vec(vec![1.0f32, 10.0], &[2])?)?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![3.0, 30.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn backward_from(&self, gradient: &Tensor) -> Result<()> {
        self.backward_opts(Some(gradient), BackwardOptions::default())
    }

    /// `backward` with options: `retain_graph` to walk the graph again, `create_graph` to
    /// record the backward pass for higher-order gradients.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let x = Tensor::scalar(2.0f64).requires_grad_(true)?;
    /// let y = x.powf(3.0)?;
    /// let dy = tensor_core::grad(&[&y], &[&x], true)?.remove(0); // 3x^2 = 12, recorded
    /// dy.backward()?;                                            // d2y/dx2 = 6x = 12
    /// assert_eq!(x.grad().unwrap().item::<f64>()?, 12.0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn backward_opts(&self, gradient: Option<&Tensor>, opts: BackwardOptions) -> Result<()> {
        let root = self.stand_in();
        let g = root_gradient(&root, gradient)?;
        engine::run(&[(root, g)], opts, &mut Sink::LeafGrads)
    }

    /// A new tensor with the same values that is cut from the backward graph.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let d = (&w * 2.0).detach();
    /// assert!(!d.requires_grad() && d.is_leaf());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn detach(&self) -> Tensor {
        let t = executor().external(self, "detach").unwrap_or_else(|| self.clone());
        let value = match t.read_value().clone() {
            // A new tensor shares the value, not the slot: its `.grad` and in-place updates
            // are its own, as eagerly.
            crate::tensor::Value::Symbolic(mut sym) => {
                sym.slot = None;
                crate::tensor::Value::Symbolic(sym)
            }
            concrete => concrete,
        };
        Tensor::from_value(value, t.0.dtype, t.0.shape.clone())
    }

    /// Cuts this tensor from the backward graph in place, as PyTorch's `detach_()`: it
    /// becomes a leaf that does not require grad (every handle to it sees that). Inside a
    /// traced function, a tensor from outside it (an argument or a capture) is an `Err`: the
    /// graph could not replay the cut on the caller's tensor; use `detach()` there.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let y = &w * 2.0;
    /// y.detach_()?;
    /// assert!(!y.requires_grad() && y.is_leaf());
    /// w.detach_()?;
    /// assert!(!w.requires_grad());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn detach_(&self) -> Result<()> {
        if executor().external(self, "detach_").is_some() {
            return Err(Error::invalid(
                "detach_",
                "self",
                "the tensor comes from outside the traced function, where a graph cannot cut its history; use `let x = x.detach();` instead",
            ));
        }
        self.grad_slot().grad_fn = None;
        self.0.requires_grad.store(false, Ordering::Release);
        Ok(())
    }

    /// Clears the accumulated gradient (sets it to `None`, as PyTorch's default).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
    /// x.mul(5.0)?.backward()?;
    /// x.mul(5.0)?.backward()?;
    /// assert_eq!(x.grad().unwrap().item::<f32>()?, 10.0); // accumulated
    /// x.zero_grad()?;
    /// assert!(x.grad().is_none());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn zero_grad(&self) -> Result<()> {
        executor().clear_grad(self)
    }

    // ------------------------------------------------------------------ crate internals

    /// Adds `g` into `.grad` (as the engine delivers a leaf's gradient).
    pub(crate) fn accumulate_grad(&self, g: &Tensor) -> Result<()> {
        executor().accumulate_grad(self, g)
    }
}

/// The gradient backward starts from: ones for a one-element tensor, else the caller's.
fn root_gradient(root: &Tensor, gradient: Option<&Tensor>) -> Result<Tensor> {
    if !root.requires_grad_raw() {
        return Err(Error::NoGradFn { op: "backward" });
    }
    let shape = root.0.shape.clone();
    match gradient {
        Some(g) => {
            if g.0.shape != shape || g.0.dtype != root.0.dtype {
                return Err(Error::GradientShape { expected: shape, found: g.0.shape.clone(), expected_dtype: root.0.dtype, found_dtype: g.0.dtype });
            }
            Ok(g.clone())
        }
        // On the root's device: the seed of a GPU backward is GPU data.
        None if shape.is_known() && shape.numel() == 1 => Tensor::ones(shape.dims(), root.0.dtype).to_device(root.device()),
        None => Err(Error::BackwardNonScalar { shape }),
    }
}

/// Backward from several roots in one pass, each with its own seed gradient, as PyTorch's
/// `torch.autograd.backward(tensors, grad_tensors)`: the leaves' `.grad` receive the
/// gradient of `sum(tensors[i] * grad_tensors[i])`. A `None` seed (or an empty
/// `grad_tensors`) means ones, for a one-element root. Roots may depend on each other: a
/// root's gradient is its seed plus what flows into it from the roots computed from it.
///
/// ```
/// # use tensor_core::prelude::*;
/// use tensor_core::autograd::{backward, BackwardOptions};
/// let x = Tensor::scalar(3.0f64).requires_grad_(true)?;
/// let y1 = &x * &x;   // dy1/dx = 6
/// let y2 = &y1 * 2.0; // depends on y1: dy2/dx = 12
/// backward(&[&y1, &y2], &[Some(&Tensor::scalar(1.0f64)), Some(&Tensor::scalar(10.0f64))], BackwardOptions::default())?;
/// assert_eq!(x.grad().unwrap().item::<f64>()?, 6.0 + 120.0);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn backward(tensors: &[&Tensor], grad_tensors: &[Option<&Tensor>], opts: BackwardOptions) -> Result<()> {
    if !grad_tensors.is_empty() && grad_tensors.len() != tensors.len() {
        let reason =
            format!("{} seed gradients for {} roots; pass one per root (None for a one-element root), or none", grad_tensors.len(), tensors.len());
        return Err(Error::invalid("backward", "grad_tensors", reason));
    }
    if tensors.is_empty() {
        return Err(Error::invalid("backward", "tensors", "no roots; pass at least one tensor to differentiate"));
    }
    let roots: Vec<(Tensor, Tensor)> = tensors
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let r = t.stand_in();
            root_gradient(&r, grad_tensors.get(i).copied().flatten()).map(|g| (r, g))
        })
        .collect::<Result<_>>()?;
    engine::run(&roots, opts, &mut Sink::LeafGrads)
}

/// The gradients of the sum of `outputs` (each a one-element tensor) with respect to
/// `inputs`, without touching any `.grad`. With `create_graph` the results are themselves
/// differentiable.
///
/// ```
/// # use tensor_core::prelude::*;
/// let x = Tensor::scalar(3.0f32).requires_grad_(true)?;
/// let y = &x * &x;
/// let g = tensor_core::grad(&[&y], &[&x], false)?;
/// assert_eq!(g[0].item::<f32>()?, 6.0);
/// assert!(x.grad().is_none());
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn grad(outputs: &[&Tensor], inputs: &[&Tensor], create_graph: bool) -> Result<Vec<Tensor>> {
    let roots: Vec<(Tensor, Tensor)> = outputs
        .iter()
        .map(|o| {
            let r = o.stand_in();
            root_gradient(&r, None).map(|g| (r, g))
        })
        .collect::<Result<_>>()?;
    let resolved: Vec<Tensor> = inputs.iter().map(|t| t.stand_in()).collect();
    let targets: Vec<&Tensor> = resolved.iter().collect();
    let mut sink = Sink::targets(&targets);
    engine::run(&roots, BackwardOptions { retain_graph: None, create_graph }, &mut sink)?;
    let Sink::Targets { results, .. } = sink else { unreachable!("sink kind is fixed above") };
    results.into_iter().enumerate().map(|(index, g)| g.ok_or(Error::UnusedInput { index })).collect()
}

/// The vector-Jacobian product: the gradients of `sum(outputs[i] * grad_outputs[i])` with
/// respect to `inputs`, without touching any `.grad`; `None` for an input no output depends
/// on. Outputs that do not require grad are skipped.
///
/// ```
/// # use tensor_core::prelude::*;
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2])?.requires_grad_(true)?;
/// let y = &x * &x;
/// let g = tensor_core::autograd::vjp(&[&y], &[&Tensor::from_vec(vec![1.0, 10.0], &[2])?], &[&x], false)?;
/// assert_eq!(g[0].as_ref().unwrap().to_vec::<f64>()?, vec![2.0, 40.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn vjp(outputs: &[&Tensor], grad_outputs: &[&Tensor], inputs: &[&Tensor], create_graph: bool) -> Result<Vec<Option<Tensor>>> {
    let resolved: Vec<Tensor> = inputs.iter().map(|t| t.stand_in()).collect();
    let targets: Vec<&Tensor> = resolved.iter().collect();
    let mut sink = Sink::targets(&targets);
    run_vjp(outputs, grad_outputs, create_graph, &mut sink)?;
    let Sink::Targets { results, .. } = sink else { unreachable!("sink kind is fixed above") };
    Ok(results)
}

/// Runs the backward of `sum(outputs[i] * grad_outputs[i])` into `sink`, keeping the graph;
/// outputs that do not require grad are skipped.
fn run_vjp(outputs: &[&Tensor], grad_outputs: &[&Tensor], create_graph: bool, sink: &mut Sink) -> Result<()> {
    let mut roots = Vec::new();
    for (o, g) in outputs.iter().zip(grad_outputs) {
        let r = o.stand_in();
        if r.requires_grad_raw() {
            roots.push((r.clone(), root_gradient(&r, Some(g))?));
        }
    }
    if roots.is_empty() {
        return Ok(());
    }
    engine::run(&roots, BackwardOptions { retain_graph: Some(true), create_graph }, sink)
}

/// The vector-Jacobian product as the contributions reaching `inputs` (leaves), each on its own,
/// unsummed, in the order the engine delivers them: (index into `inputs`, gradient). A
/// backward built from it (a graph call's, a `cond`'s) hands each contribution to an edge of
/// its node, so the engine adds them where an eager walk over the same ops would.
pub(crate) fn vjp_each(outputs: &[&Tensor], grad_outputs: &[&Tensor], inputs: &[&Tensor], create_graph: bool) -> Result<Vec<(usize, Tensor)>> {
    let resolved: Vec<Tensor> = inputs.iter().map(|t| t.stand_in()).collect();
    let targets: Vec<&Tensor> = resolved.iter().collect();
    let mut sink = Sink::Each { targets: &targets, deliveries: Vec::new() };
    run_vjp(outputs, grad_outputs, create_graph, &mut sink)?;
    let Sink::Each { deliveries, .. } = sink else { unreachable!("sink kind is fixed above") };
    Ok(deliveries)
}
