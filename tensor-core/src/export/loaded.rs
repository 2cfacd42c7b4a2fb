//! A function loaded from an exported file: its signature, the state it captured, and its
//! graph compiled into an executable — callable without the code that traced it.

use crate::compile::Executable;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{Graph, InputSource, NodeKind, StateWrite};
use crate::shape::{Shape, UNKNOWN};
use crate::tensor::Tensor;
use smallvec::SmallVec;

/// One tensor argument of a loaded function: the name it was traced with (`self.fc1_w`,
/// `x`), its dtype and its shape (`?` dims accept any size).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2, 3], DType::F32);
/// let f = ConcreteFunction::trace("double", &[("x", &x)], || Ok(vec![x.mul(2.0)?]))?;
/// let loaded = tensor_core::export::load_bytes(&f.export_bytes()?)?;
/// let arg = &loaded.args()[0];
/// assert_eq!((arg.name.as_str(), arg.dtype, arg.shape.dims()), ("x", DType::F32, &[2, 3][..]));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ArgSpec {
    /// The name it was traced with.
    pub name: String,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape; unknown dims accept any size.
    pub shape: Shape,
}

/// A function loaded by [`load`](super::load): call it with its tensor arguments as a
/// [`ConcreteFunction`](crate::function::ConcreteFunction) is called, and it computes the
/// bits the original computed. It owns the tensors the original captured (an optimizer's
/// moments, say): they start with the exported values and are updated by the calls, while
/// in-place updates and `.grad`s of arguments land on the caller's tensors.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// let scale = Tensor::from_vec(vec![2.0f32, 3.0], &[2])?; // captured
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("scale", &[("x", &x)], || Ok(vec![x.mul(&scale)?]))?;
/// let loaded = tensor_core::export::load_bytes(&f.export_bytes()?)?;
/// let y = loaded.call(&[&Tensor::from_vec(vec![5.0f32, 7.0], &[2])?])?;
/// assert_eq!(y[0].to_vec::<f32>()?, vec![10.0, 21.0]);
/// assert_eq!(loaded.captures()[0].1.to_vec::<f32>()?, vec![2.0, 3.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct LoadedFunction {
    name: String,
    args: Vec<ArgSpec>,
    captures: Vec<(String, Tensor)>,
    guards: Vec<(usize, bool)>,
    dim_guards: Option<crate::dim::Guards>,
    executable: Executable,
}

impl std::fmt::Debug for LoadedFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let args: Vec<String> = self.args.iter().map(|a| format!("{}: {}{}", a.name, a.dtype, a.shape)).collect();
        f.debug_struct("LoadedFunction")
            .field("name", &self.name)
            .field("args", &args)
            .field("captures", &self.captures.len())
            .field("nodes", &self.graph().nodes.len())
            .finish()
    }
}

impl LoadedFunction {
    pub(super) fn new(
        name: String,
        args: Vec<ArgSpec>,
        captures: Vec<(String, Tensor)>,
        guards: Vec<(usize, bool)>,
        dim_guards: Option<crate::dim::Guards>,
        graph: &Graph,
    ) -> LoadedFunction {
        LoadedFunction { name, args, captures, guards, dim_guards, executable: Executable::new(graph, false) }
    }

    /// The guards on its symbolic dims (`n0 < 10`) that every call must pass (see
    /// `ConcreteFunction::guards`).
    pub fn guards(&self) -> Vec<String> {
        self.dim_guards.as_ref().map(|g| g.texts()).unwrap_or_default()
    }

    /// An `Err` naming the first guard the call's dims fail.
    fn check_dim_guards(&self, args: &[&Tensor]) -> Result<()> {
        let Some(g) = &self.dim_guards else { return Ok(()) };
        let dim = |slot: usize, axis: usize| args.get(slot).and_then(|t| t.0.shape.dims().get(axis).copied());
        match g.first_failing(&dim) {
            None => Ok(()),
            Some(i) => {
                let names: Vec<String> = self.args.iter().map(|a| a.name.clone()).collect();
                Err(Error::GuardFailed { function: self.name.clone(), reason: g.failure(i, &names, &dim) })
            }
        }
    }

