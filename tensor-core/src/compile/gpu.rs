//! Runs a plan on a GPU (feature `cuda`): the same steps as the CPU executor, with each
//! value a device buffer. Fused programs become one generated CUDA kernel each, products go
//! to cuBLAS (an epilogue's program then runs as one kernel on the product), every other op
//! runs as it runs eagerly on the GPU, and the state writes land on the caller's tensors as
//! device data. The graph is the one the CPU runs: only the kernels differ.
//!
//! **CUDA graphs.** A graph of kernels and products only (three or more), with every shape
//! known, is run
//! plainly on its first call (kernels compile, cuBLAS warms up), captured as one CUDA graph
//! on its second, and replayed from then on: a call copies its inputs into the capture's own
//! buffers, launches the graph once, and copies out what it returns and writes (the graph's
//! memory is its own, made again by each launch at the same addresses). A capture that
//! fails leaves the plain run in place. `TENSOR_CORE_CUDA_GRAPHS=0` turns capture off.
//!
//! A capture records the call's independent branches on separate streams (`lanes.rs` says
//! which), so the graph runs them side by side; values made or read on more than one lane
//! are then freed at the end of the graph instead of at their last use. Before that,
//! independent fused steps with one generated kernel become one batched launch
//! (`batching.rs`; `TENSOR_CORE_CUDA_BATCH=0` turns it off), which lanes see as one step.
//!
//! A call in the other fast-math mode than the calls before it (`cuda/fast_math.rs`: the
//! device checks switch it) runs step by step, loading that mode's kernels, and the next
//! captures anew.
//!
//! A state the call reads and writes (a parameter, an optimizer's moments) stays resident:
//! the graph's last steps write its new value into the buffer it read it from, and that
//! buffer becomes the tensor's data, so a training step copies no state in or out. If that
//! buffer is held anywhere else (a detached copy), the call runs step by step instead and
//! the next one captures again.
//!
//! **One arena.** A capture is made twice: the first over the driver's pool, recording
//! every allocation and free its steps make; the second over one device arena planned from
//! that recording (`cuda/arena_plan.rs`), each allocation at its planned offset, so the graph
//! allocates nothing. If the second fails, the first serves. `TENSOR_CORE_CUDA_ARENA=0`
//! keeps the first.
//!
//! Not yet: `cond`/`while_loop` nodes, which are an `Err` naming them.

use super::batching::Launches;
use super::executable::Outputs;
use super::lanes::{schedule, Placement};
use super::memory_plan::Plan;
use crate::cuda::arena_plan::{ArenaPlan, Event};
use crate::cuda::{CaptureMemory, CapturedGraph, DeviceStorage, MathMode};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::graph::{FusedProgram, Graph, InputSource, Node, NodeKind, StateWrite};
use crate::ops::device as gpu_ops;
use crate::ops::{BinaryOp, ElementwiseOp, Op};
use crate::switch::Switch;
use crate::tensor::{Tensor, Value};
use smallvec::SmallVec;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The GPU the call's tensor slots live on, if any (none: the CPU executor runs it).
pub(super) fn device_of(graph: &Graph, slots: &[&Tensor]) -> Result<Option<Device>> {
    if !crate::tensor::any_on_device() {
        return Ok(None);
    }
    let read: SmallVec<[&Tensor; 8]> = graph
        .inputs
        .iter()
        .filter_map(|(_, src)| match *src {
            InputSource::Data(s) | InputSource::Grad(s) => Some(slots[s]),
            InputSource::Param(_) => None,
        })
        .collect();
    gpu_ops::placement("graph call", &read)
}

/// An executable's GPU calls: how many ran, and its captured CUDA graph once there is one.
#[derive(Default)]
pub(super) struct GpuCalls(Mutex<CallState>);

#[derive(Default)]
struct CallState {
    /// The fast-math mode of the calls counted here (the kernels they loaded).
    math: MathMode,
    calls: usize,
    failed: bool,
    captured: Option<Captured>,
}

