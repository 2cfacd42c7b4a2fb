//! Runs a plan on concrete slots with the same kernels eager dispatch uses. A call does no
//! graph analysis: it walks the precomputed steps, frees each value at its last use, lets
//! fused steps write into dying buffers, and applies the state writes after the run.
//!
//! A graph traced with unknown dims was shape-checked only where dims were known, so its plan
//! asks for checks: each step runs its op's shape rule (`Op::infer`, as eager dispatch does)
//! on the concrete shapes before the kernel, and the state writes are checked before any is
//! applied. A bad call is then the `Err` eager gives, and changes no state.

use super::cpu_profile;
use super::lower::{lower, CpuStep};
use super::memory_plan::Plan;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{FusedProgram, Graph, InputSource, Node, NodeKind, Operand, StateWrite, ValueId};
use crate::kernels::fused::{CompiledProgram, Input};
use crate::kernels::parallel::on_one_thread;
use crate::ops::{BinaryOp, ElementwiseOp, LayoutOp, Op, TypeRef};
use crate::shape::Shape;
use crate::storage::Storage;
use crate::tensor::{Tensor, Value};
use smallvec::SmallVec;
use std::sync::Mutex;

/// How many outputs a call returns without allocating a list for them.
const INLINE_OUTPUTS: usize = 4;

/// A call's output tensors: inline up to four, so a cache hit allocates only the tensors.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::{Executable, Outputs};
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?, x.neg()?]))?;
/// let outputs: Outputs = Executable::new(f.traced_graph(), true).run(&[&x])?;
/// assert!(!outputs.spilled()); // two tensors, held inline
/// assert_eq!(outputs[1].to_vec::<f32>()?, vec![-1.0, -1.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub type Outputs = SmallVec<[Tensor; INLINE_OUTPUTS]>;

/// A graph prepared to run: optimized (unless asked not to) and planned.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::compile::Executable;
/// use tensor_core::function::ConcreteFunction;
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(3.0)?]))?;
/// let exe = Executable::new(f.traced_graph(), true);
/// assert_eq!(exe.run(&[&Tensor::ones(&[2], DType::F32)])?[0].to_vec::<f32>()?, vec![3.0, 3.0]);
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub struct Executable {
    graph: Graph,
    plan: Plan,
    /// What the CPU runs for each step: compiled programs, planned subgraphs (see `lower`).
    cpu_steps: Vec<CpuStep>,
    /// Value tables of finished runs, reused so a call does not allocate one.
    tables: Mutex<Vec<Vec<Option<Storage>>>>,
    /// Calls on a GPU, and their CUDA graph once captured.
    #[cfg(feature = "cuda")]
    gpu_calls: super::gpu::GpuCalls,
}

impl Executable {
    /// Prepares `graph`, optimizing it unless `optimize` is false: plans it and lowers each
    /// step for the CPU (compiling fused programs, planning subgraphs).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::compile::Executable;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(1.0)?.exp()?]))?;
    /// assert_eq!(Executable::new(f.traced_graph(), false).graph().nodes.len(), 2); // as traced
    /// assert_eq!(Executable::new(f.traced_graph(), true).graph().nodes.len(), 1); // `* 1` simplified away
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new(graph: &Graph, optimize: bool) -> Executable {
        let graph = if optimize { super::optimize(graph, None) } else { graph.clone() };
        let plan = Plan::new(&graph);
        let cpu_steps = plan.steps.iter().map(|s| lower(s, optimize)).collect();
        Executable {
            graph,
            plan,
            cpu_steps,
            tables: Mutex::new(Vec::new()),
            #[cfg(feature = "cuda")]
            gpu_calls: Default::default(),
        }
    }