    /// Runs the graph on `args` (the tensor arguments in the traced order, as
    /// [`args`](Self::args) lists them), applies its state writes and returns its outputs.
    /// Arguments of another count, dtype or shape are an `Err` naming the first that does
    /// not match.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[3], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?]))?;
    /// let loaded = tensor_core::export::load_bytes(&f.export_bytes()?)?;
    /// assert!(loaded.call(&[&x])?[0].bit_eq(&f.call(&[&x])?[0])?);
    /// let err = loaded.call(&[&Tensor::ones(&[4], DType::F32)]).unwrap_err();
    /// assert!(err.to_string().contains("expected f32[3], found f32[4]"), "{err}");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn call(&self, args: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.check_args(args)?;
        self.check_dim_guards(args)?;
        let mut slots: SmallVec<[&Tensor; 16]> = SmallVec::with_capacity(args.len() + self.captures.len());
        slots.extend_from_slice(args);
        slots.extend(self.captures.iter().map(|(_, t)| t));
        self.check_guards(&slots)?;
        Ok(self.executable.run(&slots)?.into_vec())
    }

    fn check_args(&self, args: &[&Tensor]) -> Result<()> {
        let mismatch = |arg: &str, expected: String, found: String| Error::SignatureMismatch {
            function: self.name.clone(),
            arg: arg.to_string(),
            expected,
            found,
        };
        if args.len() != self.args.len() {
            let names = self.args.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ");
            return Err(Error::ArgumentCount { function: self.name.clone(), expected: self.args.len(), found: args.len(), names });
        }
        for (spec, t) in self.args.iter().zip(args) {
            if spec.dtype != t.0.dtype || !spec.shape.admits(&t.0.shape) {
                return Err(mismatch(&spec.name, format!("{}{}", spec.dtype, spec.shape), format!("{}{}", t.0.dtype, t.0.shape)));
            }
        }
        Ok(())
    }

    fn check_guards(&self, slots: &[&Tensor]) -> Result<()> {
        for &(slot, present) in &self.guards {
            if slots[slot].grad_slot().grad.is_some() != present {
                let word = |p: bool| if p { "set" } else { "empty" };
                let name = self.graph().slot_names.get(slot).cloned().unwrap_or_default();
                return Err(Error::GradPresence { function: self.name.clone(), name, traced: word(present), now: word(!present) });
            }
        }
        Ok(())
    }

    /// The function's name.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[1], DType::F32);
    /// let f = ConcreteFunction::trace("named", &[("x", &x)], || Ok(vec![x.neg()?]))?;
    /// assert_eq!(tensor_core::export::load_bytes(&f.export_bytes()?)?.name(), "named");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tensor arguments a call passes, in order.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let (a, b) = (Tensor::ones(&[2], DType::F32), Tensor::ones(&[2], DType::F32));
    /// let f = ConcreteFunction::trace("f", &[("a", &a), ("b", &b)], || Ok(vec![a.add(&b)?]))?;
    /// let names: Vec<String> = tensor_core::export::load_bytes(&f.export_bytes()?)?.args().iter().map(|a| a.name.clone()).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn args(&self) -> &[ArgSpec] {
        &self.args
    }

    /// The tensors the function owns (what the original captured), with their slot names:
    /// live handles, updated by the calls.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let counter = Tensor::scalar(0i64); // captured state, incremented by each call
    /// let x = Tensor::ones(&[1], DType::F32);
    /// let f = ConcreteFunction::trace("tick", &[("x", &x)], || {
    ///     counter.add_(1)?;
    ///     Ok(vec![x.clone()])
    /// })?;
    /// let loaded = tensor_core::export::load_bytes(&f.export_bytes()?)?;
    /// loaded.call(&[&x])?;
    /// loaded.call(&[&x])?;
    /// assert_eq!(loaded.captures()[0].1.item::<i64>()?, 2);
    /// assert_eq!(counter.item::<i64>()?, 0); // the original's state is not the loaded one's
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn captures(&self) -> &[(String, Tensor)] {
        &self.captures
    }

    /// The graph that runs.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[4], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(2.0)?.tanh()?]))?;
    /// let loaded = tensor_core::export::load_bytes(&f.export_bytes()?)?;
    /// assert_eq!(loaded.graph().count_op("fused"), 1); // the fused program, rebuilt
    /// assert_eq!(loaded.to_text(), f.to_text());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn graph(&self) -> &Graph {
        self.executable.graph()
    }

    /// The text form of the graph that runs.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?]))?;
    /// assert!(tensor_core::export::load_bytes(&f.export_bytes()?)?.to_text().contains("exp(x)"));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_text(&self) -> String {
        self.graph().to_text()
    }
}

