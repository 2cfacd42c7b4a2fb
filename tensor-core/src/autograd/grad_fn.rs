//! `grad_fn` handles: a tensor's backward node and where its inputs' gradients go, for
//! inspecting the recorded graph as PyTorch's `grad_fn.next_functions` does.

use crate::tensor::grad_node::{Edge, GradNode};
use crate::tensor::Tensor;
use std::fmt;
use std::sync::Arc;

/// A handle to a tensor's backward function, as PyTorch's `grad_fn`.
///
/// ```
/// # use tensor_core::prelude::*;
/// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
/// let y = (&w * 2.0).exp()?;
/// let f = y.grad_fn().unwrap();
/// assert_eq!(f.name(), "ExpBackward");
/// assert_eq!(f.next_functions()[0].name(), "MulBackward");
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone)]
pub struct GradFn(pub(crate) Arc<GradNode>);

/// Where a grad_fn sends one input's gradient (PyTorch's `next_functions` entries).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::autograd::NextFunction;
/// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
/// let y = w.mul(2.0)?.add(1.0)?;
/// let next = y.grad_fn().unwrap().next_functions();
/// assert!(matches!(&next[0], NextFunction::Node(f) if f.name() == "MulBackward"));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone)]
pub enum NextFunction {
    /// Another op's backward.
    Node(GradFn),
    /// A leaf's `.grad` (PyTorch's `AccumulateGrad`), with the leaf.
    AccumulateGrad(Tensor),
    /// No gradient flows to this input.
    None,
}

impl GradFn {
    /// The PyTorch-style name (`AddBackward`, `MulBackward`, ...).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// assert_eq!(w.add(&w)?.grad_fn().unwrap().name(), "AddBackward");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// Where the gradients of the op's inputs go, one entry per input.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::autograd::NextFunction;
    /// let (w, x) = (Tensor::scalar(1.0f32).requires_grad_(true)?, Tensor::scalar(2.0f32));
    /// let y = w.mul(&x)?;
    /// let next = y.grad_fn().unwrap().next_functions();
    /// assert!(matches!(&next[0], NextFunction::AccumulateGrad(leaf) if leaf.same_as(&w)));
    /// assert!(matches!(next[1], NextFunction::None)); // x does not require grad
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn next_functions(&self) -> Vec<NextFunction> {
        self.0
            .edges
            .iter()
            .map(|e| match e {
                Edge::None => NextFunction::None,
                Edge::Leaf(t) => NextFunction::AccumulateGrad(t.clone()),
                Edge::Node(n, _) => NextFunction::Node(GradFn(n.clone())),
            })
            .collect()
    }

    /// True when both handles are the same node.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let y = x.exp()?;
    /// assert!(y.grad_fn().unwrap().same_as(&y.grad_fn().unwrap()));
    /// assert!(!y.grad_fn().unwrap().same_as(&x.exp()?.grad_fn().unwrap()));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn same_as(&self, other: &GradFn) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl NextFunction {
    /// `MulBackward`, `AccumulateGrad`, or `None`.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let w = Tensor::scalar(1.0f32).requires_grad_(true)?;
    /// let names: Vec<&str> = w.mul(&w.exp()?)?.grad_fn().unwrap().next_functions().iter().map(|n| n.name()).collect();
    /// assert_eq!(names, ["AccumulateGrad", "ExpBackward"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            NextFunction::Node(f) => f.name(),
            NextFunction::AccumulateGrad(_) => "AccumulateGrad",
            NextFunction::None => "None",
        }
    }
}

impl fmt::Display for GradFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.name())
    }
}

impl fmt::Debug for GradFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for NextFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.name())
    }
}

impl fmt::Debug for NextFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