    /// The graph that runs.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::compile::Executable;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?.neg()?]))?;
    /// assert_eq!(Executable::new(f.traced_graph(), true).graph().count_op("fused"), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Runs on `slots` (argument leaves, then captures), applies the writes, returns outputs.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::compile::Executable;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// let f = ConcreteFunction::trace("f", &[("x", &x)], || {
    ///     x.mul_(2.0)?; // an in-place update, written back by the run
    ///     Ok(vec![])
    /// })?;
    /// let exe = Executable::new(f.traced_graph(), true);
    /// let y = Tensor::ones(&[2], DType::F32);
    /// exe.run(&[&y])?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![2.0, 2.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn run(&self, slots: &[&Tensor]) -> Result<Outputs> {
        // The second executor: a call on GPU tensors runs the same plan there, generating
        // CUDA from the steps' program descriptions (the CPU steps are not used).
        #[cfg(feature = "cuda")]
        if let Some(device) = super::gpu::device_of(&self.graph, slots)? {
            return super::gpu::run(&self.graph, &self.plan, slots, device, &self.gpu_calls);
        }
        let run = || self.with_table(|values| self.run_steps(slots, &[], values, Tensor::from_storage));
        if self.plan.on_worker {
            crate::kernels::parallel::on_worker(run)
        } else {
            run()
        }
    }

    /// Runs a subgraph on its parameters (a cond branch, a loop's condition or body).
    pub(crate) fn run_params(&self, params: &[Storage]) -> Result<Vec<Storage>> {
        self.with_table(|values| self.run_steps(&[], params, values, |s| s))
    }

    /// Runs `f` with a value table sized for this graph, taken from the pool and returned.
    fn with_table<R>(&self, f: impl FnOnce(&mut [Option<Storage>]) -> R) -> R {
        let mut values = self.tables.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default();
        values.resize(self.graph.values.len(), None);
        let result = f(&mut values);
        values.iter_mut().for_each(|v| *v = None);
        self.tables.lock().unwrap_or_else(|e| e.into_inner()).push(values);
        result
    }

    /// Runs the steps and the writes; the outputs are collected as `out` makes them (straight
    /// into the caller's list, which for a call is inline: no list is allocated or moved).
    fn run_steps<T, O: FromIterator<T>>(
        &self,
        slots: &[&Tensor],
        params: &[Storage],
        values: &mut [Option<Storage>],
        out: impl Fn(Storage) -> T,
    ) -> Result<O> {
        let g = &self.graph;
        for (v, src) in &g.inputs {
            values[*v] = Some(read_input(slots, params, *src)?);
        }
        for (v, s) in &g.constants {
            values[*v] = Some(s.clone());
        }
        let checks = self.plan.checks_shapes;
        let mut paired: Option<SmallVec<[Storage; 1]>> = None;
        for (i, (step, cpu)) in self.plan.steps.iter().zip(&self.cpu_steps).enumerate() {
            let node = &step.node;
            if step.with_next {
                // Two independent products side by side, one thread each (see `Plan`).
                let (next, next_cpu) = (&self.plan.steps[i + 1].node, &self.cpu_steps[i + 1]);
                let run = |node: &Node, cpu| {
                    let inputs = inputs_of(node, values);
                    let timing = cpu_profile::start(node, &inputs);
                    let out = on_one_thread(|| run_node(node, cpu, &inputs, slots, checks));
                    cpu_profile::finish(timing);
                    out
                };
                let (a, b) = rayon::join(|| run(node, cpu), || run(next, next_cpu));
                paired = Some(b?);
                for (&v, s) in node.outputs.iter().zip(a?) {
                    values[v] = Some(s);
                }
                continue; // the frees of both follow the second
            }
            let timing = if paired.is_some() { None } else { cpu_profile::start(node, &inputs_of(node, values)) };
            let outs = match cpu {
                _ if paired.is_some() => paired.take().expect("checked"),
                CpuStep::Fused(p) if checks && !fits_program(p.program(), node, values) => run_unfused(p.program(), &inputs_of(node, values))?,
                CpuStep::Fused(p) => run_fused(p, node, &step.donate, values),
                cpu => run_node(node, cpu, &inputs_of(node, values), slots, checks)?,
            };
            cpu_profile::finish(timing);
            for (&v, s) in node.outputs.iter().zip(outs) {
                values[v] = Some(s);
            }
            let first_of_pair = i.checked_sub(1).map(|p| &self.plan.steps[p]).filter(|p| p.with_next);
            for &v in step.frees.iter().chain(first_of_pair.iter().flat_map(|p| &p.frees)) {
                values[v] = None;
            }
        }
        let outputs = g.outputs.iter().map(|&v| out(values[v].clone().expect("outputs are kept"))).collect();
        if checks {
            // All before any is applied: a failed call leaves every tensor and `.grad` as it was.
            g.writes.iter().try_for_each(|w| check_write(g, w, values, slots))?;
        }
        for w in &g.writes {
            apply_write(w, values, slots);
        }
        Ok(outputs)
    }
}

