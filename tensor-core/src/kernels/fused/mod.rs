//! Fused elementwise kernels: a chain or tree of elementwise ops evaluated in one pass over
//! memory, chunk by chunk (a chunk's intermediates stay in L1), with the same scalar
//! functions eager kernels call — so a fused graph gives the bits eager gives.
//!
//! A program's instructions read the program inputs (same shape as the output, a single
//! value, or broadcast) or earlier instructions' results; results that leave the program are
//! written straight into the output buffers. Each instruction is compiled once to a loop
//! (see `compiled`); a chunk fills a table of pointers — inputs, scratch registers, outputs —
//! and calls the loops in order.

mod chain;
mod compiled;
#[cfg(target_arch = "x86_64")]
pub(crate) mod jit;

use super::parallel::par_min_len;
use crate::dtype::DType;
use crate::math::{FusedProgram, Instr, Operand};
use crate::shape::Shape;
use crate::storage::{Storage, Unwritten};
use compiled::{Kernel, Mode, Src};
use rayon::prelude::*;
use smallvec::SmallVec;
use std::cell::RefCell;

/// A program input: shared (still used later), or owned by the caller and dying here, so its
/// buffer may become an output's.
pub enum Input<'a> {
    /// Read only: something later still needs it.
    Shared(&'a Storage),
    /// Handed over: its buffer may be reused for an output.
    Dying(Storage),
    /// Being written by the kernel the program follows (an epilogue's anchor), which writes
    /// each part before the program reads it (`FusedRun::range`); read only. Its shape is the
    /// program's.
    Filling(&'a Unwritten),
    /// As `Filling`, and handed over: its buffer may be reused for an output.
    FillingDying(Unwritten),
}

/// What a run holds of a dying input: its storage, or the buffer being filled.
enum Held {
    Storage(Storage),
    Filling(Unwritten),
}

impl Held {
    fn dtype(&self) -> DType {
        match self {
            Held::Storage(s) => s.dtype(),
            Held::Filling(u) => u.dtype(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Held::Storage(s) => s.len(),
            Held::Filling(u) => u.len(),
        }
    }

    /// Its buffer to write an output of `n` elements over, or itself when that cannot be.
    fn reclaim(self, n: usize) -> Result<Unwritten, Held> {
        match self {
            Held::Storage(s) => Unwritten::reclaim(s, n).map_err(Held::Storage),
            Held::Filling(u) if u.len() == n => Ok(u),
            held => Err(held),
        }
    }
}

/// Elements per chunk: 8 KiB of f64 per register.
pub const FUSED_CHUNK: usize = 1024;
// A chunk of f64 stays in a 16 KiB L1.
const _: () = assert!(FUSED_CHUNK * 8 <= 16 * 1024);

/// A fused program compiled for this CPU: its description, every instruction compiled to a
/// loop, and — where it can be — the whole program generated as one loop. Built when a graph
/// is lowered to an `Executable`, never held by the graph itself.
pub struct CompiledProgram {
    /// What it computes.
    program: FusedProgram,
    /// The compiled instructions. Frame slots: inputs, then scratch registers, then outputs.
    kernels: Vec<Kernel>,
    /// The steps the chain kernels point to (a boxed slice does not move with the `Vec`).
    _chains: Vec<Box<[chain::Step]>>,
    num_regs: usize,
    /// The whole program as one generated loop, when it has one (see `jit`); the kernels
    /// above run otherwise.
    #[cfg(target_arch = "x86_64")]
    jit: Option<jit::Jit>,
    /// Per input, whether the output may be written over it in place (see `in_place`).
    in_place: Vec<bool>,
}

impl std::fmt::Debug for CompiledProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Compiled{:?}", self.program)
    }
}

impl CompiledProgram {
    /// `program` compiled: scratch registers assigned, every instruction compiled — and the
    /// whole program to one loop where it can (see `jit` and [`crate::set_codegen`]).
    pub fn new(program: &FusedProgram) -> CompiledProgram {
        Self::build(program, crate::kernels::codegen::codegen_enabled(), false)
    }

    /// [`new`](Self::new) for a step of a plan: with `streams`, the generated loop writes the
    /// outputs with streaming stores, which bypass the cache (for large outputs nothing later
    /// in the call reads; see `compile::memory_plan::STREAM_MIN_BYTES`). The bits are the same.
    pub fn for_step(program: &FusedProgram, streams: bool) -> CompiledProgram {
        Self::build(program, crate::kernels::codegen::codegen_enabled(), streams)
    }