/// A captured call: the buffers it reads its inputs from, and where its outputs and written
/// values are after each launch.
struct Captured {
    graph: CapturedGraph,
    device: Device,
    /// Whether independent runs of one kernel were recorded as batched launches
    /// ([`batching`] when it was captured: a call with the other setting captures again).
    batched: bool,
    /// Whether captures were to use a planned arena when it was captured ([`arena_on`];
    /// likewise).
    arena: bool,
    inputs: Vec<(InputSource, DeviceStorage)>,
    /// Uploaded once: the graph reads them where they are.
    _constants: Vec<DeviceStorage>,
    outputs: Vec<Placed>,
    writes: Vec<Written>,
    state_writes: Vec<StateWrite>,
}

/// Where a state write's value is after a launch.
enum Written {
    /// At a fixed address of the graph's memory (copied out after each launch).
    Placed(Placed),
    /// In the buffer of input `k`, which the graph overwrites as its last step: a parameter
    /// or an optimizer's state, read and written by every call. The buffer becomes the
    /// slot's data, so the next call reads it where it is, with no copy in or out.
    Resident(usize),
    /// A `.grad` cleared.
    Cleared,
}

/// A value the graph leaves at a fixed device address.
struct Placed {
    address: u64,
    dtype: crate::dtype::DType,
    shape: crate::shape::Shape,
}

/// How many calls were captured as CUDA graphs, and how many captures failed (with the last
/// failure), in this process: for the device checks. Not part of the public API.
#[doc(hidden)]
pub fn cuda_graph_counts() -> (usize, usize, String) {
    let last = LAST_FAILURE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    (CAPTURES.load(Ordering::Relaxed), FAILURES.load(Ordering::Relaxed), last)
}

static CAPTURES: AtomicUsize = AtomicUsize::new(0);
static FAILURES: AtomicUsize = AtomicUsize::new(0);
static LAST_FAILURE: Mutex<String> = Mutex::new(String::new());

/// Runs the call on `device`: replayed from its CUDA graph when it has one, captured on its
/// second call when it can be, else step by step.
pub(super) fn run(graph: &Graph, plan: &Plan, slots: &[&Tensor], device: Device, calls: &GpuCalls) -> Result<Outputs> {
    if !capturable(graph, plan) {
        return run_plain(graph, plan, slots, device);
    }
    let mut state = calls.0.lock().unwrap_or_else(|e| e.into_inner());
    let math = crate::cuda::math_mode();
    if state.math != math {
        // Fast math was switched since these calls (the device checks compare both modes):
        // the other mode's kernels are not loaded yet, and a capture cannot load them, so
        // this call runs step by step (loading them) and the next one captures anew.
        *state = CallState { math, ..CallState::default() };
    }
    if state.captured.as_ref().is_some_and(|c| c.batched != batching() || c.arena != arena_on()) {
        // Batching or the arena was switched since the capture (the device checks compare both).
        state.captured = None;
    }
    if let Some(c) = state.captured.as_ref().filter(|c| c.device == device) {
        if !resident_shared(c, slots) {
            return replay(c, slots);
        }
        // A buffer the graph overwrites is held elsewhere too (a detached copy of a
        // parameter, say): this call runs step by step, and the next one captures again
        // with buffers of its own.
        state.captured = None;
        return run_plain(graph, plan, slots, device);
    }
    state.calls += 1;
    if state.calls < 2 || state.failed || state.captured.is_some() {
        return run_plain(graph, plan, slots, device);
    }
    match capture_call(graph, plan, slots, device) {
        Ok(c) => {
            CAPTURES.fetch_add(1, Ordering::Relaxed);
            let out = replay(&c, slots);
            state.captured = Some(c);
            out
        }
        Err(e) => {
            FAILURES.fetch_add(1, Ordering::Relaxed);
            *LAST_FAILURE.lock().unwrap_or_else(|e| e.into_inner()) = e.to_string();
            state.failed = true;
            run_plain(graph, plan, slots, device)
        }
    }
}

/// The fewest steps worth a capture: a replay adds a copy in and out per value, which a call
/// of one or two kernels does not win back.
const MIN_CAPTURED_STEPS: usize = 3;