/// The dtype and shape of each slot: the arguments', then the captures'.
pub(super) type SlotTypes = Vec<(DType, Shape)>;

/// Checks that the graph reads and writes its slots as values of the slots' types, and reads
/// a `.grad` only where a guard makes sure it is present — what the executor relies on.
pub(super) fn check_slots(g: &Graph, slots: &SlotTypes, num_args: usize, guards: &[(usize, bool)]) -> std::result::Result<(), String> {
    if g.num_params != 0 || g.num_arg_slots != num_args || g.num_slots() != slots.len() {
        return Err(format!(
            "the graph has {} slots ({} arguments), the file lists {} ({num_args} arguments)",
            g.num_slots(),
            g.num_arg_slots,
            slots.len()
        ));
    }
    let mut guarded = vec![None; slots.len()];
    for &(slot, present) in guards {
        match guarded.get_mut(slot) {
            Some(g @ None) => *g = Some(present),
            _ => return Err(format!("the guard of slot {slot} names a missing or repeated slot")),
        }
    }
    // A value read from a slot must admit every tensor the slot may hold (the run does not
    // check it); one written to a slot must agree with it where both are known (the run
    // checks the rest when the graph has unknown dims).
    let check = |slot: usize, v: usize, what: &str, read: bool| {
        let ((dtype, shape), (vd, vs)) = (&slots[slot], (g.values[v].dtype, &g.values[v].shape));
        let ok = *dtype == vd && if read { vs.admits(shape) } else { compatible(shape, vs) };
        match ok {
            true => Ok(()),
            false => Err(format!("{what} of slot {slot} ({dtype}{shape}) is value {v} of type {vd}{vs}")),
        }
    };
    let fits = |slot: usize, v: usize, what: &str| check(slot, v, what, false);
    let reads = |slot: usize, v: usize, what: &str| check(slot, v, what, true);
    for &(v, src) in &g.inputs {
        match src {
            InputSource::Data(s) => reads(s, v, "the data")?,
            InputSource::Grad(s) if guarded[s] == Some(true) => reads(s, v, "the .grad")?,
            InputSource::Grad(s) => return Err(format!("the graph reads the .grad of slot {s} without a guard that it is present")),
            InputSource::Param(_) => return Err("a function's graph has no parameters".into()),
        }
    }
    for node in &g.nodes {
        if let NodeKind::AccumulateGrad { slot } = node.kind {
            fits(slot, node.inputs[0], "the gradient accumulated into the .grad")?;
            fits(slot, node.outputs[0], "the accumulated .grad")?;
        }
    }
    for w in &g.writes {
        match *w {
            StateWrite::Data { slot, value } => fits(slot, value, "the write to the data")?,
            StateWrite::Grad { slot, value: Some(value) } => fits(slot, value, "the write to the .grad")?,
            StateWrite::Grad { .. } => {}
        }
    }
    Ok(())
}

/// Same rank, and each dim equal or unknown on one side (checked again when the graph runs).
fn compatible(a: &Shape, b: &Shape) -> bool {
    a.rank() == b.rank() && a.dims().iter().zip(b.dims()).all(|(&x, &y)| x == y || x == UNKNOWN || y == UNKNOWN)
}