/// The storages a node reads, from the value table.
fn inputs_of<'a>(node: &Node, values: &'a [Option<Storage>]) -> SmallVec<[&'a Storage; 4]> {
    node.inputs.iter().map(|&v| values[v].as_ref().expect("defined before use")).collect()
}

fn read_input(slots: &[&Tensor], params: &[Storage], src: InputSource) -> Result<Storage> {
    match src {
        InputSource::Data(s) => slots[s].storage("graph input"),
        InputSource::Grad(s) => slots[s].grad_slot().grad.clone().expect("presence checked by the call's guards").storage("graph input"),
        InputSource::Param(k) => Ok(params[k].clone()),
    }
}

/// Runs a fused step's program, handing it the inputs that die here (see `Plan`'s `donate`).
fn run_fused(p: &CompiledProgram, node: &Node, donate: &[bool], values: &mut [Option<Storage>]) -> SmallVec<[Storage; 1]> {
    let mut taken: SmallVec<[Option<Storage>; 4]> =
        node.inputs.iter().zip(donate).map(|(&v, &give)| if give { values[v].take() } else { None }).collect();
    let inputs = node.inputs.iter().zip(taken.iter_mut()).map(|(&v, t)| match t.take() {
        Some(s) => Input::Dying(s),
        None => Input::Shared(values[v].as_ref().expect("defined before use")),
    });
    p.run(inputs)
}

/// Runs a step that is not a fused program; with `checks`, an op's shape rule first.
fn run_node(node: &Node, cpu: &CpuStep, inputs: &[&Storage], slots: &[&Tensor], checks: bool) -> Result<SmallVec<[Storage; 1]>> {
    let one = |s: Storage| smallvec::smallvec![s];
    match (&node.kind, cpu) {
        (_, CpuStep::Control(control)) => control.run(inputs),
        (NodeKind::Epilogue(e), CpuStep::Epilogue(program)) => super::epilogue::run(e, program, inputs),
        (NodeKind::Op(Op::SymShape(s)), _) => {
            // Sizes computed from this call's argument dims, then the op eager runs.
            let op = Op::SymShape(s.at(&|slot, axis| slot_dim(slots, slot, axis))?);
            infer(&op, inputs)?;
            Ok(one(op.compute(inputs)?))
        }
        (NodeKind::Op(op), _) => {
            if checks {
                infer(op, inputs)?;
            }
            Ok(one(op.compute(inputs)?))
        }
        (NodeKind::Print(pieces), _) => {
            let tensors: Vec<Tensor> = inputs.iter().map(|s| Tensor::from_storage((*s).clone())).collect();
            println!("{}", crate::graph::render(pieces, &tensors));
            Ok(SmallVec::new())
        }
        (NodeKind::AccumulateGrad { slot }, _) => {
            let old = slots[*slot].grad_slot().grad.clone();
            match old {
                // The same kernel eager accumulation uses: `old + g`.
                Some(o) => {
                    let add: Op = ElementwiseOp::Binary(BinaryOp::Add).into();
                    let old = o.storage("accumulate_grad")?;
                    if checks {
                        infer(&add, &[&old, inputs[0]])?;
                    }
                    Ok(one(add.compute(&[&old, inputs[0]])?))
                }
                None => Ok(one(inputs[0].clone())),
            }
        }
        (NodeKind::Fused(_), _) => unreachable!("run by the caller"),
        (NodeKind::Epilogue(_) | NodeKind::Cond { .. } | NodeKind::While { .. }, _) => unreachable!("lowered with their programs and plans"),
    }
}