/// Kernels and products only (no host work: printing, reading a `.grad` while running,
/// control flow), every shape known, enough steps, and capture not turned off.
fn capturable(graph: &Graph, plan: &Plan) -> bool {
    static GRAPHS: Switch = Switch::new("TENSOR_CORE_CUDA_GRAPHS", true);
    GRAPHS.on()
        && !plan.checks_shapes
        && plan.steps.len() >= MIN_CAPTURED_STEPS
        && graph.inputs.iter().all(|(_, src)| !matches!(src, InputSource::Param(_)))
        && plan.steps.iter().all(|s| matches!(s.node.kind, NodeKind::Op(_) | NodeKind::Fused(_) | NodeKind::Epilogue(_)))
}

/// Records the call's steps as one CUDA graph over buffers of its own: once over the
/// driver's pool, recording its allocations, then (unless the arena is off) again over one
/// arena planned from that recording. If the second capture fails, the first one serves.
fn capture_call(graph: &Graph, plan: &Plan, slots: &[&Tensor], device: Device) -> Result<Captured> {
    let mut inputs = Vec::new();
    for (_, src) in &graph.inputs {
        let now = read_input(slots, *src, device)?;
        inputs.push((*src, crate::cuda::empty(device, now.dtype, &now.shape)?));
    }
    let constants = graph.constants.iter().map(|(_, s)| crate::cuda::upload(s, device)).collect::<Result<Vec<_>>>()?;
    let batched = batching();
    let launches = Launches::new(plan, graph.values.len(), batched);
    // Every batched kernel is loaded before the capture starts (a capturing stream cannot
    // load modules); the plain first call loaded the others.
    for members in launches.members.iter().filter(|m| m.len() > 1) {
        if let NodeKind::Fused(p) = &plan.steps[members[0]].node.kind {
            gpu_ops::prepare_batch(p, device)?;
        }
    }
    let placements = schedule(&launches.plan, graph.values.len(), lanes_for(graph));
    let setup = Setup { graph, plan, slots, device, inputs: &inputs, constants: &constants, launches: &launches, placements: &placements, batched };
    let (mut first, recording) = capture_once(&setup, CaptureMemory::Recorded)?;
    first.arena = arena_on();
    if !first.arena {
        return Ok(first);
    }
    let planned = ArenaPlan::new(&recording);
    let unshared = planned.unshared_bytes();
    let second = capture_once(&setup, CaptureMemory::Planned(planned));
    let mut report = ARENA_REPORT.lock().unwrap_or_else(|e| e.into_inner());
    match second {
        Ok((mut second, _)) => {
            second.arena = true;
            *report = ArenaReport { captures: report.captures + 1, bytes: second.graph.arena_bytes(), unshared, failure: String::new() };
            Ok(second)
        }
        Err(e) => {
            report.failure = e.to_string();
            Ok(first)
        }
    }
}

/// What both captures of a call share.
struct Setup<'a> {
    graph: &'a Graph,
    plan: &'a Plan,
    slots: &'a [&'a Tensor],
    device: Device,
    inputs: &'a [(InputSource, DeviceStorage)],
    constants: &'a [DeviceStorage],
    launches: &'a Launches,
    placements: &'a [Placement],
    batched: bool,
}