    /// The program compiled, generated as one loop if `codegen` (with streaming stores if
    /// `streams`), so a test can build every path of one program.
    pub(crate) fn build(program: &FusedProgram, codegen: bool, streams: bool) -> CompiledProgram {
        let FusedProgram { inputs, instrs, outputs, .. } = program;
        let (regs, num_regs) = assign_registers(instrs, outputs);
        let n_in = inputs.len();
        let slot_of = |k: usize| -> u16 {
            match outputs.iter().position(|&o| o == k) {
                Some(j) => (n_in + num_regs + j) as u16,
                None => (n_in + regs[k]) as u16,
            }
        };
        let srcs_of = |instr: &Instr| -> SmallVec<[Src; 3]> {
            instr
                .args
                .iter()
                .map(|a| match *a {
                    Operand::Input(i) => {
                        let mode = if inputs[i].1.numel() == 1 { Mode::Value } else { Mode::Slice };
                        Src { slot: i as u16, mode, dtype: inputs[i].0 }
                    }
                    Operand::ResultOf(r) => Src { slot: slot_of(r), mode: Mode::Slice, dtype: instrs[r].dtype },
                })
                .collect()
        };
        // Runs of scalar ops become one chain kernel each (the intermediate registers of a run
        // are then simply not used).
        let mut kernels = Vec::with_capacity(instrs.len());
        let mut chains: Vec<Box<[chain::Step]>> = Vec::new();
        let mut runs = chain::runs(instrs, outputs).into_iter().peekable();
        let mut k = 0;
        while k < instrs.len() {
            if let Some(&(first, last)) = runs.peek().filter(|r| r.0 == k) {
                runs.next();
                let steps: Box<[chain::Step]> = instrs[first..=last].iter().map(|i| chain::step_of(i).expect("a run holds steps")).collect();
                if let Some(kernel) = chain::kernel(instrs[last].dtype, srcs_of(&instrs[first])[0], slot_of(last), &steps) {
                    kernels.push(kernel);
                    chains.push(steps);
                    k = last + 1;
                    continue;
                }
            }
            kernels.push(compiled::compile(&instrs[k].op, &srcs_of(&instrs[k]), slot_of(k)));
            k += 1;
        }
        #[cfg(target_arch = "x86_64")]
        let jit = {
            let srcs: Vec<SmallVec<[Src; 3]>> = instrs.iter().map(srcs_of).collect();
            if codegen {
                jit::Jit::compile(instrs, &srcs, outputs, |j| n_in + num_regs + j, streams)
            } else {
                None
            }
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = streams;
        #[cfg(target_arch = "x86_64")]
        let in_place = in_place(program, jit.as_ref().is_some_and(|j| !j.streams));
        #[cfg(not(target_arch = "x86_64"))]
        let in_place = in_place(program, false);
        CompiledProgram {
            program: program.clone(),
            kernels,
            _chains: chains,
            num_regs,
            #[cfg(target_arch = "x86_64")]
            jit,
            in_place,
        }
    }

    /// True when the program runs as one generated loop (see `jit`), false when it runs in
    /// the interpreter.
    #[cfg_attr(not(test), allow(dead_code))] // read by the tests of both paths
    pub fn is_generated(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        return self.jit.is_some();
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// The instruction set of the generated loop, if there is one.
    #[cfg(target_arch = "x86_64")]
    #[cfg_attr(not(test), allow(dead_code))] // read by the tests of both paths
    pub(crate) fn generated_isa(&self) -> Option<jit::Isa> {
        self.jit.as_ref().map(|j| j.isa)
    }

    /// True when the generated loop writes its outputs with streaming stores.
    pub(crate) fn streams(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        return self.jit.as_ref().is_some_and(|j| j.streams);
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// How many loops a chunk calls (runs of scalar ops share one).
    #[cfg_attr(not(test), allow(dead_code))] // read by the tests of chains
    pub fn num_kernels(&self) -> usize {
        self.kernels.len()
    }

    /// What the program computes.
    pub fn program(&self) -> &FusedProgram {
        &self.program
    }

    /// Runs the program; an output takes over the buffer of a dying input of its dtype and
    /// size when nothing else holds it. Allocates nothing but the outputs' buffers (a
    /// chunk's frame and registers live in per-thread scratch).
    pub fn run<'a>(&'a self, inputs: impl IntoIterator<Item = Input<'a>>) -> SmallVec<[Storage; 1]> {
        let run = self.begin(inputs);
        let n = self.program.shape.numel();
        if self.streams() {
            self.run_streaming(&run, n);
            // SAFETY: the ranges covered every position.
            return unsafe { run.finish() };
        }
        let chunks = n.div_ceil(FUSED_CHUNK);
        let run_chunk = |c: usize| {
            let start = c * FUSED_CHUNK;
            run.range(start, FUSED_CHUNK.min(n - start));
        };
        if n >= par_min_len() {
            // Several chunks per task, so the hand-off is paid once per ~64 KiB of output.
            (0..chunks).into_par_iter().with_min_len(16).for_each(run_chunk);
        } else {
            (0..chunks).for_each(run_chunk);
        }
        // SAFETY: the chunks covered every position.
        unsafe { run.finish() }
    }

    /// Runs a program that writes with streaming stores. Its chunks start at the first
    /// output's 64-byte boundaries (the first range takes the elements before the first one),
    /// so a cache line is written by streaming stores alone, never also by an ordinary store
    /// of a chunk's unaligned edge; and each task ends with a store fence, since streaming
    /// stores are weakly ordered (one fence per task: a fence waits for the stores to reach
    /// memory, so one per chunk would make every chunk wait).
    fn run_streaming(&self, run: &FusedRun, n: usize) {
        let first = run.outs[0].ptr_at(0) as usize;
        let skew = n.min((64 - first % 64) % 64 / self.program.instrs[self.program.outputs[0]].dtype.size_of());
        run.range(0, skew);
        let chunks = (n - skew).div_ceil(FUSED_CHUNK);
        let run_chunk = |(), c: usize| {
            let start = skew + c * FUSED_CHUNK;
            run.range(start, FUSED_CHUNK.min(n - start));
        };
        (0..chunks).into_par_iter().with_min_len(16).fold(|| (), run_chunk).for_each(|()| store_fence());
        store_fence();
    }

    /// Prepares a run whose positions the caller computes range by range (`FusedRun::range`),
    /// then collects with `FusedRun::finish`: how an epilogue runs the program on each block of
    /// its anchor's output right after the block is made. Inputs as for [`run`](Self::run).
    pub fn begin<'a>(&'a self, inputs: impl IntoIterator<Item = Input<'a>>) -> FusedRun<'a> {
        let n = self.program.shape.numel();
        let mut sources: SmallVec<[Source; 4]> = SmallVec::new();
        let mut dying: SmallVec<[Option<Held>; 4]> = SmallVec::new();
        for input in inputs {
            match input {
                Input::Shared(s) => {
                    sources.push(Source::new(s, &self.program.shape));
                    dying.push(None);
                }
                Input::Dying(s) => {
                    sources.push(Source::new(&s, &self.program.shape));
                    dying.push(Some(Held::Storage(s)));
                }
                Input::Filling(u) => {
                    sources.push(Source::filling(u, n));
                    dying.push(None);
                }
                Input::FillingDying(u) => {
                    sources.push(Source::filling(&u, n));
                    dying.push(Some(Held::Filling(u)));
                }
            }
        }
        let mut aliased: SmallVec<[bool; 4]> = SmallVec::from_elem(false, sources.len());
        let mut outs: SmallVec<[Unwritten; 2]> = SmallVec::new();
        for &k in &self.program.outputs {
            let dtype = self.program.instrs[k].dtype;
            let donor =
                (0..sources.len()).find(|&i| dying[i].as_ref().is_some_and(|s| s.dtype() == dtype && s.len() == n) && sources[i].is_direct_slice());
            match donor.map(|i| (i, dying[i].take().expect("checked").reclaim(n))) {
                Some((i, Ok(buf))) => {
                    aliased[i] = !self.writes_in_place(i);
                    outs.push(buf);
                }
                Some((i, Err(kept))) => {
                    // Not reclaimable: keep it alive, as `sources[i]` still reads it.
                    dying[i] = Some(kept);
                    outs.push(Unwritten::new(dtype, n));
                }
                None => outs.push(Unwritten::new(dtype, n)),
            }
        }
        FusedRun { program: self, sources, aliased, outs, _dying: dying, _inputs: std::marker::PhantomData }
    }

    /// True when the output may be written over input `i` without the input's chunks being
    /// copied first (see `in_place`).
    fn writes_in_place(&self, i: usize) -> bool {
        self.in_place[i]
    }

    fn run_chunk(&self, scratch: &mut Scratch, sources: &[Source], aliased: &[bool], outs: &[Unwritten], start: usize, len: usize) {
        scratch.prepare(self.num_regs, sources.len());
        let Scratch { regs, inputs, frame } = scratch;
        frame.clear();
        for (i, src) in sources.iter().enumerate() {
            let p = if src.is_scalar() {
                src.ptr as *mut u8
            } else if aliased[i] || !src.is_direct() {
                // Broadcast, strided, or about to be overwritten by an output the program may
                // write before it reads all of it (see `writes_in_place`): copied first.
                load_input(&mut inputs[i], src, start, len)
            } else {
                // SAFETY: a direct source is a live buffer of the output's length.
                unsafe { (src.ptr as *mut u8).add(start * src.dtype.size_of()) }
            };
            frame.push(p);
        }
        frame.extend(regs[..self.num_regs].iter_mut().map(|r| r.as_mut_ptr() as *mut u8));
        frame.extend(outs.iter().map(|o| o.ptr_at(start)));
        #[cfg(target_arch = "x86_64")]
        if let Some(jit) = &self.jit {
            // SAFETY: the frame is the one the kernels below would get (an f32 program: every
            // slot holds `len` f32 values, or one for a single-value input), and no output
            // overlaps an input, but one written in place over an input read first (see
            // `writes_in_place`; any other input an output overwrites was copied above).
            unsafe { jit.run(frame.as_ptr(), len) };
            return;
        }
        for k in &self.kernels {
            // SAFETY: the frame holds, for every slot a kernel names, a pointer to `len` values
            // of the slot's dtype (one value for single-value inputs); a kernel's destination
            // never overlaps its sources (registers are reused only after their last read, and
            // an input an output overwrites was copied to scratch above).
            unsafe { (k.run)(k, frame.as_ptr(), len) };
        }
    }
}

/// A program run in progress (see [`CompiledProgram::begin`]). Its inputs are read through
/// pointers: shared ones are borrowed for `'a`, dying ones are held here.
pub struct FusedRun<'a> {
    program: &'a CompiledProgram,
    sources: SmallVec<[Source; 4]>,
    aliased: SmallVec<[bool; 4]>,
    outs: SmallVec<[Unwritten; 2]>,
    _dying: SmallVec<[Option<Held>; 4]>,
    _inputs: std::marker::PhantomData<&'a Storage>,
}

impl FusedRun<'_> {
    /// Computes output positions `start..start + len`, on the calling thread, in chunks.
    /// Ranges run from several threads at once must not overlap, and the inputs' values at
    /// these positions must be final.
    pub fn range(&self, start: usize, len: usize) {
        let end = start + len;
        debug_assert!(end <= self.program.program.shape.numel());
        SCRATCH.with(|s| {
            let scratch = &mut s.borrow_mut();
            let mut at = start;
            while at < end {
                let n = FUSED_CHUNK.min(end - at);
                self.program.run_chunk(scratch, &self.sources, &self.aliased, &self.outs, at, n);
                at += n;
            }
        });
    }