/// Dim `axis` of slot `slot` for this call (what a symbolic size is computed from).
pub(crate) fn slot_dim(slots: &[&Tensor], slot: usize, axis: usize) -> Option<usize> {
    slots.get(slot).and_then(|t| t.0.shape.dims().get(axis).copied())
}

fn apply_write(w: &StateWrite, values: &[Option<Storage>], slots: &[&Tensor]) {
    let get = |v: usize| values[v].clone().expect("written values are kept");
    match w {
        StateWrite::Data { slot, value } => slots[*slot].set_value(Value::Concrete(get(*value))),
        StateWrite::Grad { slot, value } => slots[*slot].set_grad_raw(value.map(|v| Tensor::from_storage(get(v)))),
    }
}

/// The op's shape and dtype rule on concrete inputs: the `Err` eager dispatch would give.
fn infer(op: &Op, inputs: &[&Storage]) -> Result<(DType, Shape)> {
    let shapes: SmallVec<[Shape; 4]> = inputs.iter().map(|s| s.shape()).collect();
    let types: SmallVec<[TypeRef; 4]> = inputs.iter().zip(&shapes).map(|(s, shape)| TypeRef { dtype: s.dtype(), shape }).collect();
    op.infer(&types)
}

/// True when a fused step's inputs have the types its program was compiled for (its loops
/// read an input of one element as one value, and write every result over `p.shape`).
fn fits_program(p: &FusedProgram, node: &Node, values: &[Option<Storage>]) -> bool {
    node.inputs.iter().zip(&p.inputs).all(|(&v, (dtype, shape))| {
        let s = values[v].as_ref().expect("defined before use");
        s.dtype() == *dtype && s.shape() == *shape
    })
}

/// A fused program's ops one at a time, each checked by its shape rule, on inputs of other
/// shapes than it was compiled for: the errors eager gives, or the values it computes (the
/// fused loops call the same scalar functions, so the bits are those of the fused run).
fn run_unfused(p: &FusedProgram, inputs: &[&Storage]) -> Result<SmallVec<[Storage; 1]>> {
    let mut results: Vec<Storage> = Vec::with_capacity(p.instrs.len());
    for instr in &p.instrs {
        let out = {
            let args: SmallVec<[&Storage; 3]> = instr
                .args
                .iter()
                .map(|a| match *a {
                    Operand::Input(i) => inputs[i],
                    Operand::ResultOf(r) => &results[r],
                })
                .collect();
            let op = Op::Elementwise(instr.op.clone());
            infer(&op, &args)?;
            op.compute(&args)?
        };
        results.push(out);
    }
    Ok(p.outputs.iter().map(|&k| results[k].clone()).collect())
}

/// A state write of a value whose shape is not the tensor's — an in-place update whose
/// operands broadcast past the target, or a gradient of another shape — is the error eager
/// gives for that update (eager never lets a tensor's shape change).
fn check_write(g: &Graph, w: &StateWrite, values: &[Option<Storage>], slots: &[&Tensor]) -> Result<()> {
    let (slot, value) = match *w {
        StateWrite::Data { slot, value } | StateWrite::Grad { slot, value: Some(value) } => (slot, value),
        StateWrite::Grad { value: None, .. } => return Ok(()),
    };
    let target = &slots[slot].0.shape;
    let found = values[value].as_ref().expect("written values are kept").shape();
    if found == *target {
        return Ok(());
    }
    Err(match w {
        StateWrite::Data { .. } => in_place_error(producer(g, value), target, &found),
        StateWrite::Grad { .. } => Error::shapes(
            "backward",
            target,
            &found,
            format!(
                "the gradient the graph computed for `{}` has shape {found}, not the tensor's; its shape depends on a dim the trace left \
                 unknown (call with a known shape, without input_signature or reduce_retracing for this argument)",
                g.slot_names[slot]
            ),
        ),
    })
}