/// One capture of the call, its buffers from `memory`; the allocations it recorded.
fn capture_once(s: &Setup, memory: CaptureMemory) -> Result<(Captured, Vec<Event>)> {
    let Setup { graph, plan, slots, device, inputs, constants, launches, placements, batched } = *s;
    let resident: Vec<Option<usize>> = graph.writes.iter().map(|w| resident_input(graph, w)).collect();
    let (captured, (outs, writes), recording) = crate::cuda::capture(device, memory, || {
        let mut values: Vec<Option<DeviceStorage>> = vec![None; graph.values.len()];
        for ((v, _), (_, buffer)) in graph.inputs.iter().zip(inputs) {
            values[*v] = Some(buffer.clone());
        }
        for ((v, _), c) in graph.constants.iter().zip(constants) {
            values[*v] = Some(c.clone());
        }
        let deferred = run_steps_on_lanes(plan, launches, placements, slots, device, &mut values)?;
        let (outs, writes) = kept_values(graph, &values);
        // A value kept after the call that is some resident state's old buffer (an output
        // returning a parameter as it was, one state written with another's old value) is
        // copied aside first: that buffer is overwritten below.
        let targets: Vec<u64> = resident.iter().flatten().map(|&k| crate::cuda::address(&inputs[k].1)).collect();
        let aside = |d: DeviceStorage, own: Option<u64>| -> Result<DeviceStorage> {
            let at = crate::cuda::address(&d);
            if !targets.contains(&at) || own == Some(at) {
                return Ok(d);
            }
            let copy = crate::cuda::empty(device, d.dtype, &d.shape)?;
            crate::cuda::copy_from(&copy, at)?;
            Ok(copy)
        };
        let outs = outs.into_iter().map(|o| aside(o, None)).collect::<Result<Vec<_>>>()?;
        let writes = writes
            .into_iter()
            .zip(&resident)
            .map(|(w, k)| w.map(|d| aside(d, k.map(|k| crate::cuda::address(&inputs[k].1)))).transpose())
            .collect::<Result<Vec<_>>>()?;
        // The last steps: each resident state's new value into its input's buffer (every
        // read of the old value comes before, in the stream's order).
        for (w, k) in writes.iter().zip(&resident) {
            if let (Some(value), Some(k)) = (w, k) {
                let buffer = &inputs[*k].1;
                if crate::cuda::address(value) != crate::cuda::address(buffer) {
                    crate::cuda::copy_from(buffer, crate::cuda::address(value))?;
                }
            }
        }
        // The values freed late: each on the lane that made it, after everything above.
        if !deferred.is_empty() {
            crate::cuda::lanes_wait_for(device, 0)?;
            drop(deferred);
        }
        Ok((outs, writes))
    })?;
    let placed = |d: &DeviceStorage| Placed { address: crate::cuda::address(d), dtype: d.dtype, shape: d.shape.clone() };
    let outputs = outs.iter().map(placed).collect();
    let written = writes
        .iter()
        .zip(&resident)
        .map(|(w, k)| match (w, k) {
            (_, Some(k)) => Written::Resident(*k),
            (Some(d), None) => Written::Placed(placed(d)),
            (None, None) => Written::Cleared,
        })
        .collect();
    // Dropping these frees nothing: their memory is the graph's or its arena's.
    drop((outs, writes));
    let c = Captured {
        graph: captured,
        device,
        batched,
        arena: false,
        inputs: inputs.to_vec(),
        _constants: constants.to_vec(),
        outputs,
        writes: written,
        state_writes: graph.writes.clone(),
    };
    Ok((c, recording))
}

/// The input a state write updates in place: the slot's data, read by the graph as an input.
fn resident_input(graph: &Graph, w: &StateWrite) -> Option<usize> {
    match *w {
        StateWrite::Data { slot, .. } => graph.inputs.iter().position(|(_, src)| *src == InputSource::Data(slot)),
        StateWrite::Grad { .. } => None,
    }
}

/// Whether the slot's data is `buffer` itself (so it needs no copy in).
fn holds(slot: &Tensor, buffer: &DeviceStorage) -> bool {
    matches!(&*slot.read_value(), Value::Device(d) if std::sync::Arc::ptr_eq(&d.buffer, &buffer.buffer))
}

/// Whether a buffer the graph overwrites is held by anyone besides the capture and its slot.
fn resident_shared(c: &Captured, slots: &[&Tensor]) -> bool {
    c.writes.iter().filter_map(|w| if let Written::Resident(k) = w { Some(*k) } else { None }).any(|k| {
        let (src, buffer) = &c.inputs[k];
        let InputSource::Data(s) = *src else { return false };
        let owners = 1 + usize::from(holds(slots[s], buffer));
        std::sync::Arc::strong_count(&buffer.buffer) > owners
    })
}