    /// The outputs.
    ///
    /// # Safety
    /// `range` must have covered every position.
    pub(crate) unsafe fn finish(self) -> SmallVec<[Storage; 1]> {
        unsafe {
            let dims = self.program.program.shape.dims();
            self.outs.into_iter().map(|o| o.assume_written(dims)).collect()
        }
    }
}

// SAFETY: ranges write disjoint parts of the outputs and only read the inputs (see `range`).
unsafe impl Sync for FusedRun<'_> {}

/// Makes this thread's streaming stores visible before what it writes next.
fn store_fence() {
    // SAFETY: `sfence` is part of SSE, which every x86-64 CPU has; it only orders stores.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// Per input of `program`, whether its one output may be written over that input chunk by
/// chunk without the input's chunk being copied first. Only for the generated loop without
/// streaming stores (`plain_jit`): it loads each input once per vector, at its first use, and
/// stores the output as soon as it is computed, so an input first read at or before the
/// output's instruction has every lane read before the same lane is written. (The
/// interpreter's kernels are written for disjoint buffers; streaming stores bypass the cache
/// the next vector's loads use.) The copy was 3% of MobileNetV2's time, in its epilogues.
fn in_place(program: &FusedProgram, plain_jit: bool) -> Vec<bool> {
    let n = program.inputs.len();
    let &[out] = &program.outputs[..] else { return vec![false; n] };
    if !plain_jit {
        return vec![false; n];
    }
    let first_read = |i: usize| program.instrs.iter().position(|instr| instr.args.iter().any(|a| matches!(a, Operand::Input(k) if *k == i)));
    (0..n).map(|i| first_read(i).is_some_and(|k| k <= out)).collect()
}

/// Linear-scan register assignment: a result's register is free after its last use.
fn assign_registers(instrs: &[Instr], outputs: &[usize]) -> (Vec<usize>, usize) {
    let mut last_use = vec![0usize; instrs.len()];
    for (k, instr) in instrs.iter().enumerate() {
        for a in &instr.args {
            if let Operand::ResultOf(r) = a {
                last_use[*r] = k;
            }
        }
    }
    // The results whose last use is each instruction, so freeing costs nothing per step.
    let mut dying: Vec<Vec<usize>> = vec![Vec::new(); instrs.len()];
    for (j, &k) in last_use.iter().enumerate() {
        dying[k].push(j);
    }
    let mut is_output = vec![false; instrs.len()];
    outputs.iter().for_each(|&o| is_output[o] = true);
    let mut regs = vec![usize::MAX; instrs.len()];
    let mut free: Vec<usize> = Vec::new();
    let mut count = 0;
    for k in 0..instrs.len() {
        // Registers of results whose last use was the previous instruction are free again.
        if k > 0 {
            for &j in &dying[k - 1] {
                if j < k && regs[j] != usize::MAX && !is_output[j] {
                    free.push(regs[j]);
                }
            }
        }
        if !is_output[k] {
            regs[k] = free.pop().unwrap_or_else(|| {
                count += 1;
                count - 1
            });
        }
    }
    (regs, count)
}

/// A program input viewed against the output shape, by pointer (the storage outlives the
/// run: the caller holds shared inputs, `run` holds dying ones or they became outputs).
struct Source {
    dtype: DType,
    ptr: *const u8,
    kind: SourceKind,
}

// SAFETY: the pointed-to data is only read, and outlives every chunk task.
unsafe impl Sync for Source {}
unsafe impl Send for Source {}

enum SourceKind {
    /// Same shape, standard layout: read in place.
    Direct,
    /// One value for all positions.
    Scalar,
    /// Broadcast or strided: gathered per chunk with these element strides.
    Strided { strides: SmallVec<[isize; 6]>, dims: SmallVec<[usize; 6]> },
}

impl Source {
    fn new(s: &Storage, shape: &Shape) -> Source {
        let (ptr, kind) = crate::storage::with_array!(s, a => {
            let kind = if a.len() == 1 {
                SourceKind::Scalar
            } else if a.shape() == shape.dims() && a.is_standard_layout() {
                SourceKind::Direct
            } else {
                let view = a.broadcast(ndarray::IxDyn(shape.dims())).expect("shapes checked when fusing");
                SourceKind::Strided { strides: SmallVec::from_slice(view.strides()), dims: SmallVec::from_slice(shape.dims()) }
            };
            (a.as_ptr() as *const u8, kind)
        });
        Source { dtype: s.dtype(), ptr, kind }
    }

    /// A buffer of `n` elements being filled, laid out as the output.
    fn filling(u: &Unwritten, n: usize) -> Source {
        assert_eq!(u.len(), n, "a filling input has the program's shape");
        let kind = if n == 1 { SourceKind::Scalar } else { SourceKind::Direct };
        Source { dtype: u.dtype(), ptr: u.ptr_at(0), kind }
    }

    fn is_scalar(&self) -> bool {
        matches!(self.kind, SourceKind::Scalar)
    }

    fn is_direct(&self) -> bool {
        matches!(self.kind, SourceKind::Direct | SourceKind::Scalar)
    }

    fn is_direct_slice(&self) -> bool {
        matches!(self.kind, SourceKind::Direct)
    }

    /// Copies output positions `start..start + dst.len()` of this input into `dst`.
    fn gather<T: Copy>(&self, start: usize, dst: &mut [T]) {
        let base = self.ptr as *const T;
        match &self.kind {
            // SAFETY: as in `direct` and `scalar`.
            SourceKind::Direct => dst.copy_from_slice(unsafe { std::slice::from_raw_parts(base.add(start), dst.len()) }),
            SourceKind::Scalar => dst.fill(unsafe { *base }),
            SourceKind::Strided { strides, dims } => gather_strided(base, strides, dims, start, dst),
        }
    }
}

/// Gathers output positions `start..` of a strided view (strides in elements, 0 where
/// broadcast) into `dst`, a run of the innermost dim at a time: a contiguous run is one copy,
/// a broadcast run one fill (a bias broadcast over rows is a row copy, not a per-element walk).
fn gather_strided<T: Copy>(base: *const T, strides: &[isize], dims: &[usize], start: usize, dst: &mut [T]) {
    let rank = dims.len();
    let mut idx: SmallVec<[usize; 6]> = SmallVec::from_elem(0, rank);
    let mut rem = start;
    for d in (0..rank).rev() {
        idx[d] = rem % dims[d];
        rem /= dims[d];
    }
    let (inner, inner_stride) = (dims[rank - 1], strides[rank - 1]);
    let mut offset: isize = idx.iter().zip(strides).map(|(&i, &s)| i as isize * s).sum();
    let mut done = 0;
    while done < dst.len() {
        let run = (inner - idx[rank - 1]).min(dst.len() - done);
        let out = &mut dst[done..done + run];
        // SAFETY: offset and the run's `run - 1` further steps of `inner_stride` stay within
        // the broadcast view the strides came from.
        unsafe {
            match inner_stride {
                1 => out.copy_from_slice(std::slice::from_raw_parts(base.offset(offset), run)),
                0 => out.fill(*base.offset(offset)),
                s => out.iter_mut().enumerate().for_each(|(i, o)| *o = *base.offset(offset + i as isize * s)),
            }
        }
        done += run;
        // Step to the start of the next run: the innermost index wraps, outer ones carry.
        offset -= idx[rank - 1] as isize * inner_stride;
        idx[rank - 1] = 0;
        for d in (0..rank - 1).rev() {
            idx[d] += 1;
            offset += strides[d];
            if idx[d] < dims[d] {
                break;
            }
            offset -= strides[d] * dims[d] as isize;
            idx[d] = 0;
        }
    }
}

// ------------------------------------------------------------------------------- the scratch

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Per-thread registers, reused across chunks, calls and programs. Registers are untyped:
/// `FUSED_CHUNK` u64s hold a chunk of any element type, suitably aligned. `frame` is the
/// chunk's pointer table.
#[derive(Default)]
struct Scratch {
    regs: Vec<Vec<u64>>,
    inputs: Vec<Vec<u64>>,
    frame: Vec<*mut u8>,
}

impl Scratch {
    fn prepare(&mut self, regs: usize, inputs: usize) {
        if self.regs.len() < regs {
            self.regs.resize_with(regs, || vec![0; FUSED_CHUNK]);
        }
        if self.inputs.len() < inputs {
            self.inputs.resize_with(inputs, || vec![0; FUSED_CHUNK]);
        }
    }
}

/// Copies positions `start..start + len` of `src` into `reg`; returns it.
fn load_input(reg: &mut [u64], src: &Source, start: usize, len: usize) -> *mut u8 {
    let p = reg.as_mut_ptr();
    // SAFETY: the register holds FUSED_CHUNK u64s, room for `len` values of any element
    // type, and u64 alignment suits them all.
    unsafe {
        match src.dtype {
            DType::F32 => src.gather(start, std::slice::from_raw_parts_mut(p as *mut f32, len)),
            DType::F64 => src.gather(start, std::slice::from_raw_parts_mut(p as *mut f64, len)),
            DType::I32 => src.gather(start, std::slice::from_raw_parts_mut(p as *mut i32, len)),
            DType::I64 => src.gather(start, std::slice::from_raw_parts_mut(p as *mut i64, len)),
            DType::Bool => src.gather(start, std::slice::from_raw_parts_mut(p as *mut bool, len)),
        }
    }
    p as *mut u8
}

#[cfg(test)]
mod tests {
    // How the items above are used (they are crate-private, so these are not doc tests).
    #[test]
    fn a_dying_input_lends_its_buffer_to_the_output() -> crate::error::Result<()> {
        use crate::kernels::fused::{CompiledProgram, Input};
        use crate::math::{FusedProgram, Instr, Operand};
        use crate::ops::{ElementwiseOp, UnaryOp};
        use crate::prelude::*;
        let p = CompiledProgram::new(&FusedProgram {
            shape: Shape::new(&[3]),
            inputs: vec![(DType::F32, Shape::new(&[3]))],
            instrs: vec![Instr { op: ElementwiseOp::Unary(UnaryOp::Neg), args: [Operand::Input(0)].into_iter().collect(), dtype: DType::F32 }],
            outputs: vec![0],
        });
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?.to_storage()?;
        let out = p.run([Input::Dying(x)]); // nothing else holds x: its buffer becomes the output's
        assert_eq!(out[0].array::<f32>().unwrap().as_slice().unwrap(), &[-1.0, -2.0, -3.0]);
        Ok(())
    }

    #[test]
    fn the_generated_loop_writes_over_an_input_it_has_read_with_the_copys_bits() {
        use crate::kernels::fused::{CompiledProgram, Input};
        use crate::math::{FusedProgram, Instr, Operand};
        use crate::ops::{BinaryOp, ElementwiseOp, UnaryOp};
        use crate::prelude::*;
        let n = 2 * FUSED_CHUNK + 13; // whole chunks, and a last vector under a mask
        let op = |op, args: &[Operand]| Instr { op, args: args.iter().copied().collect(), dtype: DType::F32 };
        let program = |instrs: Vec<Instr>, outputs: Vec<usize>| FusedProgram {
            shape: Shape::new(&[n]),
            inputs: vec![(DType::F32, Shape::new(&[n])); 2],
            instrs,
            outputs,
        };
        // `x` (input 1) read by the output's own instruction: `exp(a) * x`.
        let late = program(
            vec![
                op(ElementwiseOp::Unary(UnaryOp::Exp), &[Operand::Input(0)]),
                op(ElementwiseOp::Binary(BinaryOp::Mul), &[Operand::ResultOf(0), Operand::Input(1)]),
            ],
            vec![1],
        );
        // Two outputs: not in place (a later output may read what an earlier one wrote).
        let two = program(
            vec![
                op(ElementwiseOp::Unary(UnaryOp::Neg), &[Operand::Input(1)]),
                op(ElementwiseOp::Binary(BinaryOp::Add), &[Operand::Input(0), Operand::Input(1)]),
            ],
            vec![0, 1],
        );
        let p = CompiledProgram::build(&late, true, false);
        if !p.is_generated() {
            return; // no generated loop on this CPU: every overwritten input is copied
        }
        assert!(p.writes_in_place(1) && p.writes_in_place(0));
        // `x` first read after the output was stored (an instruction whose result is unused).
        let after = program(
            vec![
                op(ElementwiseOp::Unary(UnaryOp::Neg), &[Operand::Input(0)]),
                op(ElementwiseOp::Binary(BinaryOp::Mul), &[Operand::ResultOf(0), Operand::Input(1)]),
            ],
            vec![0],
        );
        let q = CompiledProgram::build(&after, true, false);
        assert!(q.writes_in_place(0) && !q.writes_in_place(1));
        assert!(!CompiledProgram::build(&two, true, false).writes_in_place(1));
        assert!(!CompiledProgram::build(&late, false, false).writes_in_place(1), "the interpreter copies");
        assert!(!CompiledProgram::build(&late, true, true).writes_in_place(1), "streaming stores copy");
        let mut xs: Vec<f32> = crate::kernels::test_values(2 * n, 5).into_iter().map(|v| v as f32 * 3.0).collect();
        xs[7] = f32::NAN;
        xs[n + 9] = f32::from_bits(0xffc0_0042);
        let a = Tensor::from_vec(xs[..n].to_vec(), &[n]).unwrap().to_storage().unwrap();
        let x = Tensor::from_vec(xs[n..].to_vec(), &[n]).unwrap().to_storage().unwrap();
        let bits = |s: &Storage| s.array::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let want = bits(&p.run([Input::Shared(&a), Input::Shared(&x)])[0]);
        let at = x.array::<f32>().unwrap().as_ptr() as usize;
        let out = p.run([Input::Shared(&a), Input::Dying(x)]);
        assert_eq!(out[0].array::<f32>().unwrap().as_ptr() as usize, at, "written over x");
        assert_eq!(bits(&out[0]), want);
    }

    #[test]
    fn a_filling_input_is_read_part_by_part_and_may_lend_its_buffer() {
        use crate::kernels::fused::{CompiledProgram, Input};
        use crate::math::{FusedProgram, Instr, Operand};
        use crate::ops::{ElementwiseOp, UnaryOp};
        use crate::prelude::*;
        use crate::storage::Unwritten;
        let n = 3000; // three chunks
        let p = CompiledProgram::new(&FusedProgram {
            shape: Shape::new(&[n]),
            inputs: vec![(DType::F32, Shape::new(&[n]))],
            instrs: vec![Instr { op: ElementwiseOp::Unary(UnaryOp::Neg), args: [Operand::Input(0)].into_iter().collect(), dtype: DType::F32 }],
            outputs: vec![0],
        });
        let write = |u: &Unwritten, part: std::ops::Range<usize>| {
            for i in part {
                // SAFETY: element i of an f32 buffer of n, written by this call alone.
                unsafe { *(u.ptr_at(i) as *mut f32) = i as f32 };
            }
        };
        let negated: Vec<f32> = (0..n).map(|i| -(i as f32)).collect();
        // Kept: the program reads each part once it is written, and the buffer stays the input's.
        let kept = Unwritten::new(DType::F32, n);
        let run = p.begin([Input::Filling(&kept)]);
        for part in [0..1000, 1000..2500, 2500..n] {
            write(&kept, part.clone());
            run.range(part.start, part.len());
        }
        // SAFETY: the ranges covered every position; the loop wrote every element of `kept`.
        let (out, kept) = unsafe { (run.finish(), kept.assume_written(&[n])) };
        assert_eq!(out[0].array::<f32>().unwrap().as_slice().unwrap(), &negated[..]);
        assert_eq!(kept.array::<f32>().unwrap().iter().map(|v| -v).collect::<Vec<_>>(), negated);
        // Handed over: the output is written over the input, at the same address.
        let dying = Unwritten::new(DType::F32, n);
        let at = dying.ptr_at(0) as usize;
        write(&dying, 0..n);
        let out = p.run([Input::FillingDying(dying)]);
        assert_eq!(out[0].array::<f32>().unwrap().as_slice().unwrap(), &negated[..]);
        assert_eq!(out[0].array::<f32>().unwrap().as_ptr() as usize, at, "the input's buffer became the output's");
    }

    #[test]
    fn an_instruction_reads_inputs_and_earlier_results() -> crate::error::Result<()> {
        use crate::math::{Instr, Operand};
        use crate::ops::{BinaryOp, ElementwiseOp};
        use crate::prelude::*;
        // `input 0 + result 0`
        let add = Instr {
            op: ElementwiseOp::Binary(BinaryOp::Add),
            args: [Operand::Input(0), Operand::ResultOf(0)].into_iter().collect(),
            dtype: DType::F32,
        };
        assert_eq!(add.args.len(), 2);
        Ok(())
    }

    #[test]
    fn an_instruction_names_its_op() -> crate::error::Result<()> {
        use crate::math::{Instr, Operand};
        use crate::ops::{ElementwiseOp, UnaryOp};
        use crate::prelude::*;
        let exp = Instr { op: ElementwiseOp::Unary(UnaryOp::Exp), args: [Operand::Input(0)].into_iter().collect(), dtype: DType::F64 };
        assert_eq!(exp.op.name(), "exp");
        Ok(())
    }

    #[test]
    fn a_traced_chain_becomes_one_program() -> crate::error::Result<()> {
        use crate::function::ConcreteFunction;
        use crate::graph::NodeKind;
        use crate::prelude::*;
        let x = Tensor::ones(&[16], DType::F32);
        let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(2.0)?.exp()?]))?;
        let NodeKind::Fused(p) = &f.graph().nodes[0].kind else { panic!("{}", f.to_text()) };
        assert_eq!((p.summary(), p.shape.dims()), ("mul,exp".to_string(), &[16][..]));
        Ok(())
    }

    #[test]
    fn a_program_built_by_hand_runs() -> crate::error::Result<()> {
        use crate::kernels::fused::{CompiledProgram, Input};
        use crate::math::{FusedProgram, Instr, Operand};
        use crate::ops::{BinaryOp, ElementwiseOp, UnaryOp};
        use crate::prelude::*;
        // exp(x) * y over [2]
        let instrs = vec![
            Instr { op: ElementwiseOp::Unary(UnaryOp::Exp), args: [Operand::Input(0)].into_iter().collect(), dtype: DType::F64 },
            Instr {
                op: ElementwiseOp::Binary(BinaryOp::Mul),
                args: [Operand::ResultOf(0), Operand::Input(1)].into_iter().collect(),
                dtype: DType::F64,
            },
        ];
        let s = Shape::new(&[2]);
        let p = CompiledProgram::new(&FusedProgram {
            shape: s.clone(),
            inputs: vec![(DType::F64, s.clone()), (DType::F64, s)],
            instrs,
            outputs: vec![1],
        });
        let (x, y) = (Tensor::zeros(&[2], DType::F64).to_storage()?, Tensor::from_vec(vec![3.0f64, 4.0], &[2])?.to_storage()?);
        let out = p.run([Input::Shared(&x), Input::Shared(&y)]);
        assert_eq!(out[0].array::<f64>().unwrap().as_slice().unwrap(), &[3.0, 4.0]);
        Ok(())
    }

    #[test]
    fn scalar_steps_run_as_one_chain() -> crate::error::Result<()> {
        use crate::function::ConcreteFunction;
        use crate::graph::NodeKind;
        use crate::prelude::*;
        let x = Tensor::ones(&[4], DType::F32);
        let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(2.0)?.add(1.0)?.mul(3.0)?.exp()?]))?;
        let NodeKind::Fused(p) = &f.graph().nodes[0].kind else { panic!() };
        assert_eq!((p.instrs.len(), CompiledProgram::new(p).num_kernels()), (4, 2)); // the three scalar ops run as one chain
        Ok(())
    }

    #[test]
    fn the_summary_lists_the_ops() -> crate::error::Result<()> {
        use crate::function::ConcreteFunction;
        use crate::graph::NodeKind;
        use crate::prelude::*;
        let x = Tensor::ones(&[4], DType::F32);
        let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.tanh()?.mul(&x.sigmoid()?)?]))?;
        let NodeKind::Fused(p) = &f.graph().nodes[0].kind else { panic!() };
        assert_eq!(p.summary(), "tanh,sigmoid,mul");
        Ok(())
    }

    #[test]
    fn a_shared_input_is_read_not_taken() -> crate::error::Result<()> {
        use crate::function::ConcreteFunction;
        use crate::graph::NodeKind;
        use crate::kernels::fused::{CompiledProgram, Input};
        use crate::prelude::*;
        let x = Tensor::from_vec(vec![0.0f32, 1.0], &[2])?;
        let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(2.0)?.add(1.0)?]))?;
        let NodeKind::Fused(p) = &f.graph().nodes[0].kind else { panic!() };
        let p = CompiledProgram::new(p);
        let out = p.run([Input::Shared(&x.to_storage()?)]);
        assert_eq!(out[0].array::<f32>().unwrap().as_slice().unwrap(), &[1.0, 3.0]);
        Ok(())
    }

    #[test]
    fn a_run_computes_ranges_in_any_order() -> crate::error::Result<()> {
        use crate::function::ConcreteFunction;
        use crate::graph::NodeKind;
        use crate::kernels::fused::{CompiledProgram, Input};
        use crate::prelude::*;
        let x = Tensor::arange(0.0f32, 10.0);
        let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(2.0)?.neg()?]))?;
        let NodeKind::Fused(p) = &f.graph().nodes[0].kind else { panic!() };
        let p = CompiledProgram::new(p);
        let data = x.to_storage()?;
        let run = p.begin([Input::Shared(&data)]);
        run.range(0, 4); // two blocks, in any order, from any thread
        run.range(4, 6);
        // SAFETY: the two ranges covered all ten positions.
        let out = unsafe { run.finish() };
        assert_eq!(out[0].array::<f32>().unwrap()[[9]], -18.0);
        Ok(())
    }

    #[test]
    fn a_run_finishes_into_its_outputs() -> crate::error::Result<()> {
        use crate::function::ConcreteFunction;
        use crate::graph::NodeKind;
        use crate::kernels::fused::{CompiledProgram, Input};
        use crate::prelude::*;
        let x = Tensor::ones(&[3], DType::F32);
        let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.add(1.0)?.sqrt()?]))?;
        let NodeKind::Fused(p) = &f.graph().nodes[0].kind else { panic!() };
        let p = CompiledProgram::new(p);
        let data = x.to_storage()?;
        let run = p.begin([Input::Shared(&data)]);
        run.range(0, 3);
        // SAFETY: every position was computed.
        assert_eq!(unsafe { run.finish() }[0].len(), 3);
        Ok(())
    }

    #[test]
    fn ranges_run_from_several_threads() -> crate::error::Result<()> {
        use crate::function::ConcreteFunction;
        use crate::graph::NodeKind;
        use crate::kernels::fused::{CompiledProgram, Input};
        use crate::prelude::*;
        let x = Tensor::ones(&[4], DType::F32);
        let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.mul(3.0)?.exp()?]))?;
        let NodeKind::Fused(p) = &f.graph().nodes[0].kind else { panic!() };
        let p = CompiledProgram::new(p);
        let data = x.to_storage()?;
        let run = p.begin([Input::Shared(&data)]);
        std::thread::scope(|s| {
            s.spawn(|| run.range(0, 2)); // disjoint ranges may run at once
            s.spawn(|| run.range(2, 2));
        });
        // SAFETY: both halves were computed.
        let out = unsafe { run.finish() };
        assert_eq!(out[0].len(), 4);
        Ok(())
    }

    #[test]
    fn finish_hands_back_the_outputs() -> crate::error::Result<()> {
        use crate::function::ConcreteFunction;
        use crate::graph::NodeKind;
        use crate::kernels::fused::{CompiledProgram, Input};
        use crate::prelude::*;
        let x = Tensor::ones(&[2], DType::F64);
        let f = ConcreteFunction::trace("f", &[("x", &x)], || Ok(vec![x.exp()?.neg()?]))?;
        let NodeKind::Fused(p) = &f.graph().nodes[0].kind else { panic!() };
        let p = CompiledProgram::new(p);
        let data = x.to_storage()?;
        let run = p.begin([Input::Shared(&data)]);
        run.range(0, 2);
        // SAFETY: the range covered both positions.
        let out = unsafe { run.finish() };
        assert_eq!(out[0].dtype(), DType::F64);
        Ok(())
    }

    use super::*;
    use ndarray::{ArrayD, IxDyn};

    /// `gather_strided` against ndarray's own iteration of the broadcast view, from every
    /// start and length that cuts runs of the innermost dim.
    fn check_gather(a: &ndarray::ArrayViewD<f32>, out_dims: &[usize]) {
        let view = a.broadcast(IxDyn(out_dims)).expect("broadcastable");
        let expected: Vec<f32> = view.iter().copied().collect();
        let strides: SmallVec<[isize; 6]> = SmallVec::from_slice(view.strides());
        for start in [0, 1, 3, out_dims.iter().product::<usize>() / 2] {
            for len in [1, 2, 5, expected.len() - start] {
                let len = len.min(expected.len() - start);
                let mut dst = vec![f32::NAN; len];
                gather_strided(view.as_ptr(), &strides, out_dims, start, &mut dst);
                assert_eq!(dst, expected[start..start + len], "start {start}, len {len}, strides {strides:?}, dims {out_dims:?}");
            }
        }
    }

    #[test]
    fn strided_gathers_copy_broadcast_rows_columns_and_transposes() {
        let data = ArrayD::from_shape_vec(IxDyn(&[3, 4]), (0..12).map(|v| v as f32).collect()).expect("12 values");
        let row = ArrayD::from_shape_vec(IxDyn(&[4]), vec![1.0f32, 2.0, 3.0, 4.0]).expect("4 values");
        let col = ArrayD::from_shape_vec(IxDyn(&[3, 1]), vec![5.0f32, 6.0, 7.0]).expect("3 values");
        check_gather(&row.view(), &[3, 4]); // a bias over rows: inner stride 1
        check_gather(&col.view(), &[3, 4]); // a column broadcast: inner stride 0
        check_gather(&data.t().into_dyn(), &[4, 3]); // a transpose: inner stride 4
        check_gather(&row.view(), &[2, 3, 4]); // broadcast over two outer dims
        check_gather(&col.view().insert_axis(ndarray::Axis(0)), &[2, 3, 4]);
    }

    #[test]
    fn a_dying_input_that_cannot_become_an_output_stays_alive_while_the_program_reads_it() {
        use crate::math::{BinaryOp, ElementwiseOp, ScalarAttr, UnaryOp};
        use crate::storage::Array;
        // The first half of a 4 MiB buffer nothing else holds: a donor candidate, but not
        // reclaimable (its buffer is larger than the output). Its memory was freed before
        // the program read it (a large buffer is unmapped: the read faulted).
        let n = 1 << 19;
        let whole = Array::from_shape_vec(IxDyn(&[2, n]), (0..2 * n).map(|v| v as f32).collect()).expect("2n values");
        let mut half = whole;
        half.slice_axis_inplace(ndarray::Axis(0), ndarray::Slice::from(0..1));
        let half = Storage::F32(half.into_shape_with_order(IxDyn(&[n])).expect("n values"));
        let neg = Instr { op: ElementwiseOp::Unary(UnaryOp::Neg), args: [Operand::Input(0)].into_iter().collect(), dtype: DType::F32 };
        let twice = ElementwiseOp::BinaryScalar { op: BinaryOp::Mul, scalar: ScalarAttr(crate::dtype::Scalar::Float(2.0)), scalar_first: false };
        let double = Instr { op: twice, args: [Operand::Input(0)].into_iter().collect(), dtype: DType::F32 };
        let p = CompiledProgram::new(&FusedProgram {
            shape: Shape::new(&[n]),
            inputs: vec![(DType::F32, Shape::new(&[n]))],
            instrs: vec![neg, double],
            outputs: vec![0, 1],
        });
        let out = p.run([Input::Dying(half)]);
        let (a, b) = (out[0].array::<f32>().expect("f32"), out[1].array::<f32>().expect("f32"));
        assert!((0..n).step_by(997).all(|i| a[[i]] == -(i as f32) && b[[i]] == 2.0 * i as f32));
    }
}