/// The op whose node produces `v`, if an op node does (searched on the error path only).
fn producer(g: &Graph, v: ValueId) -> Option<&Op> {
    g.nodes.iter().find(|n| n.outputs.contains(&v)).and_then(|n| match &n.kind {
        NodeKind::Op(op) => Some(op),
        _ => None,
    })
}

/// The error eager in-place dispatch gives when the result would not keep the target's shape.
fn in_place_error(op: Option<&Op>, target: &Shape, found: &Shape) -> Error {
    let keep = || format!("an in-place result must keep the target's shape, but broadcasting gives {found}");
    match op {
        Some(Op::Layout(LayoutOp::BroadcastTo(_))) => {
            Error::shapes("assign_", target, found, format!("the source {found} must broadcast to the target's shape {target}"))
        }
        Some(Op::Elementwise(ElementwiseOp::Binary(b) | ElementwiseOp::BinaryScalar { op: b, .. })) => {
            Error::shapes(in_place_name(*b), target, found, keep())
        }
        _ => Error::shapes("in-place update", target, found, keep()),
    }
}

/// The method name of an in-place binary op (`add_`), as eager errors name it.
fn in_place_name(b: BinaryOp) -> &'static str {
    match b {
        BinaryOp::Add => "add_",
        BinaryOp::Sub => "sub_",
        BinaryOp::Mul => "mul_",
        BinaryOp::Div => "div_",
        other => other.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::tests::traced;
    use crate::compile::{Fuse, Pass};

    /// `body`'s graph with fusion applied and `x`'s dims then made unknown — a fused node over
    /// an input of unknown shape, which the fusion pass itself does not make.
    fn fused_with_unknown_input(x: &Tensor, b: &Tensor, body: impl FnOnce() -> Result<Vec<Tensor>>) -> Executable {
        let mut g = traced(&[x, b], body);
        assert!(Fuse.run(&mut g));
        assert_eq!(g.count_op("fused"), 1, "{}", g.to_text());
        let input = g.inputs[0].0;
        g.values[input].shape = Shape::new(&[crate::shape::UNKNOWN]);
        Executable::new(&g, false)
    }

    #[test]
    fn only_graphs_with_unknown_dims_check_shapes() {
        let x = Tensor::zeros(&[3], DType::F32);
        let g = traced(&[&x], || Ok(vec![x.exp()?]));
        assert!(!Executable::new(&g, true).plan.checks_shapes);
        let mut relaxed = g.clone();
        relaxed.values.iter_mut().for_each(|v| v.shape = Shape::new(&[crate::shape::UNKNOWN]));
        assert!(Executable::new(&relaxed, true).plan.checks_shapes);
    }

    #[test]
    fn a_fused_step_on_other_shapes_runs_its_ops_one_by_one() -> Result<()> {
        let (x, b) = (Tensor::randn(&[3], DType::F32, 1), Tensor::randn(&[3], DType::F32, 2));
        let exe = fused_with_unknown_input(&x, &b, || Ok(vec![x.add(&b)?.mul(2.0)?.tanh()?]));
        let eager = |x: &Tensor| x.add(&b)?.mul(2.0)?.tanh();
        for x in [x.clone(), Tensor::randn(&[1], DType::F32, 3)] {
            let out = exe.run(&[&x, &b])?;
            assert!(out[0].to_storage()?.bit_eq(&eager(&x)?.to_storage()?), "eager's bits for {}", x.raw_shape());
        }
        let bad = Tensor::randn(&[2], DType::F32, 4);
        assert_eq!(exe.run(&[&bad, &b]).unwrap_err(), bad.add(&b).unwrap_err(), "eager's error, naming add and both shapes");
        Ok(())
    }
}