/// One launch of a captured call: inputs copied in (a resident state already there is not),
/// outputs and placed writes copied out, resident states left where the graph wrote them.
fn replay(c: &Captured, slots: &[&Tensor]) -> Result<Outputs> {
    for (src, buffer) in &c.inputs {
        if let InputSource::Data(s) = *src
            && holds(slots[s], buffer)
        {
            continue;
        }
        let now = read_input(slots, *src, c.device)?;
        crate::cuda::copy_from(buffer, crate::cuda::address(&now))?;
    }
    c.graph.replay()?;
    let take = |p: &Placed| -> Result<DeviceStorage> {
        let d = crate::cuda::empty(c.device, p.dtype, &p.shape)?;
        crate::cuda::copy_from(&d, p.address)?;
        Ok(d)
    };
    let outputs = c.outputs.iter().map(|p| take(p).map(tensor_of)).collect::<Result<Outputs>>()?;
    let written = c
        .writes
        .iter()
        .map(|w| match w {
            Written::Placed(p) => take(p).map(Some),
            Written::Resident(k) => Ok(Some(c.inputs[*k].1.clone())),
            Written::Cleared => Ok(None),
        })
        .collect::<Result<Vec<_>>>()?;
    apply_writes(&c.state_writes, slots, written);
    Ok(outputs)
}

/// The most bytes a call's values may take together for its capture to use more than one
/// lane: lanes free values at the end of the graph, not at their last use.
const LANE_MEMORY: usize = 1 << 30;

/// How many lanes a capture of `graph` records on: all of them, unless its values take more
/// than [`LANE_MEMORY`] together, or `TENSOR_CORE_CUDA_LANES` says how many (1: one stream).
fn lanes_for(graph: &Graph) -> usize {
    static SET: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let set = *SET.get_or_init(|| std::env::var("TENSOR_CORE_CUDA_LANES").ok().and_then(|v| v.parse().ok()));
    let bytes: usize = graph.values.iter().map(|v| v.shape.numel().saturating_mul(v.dtype.size_of())).fold(0, usize::saturating_add);
    match set {
        Some(n) => n.clamp(1, crate::cuda::CAPTURE_LANES),
        None if bytes > LANE_MEMORY => 1,
        None => crate::cuda::CAPTURE_LANES,
    }
}

/// Records the launches, each on its lane after the waits it needs, and returns lane 0 to
/// after all of them. A value dies at its last use when one lane made and read it (that
/// stream's order keeps its free after every read); the others are returned, to be freed at
/// the end.
fn run_steps_on_lanes(
    plan: &Plan,
    launches: &Launches,
    placements: &[Placement],
    slots: &[&Tensor],
    device: Device,
    values: &mut [Option<DeviceStorage>],
) -> Result<Vec<DeviceStorage>> {
    let mut made_on: Vec<Option<usize>> = vec![None; values.len()];
    let mut read_on = vec![0u64; values.len()];
    for (step, p) in launches.plan.steps.iter().zip(placements) {
        step.node.inputs.iter().for_each(|&v| read_on[v] |= 1 << p.lane);
        step.node.outputs.iter().for_each(|&v| made_on[v] = Some(p.lane));
    }
    let mut deferred = Vec::new();
    let mut used = 1u64;
    for ((step, p), members) in launches.plan.steps.iter().zip(placements).zip(&launches.members) {
        crate::cuda::record_on_lane(device, p.lane, &p.waits)?;
        used |= 1 << p.lane;
        match members.as_slice() {
            [_] => {
                let node = &step.node;
                let outs = {
                    let inputs: SmallVec<[&DeviceStorage; 4]> =
                        node.inputs.iter().map(|&v| values[v].as_ref().expect("defined before use")).collect();
                    run_node(node, &inputs, slots, device)?
                };
                for (&v, s) in node.outputs.iter().zip(outs) {
                    values[v] = Some(s);
                }
            }
            many => run_batched(plan, many, values)?,
        }
        for &v in &step.frees {
            let Some(d) = values[v].take() else { continue };
            // Inputs and constants are held by the capture: dropping this handle frees nothing.
            let one_lane = made_on[v].is_none_or(|m| m == p.lane && read_on[v] == 1 << p.lane);
            if !one_lane {
                deferred.push(d);
            }
        }
    }
    let others: SmallVec<[usize; 4]> = (1..crate::cuda::CAPTURE_LANES).filter(|l| used & (1 << l) != 0).collect();
    crate::cuda::record_on_lane(device, 0, &others)?;
    Ok(deferred)
}

/// One batched launch of fused steps (`batching.rs` chose them: independent, one kernel).
fn run_batched(plan: &Plan, members: &[usize], values: &mut [Option<DeviceStorage>]) -> Result<()> {
    let outs = {
        let runs = members
            .iter()
            .map(|&m| {
                let node = &plan.steps[m].node;
                let NodeKind::Fused(p) = &node.kind else {
                    return Err(Error::Device { op: "graph call", reason: "a batched launch of a step that is not a fused program".into() });
                };
                Ok((&**p, node.inputs.iter().map(|&v| values[v].as_ref().expect("defined before use")).collect()))
            })
            .collect::<Result<Vec<_>>>()?;
        gpu_ops::fused_batch_on(&runs)?
    };
    for (&m, made) in members.iter().zip(outs) {
        for (&v, s) in plan.steps[m].node.outputs.iter().zip(made) {
            values[v] = Some(s);
        }
    }
    Ok(())
}

/// Whether captures record independent runs of one kernel as one batched launch
/// (`batching.rs`): yes unless `TENSOR_CORE_CUDA_BATCH=0`, or [`set_cuda_batching`] says.
fn batching() -> bool {
    BATCHING_SWITCH.on()
}

static BATCHING_SWITCH: Switch = Switch::new("TENSOR_CORE_CUDA_BATCH", true);

/// Whether captures place their buffers in one planned arena (`cuda/arena.rs`): yes unless
/// `TENSOR_CORE_CUDA_ARENA=0`, or [`set_cuda_arena`] says.
fn arena_on() -> bool {
    ARENA_SWITCH.on()
}

static ARENA_SWITCH: Switch = Switch::new("TENSOR_CORE_CUDA_ARENA", true);

/// Turns the planned arena of captures on or off for this process (`None`: as
/// `TENSOR_CORE_CUDA_ARENA` says); a captured call whose setting differs is captured again.
/// For the device checks; not part of the public API.
#[doc(hidden)]
pub fn set_cuda_arena(on: Option<bool>) {
    ARENA_SWITCH.set(on);
}

/// What the planned arenas of this process's captures came to.
#[derive(Clone, Debug, Default)]
#[doc(hidden)]
pub struct ArenaReport {
    /// Captures whose buffers are in an arena.
    pub captures: usize,
    /// The last such capture's arena, in bytes.
    pub bytes: usize,
    /// What its allocations would take without reuse, in bytes.
    pub unshared: usize,
    /// Why the last capture that tried an arena could not use one (empty: none failed).
    pub failure: String,
}

static ARENA_REPORT: Mutex<ArenaReport> = Mutex::new(ArenaReport { captures: 0, bytes: 0, unshared: 0, failure: String::new() });

/// The arena report so far; for the device checks, not part of the public API.
#[doc(hidden)]
pub fn cuda_arena_report() -> ArenaReport {
    ARENA_REPORT.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Turns batched launches in captures on or off for this process (`None`: as
/// `TENSOR_CORE_CUDA_BATCH` says), so that the device checks compare both in one run; a
/// captured call whose setting differs is captured again. Not part of the public API.
#[doc(hidden)]
pub fn set_cuda_batching(on: Option<bool>) {
    BATCHING_SWITCH.set(on);
}

/// Runs the plan's steps on `device`, applies the writes, returns the outputs.
fn run_plain(graph: &Graph, plan: &Plan, slots: &[&Tensor], device: Device) -> Result<Outputs> {
    let mut values: Vec<Option<DeviceStorage>> = vec![None; graph.values.len()];
    for (v, src) in &graph.inputs {
        values[*v] = Some(read_input(slots, *src, device)?);
    }
    for (v, s) in &graph.constants {
        values[*v] = Some(crate::cuda::upload(s, device)?);
    }
    run_steps(plan, slots, device, &mut values)?;
    let (outs, written) = kept_values(graph, &values);
    apply_writes(&graph.writes, slots, written);
    Ok(outs.into_iter().map(tensor_of).collect())
}

/// What a run leaves: the outputs, and each state write's value (none: a `.grad` cleared).
fn kept_values(graph: &Graph, values: &[Option<DeviceStorage>]) -> (Vec<DeviceStorage>, Vec<Option<DeviceStorage>>) {
    let get = |v: usize| values[v].clone().expect("outputs and written values are kept");
    let outs = graph.outputs.iter().map(|&v| get(v)).collect();
    let writes = graph
        .writes
        .iter()
        .map(|w| match w {
            StateWrite::Data { value, .. } => Some(get(*value)),
            StateWrite::Grad { value, .. } => value.map(get),
        })
        .collect();
    (outs, writes)
}

/// The state writes, each with its value (none: a `.grad` cleared).
fn apply_writes(writes: &[StateWrite], slots: &[&Tensor], values: Vec<Option<DeviceStorage>>) {
    for (w, value) in writes.iter().zip(values) {
        match w {
            StateWrite::Data { slot, .. } => slots[*slot].set_value(Value::Device(value.expect("a data write has a value"))),
            StateWrite::Grad { slot, .. } => slots[*slot].set_grad_raw(value.map(tensor_of)),
        }
    }
}

/// The steps, each value freed at its last use.
fn run_steps(plan: &Plan, slots: &[&Tensor], device: Device, values: &mut [Option<DeviceStorage>]) -> Result<()> {
    for step in &plan.steps {
        let node = &step.node;
        let outs = {
            let inputs: SmallVec<[&DeviceStorage; 4]> = node.inputs.iter().map(|&v| values[v].as_ref().expect("defined before use")).collect();
            match profiling() {
                true => profiled(node, &inputs, || run_node(node, &inputs, slots, device))?,
                false => run_node(node, &inputs, slots, device)?,
            }
        };
        for (&v, s) in node.outputs.iter().zip(outs) {
            values[v] = Some(s);
        }
        for &v in &step.frees {
            values[v] = None;
        }
    }
    Ok(())
}

/// `TENSOR_CORE_CUDA_PROFILE=1`: each step of a plain run is timed by CUDA events (waiting
/// for each), summed per kind of step; [`cuda_profile`] reads the sums. For finding where a
/// graph's GPU time goes, with `TENSOR_CORE_CUDA_GRAPHS=0` (a captured call is one launch).
fn profiling() -> bool {
    static PROFILING: Switch = Switch::new("TENSOR_CORE_CUDA_PROFILE", false);
    PROFILING.on()
}

type Profile = std::collections::HashMap<String, (usize, f64)>;
static PROFILE: Mutex<Option<Profile>> = Mutex::new(None);

fn profiled(
    node: &Node,
    inputs: &[&DeviceStorage],
    run: impl FnOnce() -> Result<SmallVec<[DeviceStorage; 1]>>,
) -> Result<SmallVec<[DeviceStorage; 1]>> {
    let mut out = None;
    let mut run = Some(run);
    let device = inputs.first().map_or(Device::Cuda(0), |d| d.device);
    let us = crate::cuda::time_on_gpu(device, &mut || out = run.take().map(|r| r()))?;
    let kind = match &node.kind {
        NodeKind::Op(op) => op.name().to_string(),
        NodeKind::Fused(p) => format!("fused {}", p.instrs.len()),
        NodeKind::Epilogue(e) => format!("{} + epilogue", e.anchor.name()),
        other => format!("{:?}", std::mem::discriminant(other)),
    };
    let shape = inputs.first().map_or(String::new(), |d| format!("{}", d.shape));
    let mut guard = PROFILE.lock().unwrap_or_else(|e| e.into_inner());
    let entry = guard.get_or_insert_with(Profile::new).entry(format!("{kind} {shape}")).or_default();
    *entry = (entry.0 + 1, entry.1 + us);
    out.expect("ran")
}

/// The GPU time of each kind of step (with its first input's shape) since the process
/// started, with `TENSOR_CORE_CUDA_PROFILE=1`: (kind, steps, microseconds), most first. For
/// the device checks; not part of the public API.
#[doc(hidden)]
pub fn cuda_profile() -> Vec<(String, usize, f64)> {
    let guard = PROFILE.lock().unwrap_or_else(|e| e.into_inner());
    let mut rows: Vec<(String, usize, f64)> = guard.iter().flatten().map(|(k, (n, us))| (k.clone(), *n, *us)).collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    rows
}

fn tensor_of(d: DeviceStorage) -> Tensor {
    let (dtype, shape) = (d.dtype, d.shape.clone());
    Tensor::from_value(Value::Device(d), dtype, shape)
}

fn read_input(slots: &[&Tensor], src: InputSource, device: Device) -> Result<DeviceStorage> {
    match src {
        InputSource::Data(s) => gpu_ops::device_data(slots[s], "graph input", device),
        InputSource::Grad(s) => {
            let g = slots[s].grad_slot().grad.clone().expect("presence checked by the call's guards");
            gpu_ops::device_data(&g, "graph input", device)
        }
        InputSource::Param(_) => Err(not_yet("a subgraph parameter")),
    }
}

fn not_yet(what: &str) -> Error {
    Error::Device { op: "graph call", reason: format!("{what} does not run on the GPU yet; call the function on CPU tensors") }
}

fn run_node(node: &Node, inputs: &[&DeviceStorage], slots: &[&Tensor], device: Device) -> Result<SmallVec<[DeviceStorage; 1]>> {
    let one = |s: DeviceStorage| smallvec::smallvec![s];
    match &node.kind {
        NodeKind::Op(op) => Ok(one(gpu_ops::compute_on(op, inputs)?)),
        NodeKind::Fused(p) => Ok(gpu_ops::fused_on(p, inputs)?.into_iter().collect()),
        NodeKind::Epilogue(e) => {
            let (anchor_inputs, others) = inputs.split_at(e.arity);
            let product = gpu_ops::compute_on(&e.anchor, anchor_inputs)?;
            let program_inputs = program_inputs(&e.program, e.slot, &product, others);
            let mut outs: SmallVec<[DeviceStorage; 1]> = SmallVec::new();
            if e.keep_anchor {
                outs.push(product.clone());
            }
            outs.extend(gpu_ops::fused_on(&e.program, &program_inputs)?);
            Ok(outs)
        }
        NodeKind::AccumulateGrad { slot } => {
            let old = slots[*slot].grad_slot().grad.clone();
            match old {
                // The same kernel eager accumulation uses: `old + g`.
                Some(o) => {
                    let old = gpu_ops::device_data(&o, "accumulate_grad", device)?;
                    let add: Op = ElementwiseOp::Binary(BinaryOp::Add).into();
                    Ok(one(gpu_ops::compute_on(&add, &[&old, inputs[0]])?))
                }
                None => Ok(one(inputs[0].clone())),
            }
        }
        NodeKind::Print(pieces) => {
            let tensors: Vec<Tensor> = inputs.iter().map(|d| tensor_of((*d).clone())).collect();
            println!("{}", crate::graph::render(pieces, &tensors));
            Ok(SmallVec::new())
        }
        NodeKind::Cond { .. } | NodeKind::While { .. } => Err(not_yet("cond and while_loop")),
    }
}

/// The program's inputs in order: the product at `slot`, the node's other inputs around it.
fn program_inputs<'a>(p: &FusedProgram, slot: usize, product: &'a DeviceStorage, others: &[&'a DeviceStorage]) -> SmallVec<[&'a DeviceStorage; 4]> {
    let mut rest = others.iter();
    (0..p.inputs.len()).map(|k| if k == slot { product } else { *rest.next().expect("one input per program slot") }).collect()
}
