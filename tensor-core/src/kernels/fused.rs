//! Fused elementwise kernels: a chain or tree of elementwise ops evaluated in one pass over
//! memory, chunk by chunk (a chunk's intermediates stay in L1), with the same scalar
//! functions eager kernels call — so a fused graph gives the bits eager gives.
//!
//! A program's instructions read the program inputs (same shape as the output, a single
//! value, or broadcast) or earlier instructions' results; results that leave the program are
//! written straight into the output buffers.

use super::elementwise::from_vec;
use super::math::{Float, Num};
use super::parallel::par_min_len;
use crate::dtype::{DType, Element, Scalar};
use crate::ops::elementwise::{clamp_value, cmp_fn, CastTo};
use crate::ops::{BinaryOp, Op, UnaryOp};
use crate::shape::Shape;
use crate::storage::{Array, Storage};
use rayon::prelude::*;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::mem::MaybeUninit;

/// A program input: shared (still used later), or owned by the caller and dying here, so its
/// buffer may become an output's.
pub enum Input<'a> {
    Shared(&'a Storage),
    Dying(Storage),
}

/// Elements per chunk: 8 KiB of f64 per register.
pub const FUSED_CHUNK: usize = 1024;

/// Where an instruction's operand comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// Program input `i`.
    Input(usize),
    /// The result of instruction `i`.
    Result(usize),
}

/// One elementwise op of a program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Instr {
    pub op: Op,
    pub args: SmallVec<[Operand; 3]>,
    /// The dtype of the result.
    pub dtype: DType,
}

/// A fused elementwise program over one output shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FusedProgram {
    pub shape: Shape,
    /// The dtype and shape of each input.
    pub inputs: Vec<(DType, Shape)>,
    pub instrs: Vec<Instr>,
    /// The instructions whose results are the program's outputs, in output order.
    pub outputs: Vec<usize>,
    /// The scratch register of each instruction that is not an output (registers are reused
    /// once a result is dead), and how many registers there are.
    regs: Vec<usize>,
    num_regs: usize,
}

impl FusedProgram {
    /// A program; assigns scratch registers.
    pub fn new(shape: Shape, inputs: Vec<(DType, Shape)>, instrs: Vec<Instr>, outputs: Vec<usize>) -> FusedProgram {
        let (regs, num_regs) = assign_registers(&instrs, &outputs);
        FusedProgram { shape, inputs, instrs, outputs, regs, num_regs }
    }

    /// The names of the fused ops, for printing (`mul,add,tanh`).
    pub fn summary(&self) -> String {
        let names: Vec<&str> = self.instrs.iter().map(|i| i.op.name()).collect();
        if names.len() <= 8 {
            names.join(",")
        } else {
            format!("{} ... {} ({} ops)", names[..4].join(","), names[names.len() - 2..].join(","), names.len())
        }
    }

    /// Runs the program; an output takes over the buffer of a dying input of its dtype and
    /// size when nothing else holds it.
    pub fn run(&self, inputs: Vec<Input>) -> Vec<Storage> {
        let n = self.shape.numel();
        let mut keep: Vec<Storage> = Vec::new();
        let mut outs: Vec<OutBuf> = Vec::with_capacity(self.outputs.len());
        let mut sources: Vec<Source> = Vec::with_capacity(inputs.len());
        let mut aliased = vec![false; inputs.len()];
        let mut dying: Vec<Option<Storage>> = Vec::new();
        for input in inputs {
            match input {
                Input::Shared(s) => {
                    sources.push(Source::new(s, &self.shape));
                    dying.push(None);
                }
                Input::Dying(s) => {
                    sources.push(Source::new(&s, &self.shape));
                    dying.push(Some(s));
                }
            }
        }
        for &k in &self.outputs {
            let dtype = self.instrs[k].dtype;
            let donor =
                (0..sources.len()).find(|&i| dying[i].as_ref().is_some_and(|s| s.dtype() == dtype && s.len() == n) && sources[i].is_direct_slice());
            let reused = donor.and_then(|i| OutBuf::reclaim(dying[i].take().expect("checked"), n).map(|b| (i, b)));
            match reused {
                Some((i, buf)) => {
                    aliased[i] = true;
                    outs.push(buf);
                }
                None => outs.push(OutBuf::new(dtype, n)),
            }
        }
        keep.extend(dying.into_iter().flatten());
        let chunks = n.div_ceil(FUSED_CHUNK);
        let run_chunk = |c: usize| {
            let start = c * FUSED_CHUNK;
            let len = FUSED_CHUNK.min(n - start);
            SCRATCH.with(|s| self.run_chunk(&mut s.borrow_mut(), &sources, &aliased, &outs, start, len));
        };
        if n >= par_min_len() {
            (0..chunks).into_par_iter().for_each(run_chunk);
        } else {
            (0..chunks).for_each(run_chunk);
        }
        drop(keep);
        // SAFETY: every chunk wrote every element of every output.
        outs.into_iter().map(|o| unsafe { o.finish(self.shape.dims()) }).collect()
    }

    fn run_chunk(&self, scratch: &mut Scratch, sources: &[Source], aliased: &[bool], outs: &[OutBuf], start: usize, len: usize) {
        scratch.prepare(self, sources.len());
        // Inputs that are not plain slices (broadcast, strided, or aliased by an output) are
        // copied into scratch first.
        for (i, src) in sources.iter().enumerate() {
            if aliased[i] || !src.is_direct() {
                scratch.load_input(i, src, start, len);
            }
        }
        for (k, instr) in self.instrs.iter().enumerate() {
            let args: SmallVec<[Arg; 3]> = instr.args.iter().map(|a| self.arg(*a, scratch, sources, aliased, outs, start, len)).collect();
            let dst = match self.outputs.iter().position(|&o| o == k) {
                // SAFETY: each chunk writes only its own range of each output buffer.
                Some(j) => unsafe { outs[j].chunk_mut(start, len) },
                None => scratch.reg_mut(instr.dtype, self.regs[k], len),
            };
            eval(instr, &args, dst);
        }
    }

    /// Resolves an operand to a slice (or single value) for this chunk.
    #[allow(clippy::too_many_arguments)]
    fn arg<'a>(
        &self,
        a: Operand,
        scratch: &'a Scratch,
        sources: &'a [Source],
        aliased: &[bool],
        outs: &'a [OutBuf],
        start: usize,
        len: usize,
    ) -> Arg<'a> {
        match a {
            Operand::Input(i) if sources[i].is_scalar() => sources[i].scalar(),
            Operand::Input(i) if aliased[i] || !sources[i].is_direct() => scratch.input(i, sources[i].dtype(), len),
            Operand::Input(i) => sources[i].direct(start, len),
            Operand::Result(k) => match self.outputs.iter().position(|&o| o == k) {
                // SAFETY: the chunk reads back what it wrote to its own range.
                Some(j) => unsafe { outs[j].chunk(start, len) },
                None => scratch.reg(self.instrs[k].dtype, self.regs[k], len),
            },
        }
    }
}

/// Linear-scan register assignment: a result's register is free after its last use.
fn assign_registers(instrs: &[Instr], outputs: &[usize]) -> (Vec<usize>, usize) {
    let mut last_use = vec![0usize; instrs.len()];
    for (k, instr) in instrs.iter().enumerate() {
        for a in &instr.args {
            if let Operand::Result(r) = a {
                last_use[*r] = k;
            }
        }
    }
    let mut regs = vec![usize::MAX; instrs.len()];
    let mut free: Vec<usize> = Vec::new();
    let mut count = 0;
    for k in 0..instrs.len() {
        // Registers of results whose last use was before this instruction are free again.
        for j in 0..k {
            if regs[j] != usize::MAX && last_use[j] + 1 == k && !outputs.contains(&j) {
                free.push(regs[j]);
            }
        }
        if !outputs.contains(&k) {
            regs[k] = free.pop().unwrap_or_else(|| {
                count += 1;
                count - 1
            });
        }
    }
    (regs, count)
}

// -------------------------------------------------------------------------- typed chunk views

/// A typed, read-only operand for one chunk.
#[derive(Clone, Copy)]
enum Arg<'a> {
    F32(Val<'a, f32>),
    F64(Val<'a, f64>),
    I32(Val<'a, i32>),
    I64(Val<'a, i64>),
    Bool(Val<'a, bool>),
}

/// A chunk of values, or one value for every position.
#[derive(Clone, Copy)]
enum Val<'a, T> {
    Slice(&'a [T]),
    Splat(T),
}

/// A typed destination chunk (written before it is read).
enum Dst<'a> {
    F32(&'a mut [MaybeUninit<f32>]),
    F64(&'a mut [MaybeUninit<f64>]),
    I32(&'a mut [MaybeUninit<i32>]),
    I64(&'a mut [MaybeUninit<i64>]),
    Bool(&'a mut [MaybeUninit<bool>]),
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
    Strided { strides: Vec<isize>, dims: Vec<usize> },
}

impl Source {
    fn new(s: &Storage, shape: &Shape) -> Source {
        let (ptr, kind) = crate::with_array!(s, a => {
            let kind = if a.len() == 1 {
                SourceKind::Scalar
            } else if a.shape() == shape.dims() && a.is_standard_layout() {
                SourceKind::Direct
            } else {
                let view = a.broadcast(ndarray::IxDyn(shape.dims())).expect("shapes checked when fusing");
                SourceKind::Strided { strides: view.strides().to_vec(), dims: shape.dims().to_vec() }
            };
            (a.as_ptr() as *const u8, kind)
        });
        Source { dtype: s.dtype(), ptr, kind }
    }

    fn dtype(&self) -> DType {
        self.dtype
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

    fn scalar(&self) -> Arg<'_> {
        // SAFETY: a scalar source points at one live element of its dtype.
        unsafe {
            match self.dtype {
                DType::F32 => Arg::F32(Val::Splat(*(self.ptr as *const f32))),
                DType::F64 => Arg::F64(Val::Splat(*(self.ptr as *const f64))),
                DType::I32 => Arg::I32(Val::Splat(*(self.ptr as *const i32))),
                DType::I64 => Arg::I64(Val::Splat(*(self.ptr as *const i64))),
                DType::Bool => Arg::Bool(Val::Splat(*(self.ptr as *const bool))),
            }
        }
    }

    fn direct(&self, start: usize, len: usize) -> Arg<'_> {
        // SAFETY: a direct source is a live standard-layout buffer of the output's length.
        unsafe {
            match self.dtype {
                DType::F32 => Arg::F32(Val::Slice(std::slice::from_raw_parts((self.ptr as *const f32).add(start), len))),
                DType::F64 => Arg::F64(Val::Slice(std::slice::from_raw_parts((self.ptr as *const f64).add(start), len))),
                DType::I32 => Arg::I32(Val::Slice(std::slice::from_raw_parts((self.ptr as *const i32).add(start), len))),
                DType::I64 => Arg::I64(Val::Slice(std::slice::from_raw_parts((self.ptr as *const i64).add(start), len))),
                DType::Bool => Arg::Bool(Val::Slice(std::slice::from_raw_parts((self.ptr as *const bool).add(start), len))),
            }
        }
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
/// broadcast) into `dst`, walking the multi-index incrementally.
fn gather_strided<T: Copy>(base: *const T, strides: &[isize], dims: &[usize], start: usize, dst: &mut [T]) {
    let rank = dims.len();
    let mut idx = vec![0usize; rank];
    let mut rem = start;
    for d in (0..rank).rev() {
        idx[d] = rem % dims[d];
        rem /= dims[d];
    }
    let mut offset: isize = idx.iter().zip(strides).map(|(&i, &s)| i as isize * s).sum();
    for slot in dst.iter_mut() {
        // SAFETY: offset is a valid element offset of the broadcast view the strides came from.
        *slot = unsafe { *base.offset(offset) };
        for d in (0..rank).rev() {
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

/// An output buffer being filled chunk by chunk, possibly from several threads.
enum OutBuf {
    F32(Vec<MaybeUninit<f32>>),
    F64(Vec<MaybeUninit<f64>>),
    I32(Vec<MaybeUninit<i32>>),
    I64(Vec<MaybeUninit<i64>>),
    Bool(Vec<MaybeUninit<bool>>),
}

// SAFETY: chunks write disjoint ranges (see chunk_mut) and read back only their own range.
unsafe impl Sync for OutBuf {}

fn uninit<T>(n: usize) -> Vec<MaybeUninit<T>> {
    let mut v = Vec::with_capacity(n);
    // SAFETY: MaybeUninit needs no initialization.
    unsafe { v.set_len(n) };
    v
}

/// The buffer of a uniquely held, standard-layout array of `n` elements, as writable memory.
fn reclaim_vec<T>(a: Array<T>, n: usize) -> Option<Vec<MaybeUninit<T>>> {
    let owned = a.try_into_owned_nocopy().ok()?;
    if !owned.is_standard_layout() {
        return None;
    }
    let (v, offset) = owned.into_raw_vec_and_offset();
    if offset.unwrap_or(0) != 0 || v.len() != n {
        return None;
    }
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: same allocation, element type wrapped in MaybeUninit (same layout).
    Some(unsafe { Vec::from_raw_parts(v.as_mut_ptr() as *mut MaybeUninit<T>, v.len(), v.capacity()) })
}

/// A finished buffer as an array.
///
/// # Safety
/// Every element must have been written.
unsafe fn assume_init<T>(v: Vec<MaybeUninit<T>>, dims: &[usize]) -> Array<T> {
    let mut v = std::mem::ManuallyDrop::new(v);
    from_vec(dims, Vec::from_raw_parts(v.as_mut_ptr() as *mut T, v.len(), v.capacity()))
}

impl OutBuf {
    fn new(dtype: DType, n: usize) -> OutBuf {
        match dtype {
            DType::F32 => OutBuf::F32(uninit(n)),
            DType::F64 => OutBuf::F64(uninit(n)),
            DType::I32 => OutBuf::I32(uninit(n)),
            DType::I64 => OutBuf::I64(uninit(n)),
            DType::Bool => OutBuf::Bool(uninit(n)),
        }
    }

    /// The buffer of a dying input, if nothing else holds it.
    fn reclaim(s: Storage, n: usize) -> Option<OutBuf> {
        match s {
            Storage::F32(a) => reclaim_vec(a, n).map(OutBuf::F32),
            Storage::F64(a) => reclaim_vec(a, n).map(OutBuf::F64),
            Storage::I32(a) => reclaim_vec(a, n).map(OutBuf::I32),
            Storage::I64(a) => reclaim_vec(a, n).map(OutBuf::I64),
            Storage::Bool(a) => reclaim_vec(a, n).map(OutBuf::Bool),
        }
    }

    /// A mutable view of `start..start + len`.
    ///
    /// # Safety
    /// No other live reference may cover the same range (each chunk owns its range).
    unsafe fn chunk_mut(&self, start: usize, len: usize) -> Dst<'_> {
        macro_rules! part {
            ($v:ident, $vec:expr) => {
                Dst::$v(std::slice::from_raw_parts_mut(($vec.as_ptr() as *mut MaybeUninit<_>).add(start), len))
            };
        }
        match self {
            OutBuf::F32(v) => part!(F32, v),
            OutBuf::F64(v) => part!(F64, v),
            OutBuf::I32(v) => part!(I32, v),
            OutBuf::I64(v) => part!(I64, v),
            OutBuf::Bool(v) => part!(Bool, v),
        }
    }

    /// A shared view of `start..start + len`.
    ///
    /// # Safety
    /// Only the chunk that owns the range may read it, after writing it.
    unsafe fn chunk(&self, start: usize, len: usize) -> Arg<'_> {
        macro_rules! part {
            ($v:ident, $vec:expr, $t:ty) => {
                Arg::$v(Val::Slice(std::slice::from_raw_parts(($vec.as_ptr() as *const $t).add(start), len)))
            };
        }
        match self {
            OutBuf::F32(v) => part!(F32, v, f32),
            OutBuf::F64(v) => part!(F64, v, f64),
            OutBuf::I32(v) => part!(I32, v, i32),
            OutBuf::I64(v) => part!(I64, v, i64),
            OutBuf::Bool(v) => part!(Bool, v, bool),
        }
    }

    /// # Safety
    /// Every element must have been written.
    unsafe fn finish(self, dims: &[usize]) -> Storage {
        match self {
            OutBuf::F32(v) => Storage::F32(assume_init(v, dims)),
            OutBuf::F64(v) => Storage::F64(assume_init(v, dims)),
            OutBuf::I32(v) => Storage::I32(assume_init(v, dims)),
            OutBuf::I64(v) => Storage::I64(assume_init(v, dims)),
            OutBuf::Bool(v) => Storage::Bool(assume_init(v, dims)),
        }
    }
}

// ------------------------------------------------------------------------------- the scratch

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Per-thread registers, reused across chunks, calls and programs.
#[derive(Default)]
struct Scratch {
    f32: Vec<Vec<f32>>,
    f64: Vec<Vec<f64>>,
    i32: Vec<Vec<i32>>,
    i64: Vec<Vec<i64>>,
    bool: Vec<Vec<bool>>,
    /// Copied inputs: one register per input and dtype.
    inputs: Vec<Vec<u64>>,
}

fn ensure<T: Default + Clone>(v: &mut Vec<Vec<T>>, count: usize) {
    if v.len() < count {
        v.resize_with(count, || vec![T::default(); FUSED_CHUNK]);
    }
}

impl Scratch {
    fn prepare(&mut self, p: &FusedProgram, inputs: usize) {
        ensure(&mut self.f32, p.num_regs);
        ensure(&mut self.f64, p.num_regs);
        ensure(&mut self.i32, p.num_regs);
        ensure(&mut self.i64, p.num_regs);
        ensure(&mut self.bool, p.num_regs);
        ensure(&mut self.inputs, inputs);
    }

    fn reg_mut(&self, dtype: DType, r: usize, len: usize) -> Dst<'_> {
        // SAFETY: within one instruction the destination register differs from every operand
        // register (a register is reused only after its last read), so this mutable view does
        // not overlap a live shared one.
        unsafe {
            macro_rules! part {
                ($v:ident, $f:ident) => {
                    Dst::$v(std::slice::from_raw_parts_mut(self.$f[r].as_ptr() as *mut MaybeUninit<_>, len))
                };
            }
            match dtype {
                DType::F32 => part!(F32, f32),
                DType::F64 => part!(F64, f64),
                DType::I32 => part!(I32, i32),
                DType::I64 => part!(I64, i64),
                DType::Bool => part!(Bool, bool),
            }
        }
    }

    fn reg(&self, dtype: DType, r: usize, len: usize) -> Arg<'_> {
        match dtype {
            DType::F32 => Arg::F32(Val::Slice(&self.f32[r][..len])),
            DType::F64 => Arg::F64(Val::Slice(&self.f64[r][..len])),
            DType::I32 => Arg::I32(Val::Slice(&self.i32[r][..len])),
            DType::I64 => Arg::I64(Val::Slice(&self.i64[r][..len])),
            DType::Bool => Arg::Bool(Val::Slice(&self.bool[r][..len])),
        }
    }

    /// The copied input `i`, viewed as its dtype.
    fn input(&self, i: usize, dtype: DType, len: usize) -> Arg<'_> {
        let p = self.inputs[i].as_ptr();
        // SAFETY: the register holds FUSED_CHUNK u64s (8 bytes each), enough for `len` values
        // of any element type, and u64 alignment suits them all; load_input wrote them.
        unsafe {
            match dtype {
                DType::F32 => Arg::F32(Val::Slice(std::slice::from_raw_parts(p as *const f32, len))),
                DType::F64 => Arg::F64(Val::Slice(std::slice::from_raw_parts(p as *const f64, len))),
                DType::I32 => Arg::I32(Val::Slice(std::slice::from_raw_parts(p as *const i32, len))),
                DType::I64 => Arg::I64(Val::Slice(std::slice::from_raw_parts(p as *const i64, len))),
                DType::Bool => Arg::Bool(Val::Slice(std::slice::from_raw_parts(p as *const bool, len))),
            }
        }
    }

    fn load_input(&mut self, i: usize, src: &Source, start: usize, len: usize) {
        let p = self.inputs[i].as_mut_ptr();
        // SAFETY: as in `input`: the register is large and aligned enough for `len` values.
        unsafe {
            match src.dtype {
                DType::F32 => src.gather(start, std::slice::from_raw_parts_mut(p as *mut f32, len)),
                DType::F64 => src.gather(start, std::slice::from_raw_parts_mut(p as *mut f64, len)),
                DType::I32 => src.gather(start, std::slice::from_raw_parts_mut(p as *mut i32, len)),
                DType::I64 => src.gather(start, std::slice::from_raw_parts_mut(p as *mut i64, len)),
                DType::Bool => src.gather(start, std::slice::from_raw_parts_mut(p as *mut bool, len)),
            }
        }
    }
}

// ----------------------------------------------------------------------- instruction kernels

type Out<T> = [MaybeUninit<T>];

#[inline(always)]
fn map_into<T: Copy, U>(a: Val<T>, d: &mut Out<U>, f: impl Fn(T) -> U) {
    match a {
        Val::Slice(s) => d.iter_mut().zip(s).for_each(|(o, &x)| {
            o.write(f(x));
        }),
        Val::Splat(x) => d.iter_mut().for_each(|o| {
            o.write(f(x));
        }),
    }
}

#[inline(always)]
fn zip_into<T: Copy, U>(a: Val<T>, b: Val<T>, d: &mut Out<U>, f: impl Fn(T, T) -> U) {
    match (a, b) {
        (Val::Slice(x), Val::Slice(y)) => d.iter_mut().zip(x).zip(y).for_each(|((o, &p), &q)| {
            o.write(f(p, q));
        }),
        (Val::Slice(x), Val::Splat(q)) => map_into(Val::Slice(x), d, |p| f(p, q)),
        (Val::Splat(p), Val::Slice(y)) => map_into(Val::Slice(y), d, |q| f(p, q)),
        (Val::Splat(p), Val::Splat(q)) => map_into(Val::Splat(p), d, |p| f(p, q)),
    }
}

fn select_into<T: Copy>(c: Val<bool>, a: Val<T>, b: Val<T>, d: &mut Out<T>) {
    let at = |v: Val<T>, i: usize| match v {
        Val::Slice(s) => s[i],
        Val::Splat(x) => x,
    };
    let cond = |i: usize| match c {
        Val::Slice(cs) => cs[i],
        Val::Splat(c) => c,
    };
    d.iter_mut().enumerate().for_each(|(i, o)| {
        o.write(if cond(i) { at(a, i) } else { at(b, i) });
    });
}

fn float_unary<T: Float>(u: UnaryOp, a: Val<T>, d: &mut Out<T>) {
    match u {
        UnaryOp::Neg => map_into(a, d, T::neg),
        UnaryOp::Exp => map_into(a, d, T::exp),
        UnaryOp::Log => map_into(a, d, T::ln),
        UnaryOp::Sqrt => map_into(a, d, T::sqrt),
        UnaryOp::Tanh => map_into(a, d, T::tanh),
        UnaryOp::Sigmoid => map_into(a, d, T::sigmoid),
        UnaryOp::Relu => map_into(a, d, T::relu),
        UnaryOp::Abs => map_into(a, d, T::abs),
        UnaryOp::Sign => map_into(a, d, T::sign),
        UnaryOp::Not => unreachable!("bool only"),
    }
}

fn int_unary<T: Num>(u: UnaryOp, a: Val<T>, d: &mut Out<T>) {
    match u {
        UnaryOp::Neg => map_into(a, d, T::neg),
        UnaryOp::Relu => map_into(a, d, T::relu),
        UnaryOp::Abs => map_into(a, d, T::abs),
        UnaryOp::Sign => map_into(a, d, T::sign),
        _ => unreachable!("float-only op on an integer"),
    }
}

fn binary<T: Num>(b: BinaryOp, x: Val<T>, y: Val<T>, d: &mut Out<T>) {
    match b {
        BinaryOp::Add => zip_into(x, y, d, T::add),
        BinaryOp::Sub => zip_into(x, y, d, T::sub),
        BinaryOp::Mul => zip_into(x, y, d, T::mul),
        BinaryOp::Div => zip_into(x, y, d, T::div),
        BinaryOp::Pow => zip_into(x, y, d, T::pow),
        BinaryOp::Maximum => zip_into(x, y, d, T::maximum),
        BinaryOp::Minimum => zip_into(x, y, d, T::minimum),
    }
}

fn scalar_side<T: Num>(b: BinaryOp, x: Val<T>, s: Scalar, first: bool, d: &mut Out<T>) {
    let s = Val::Splat(T::from_scalar(s));
    if first {
        binary(b, s, x, d)
    } else {
        binary(b, x, s, d)
    }
}

fn clamp<T: Num>(x: Val<T>, lo: Option<Scalar>, hi: Option<Scalar>, d: &mut Out<T>) {
    let (lo, hi) = (lo.map(T::from_scalar), hi.map(T::from_scalar));
    map_into(x, d, |v| clamp_value(v, lo, hi))
}

fn compare<T: Element>(c: crate::ops::CmpOp, x: Val<T>, y: Val<T>, d: &mut Out<bool>) {
    zip_into(x, y, d, cmp_fn::<T>(c))
}

/// Evaluates one instruction into `dst`.
fn eval(instr: &Instr, args: &[Arg], dst: Dst) {
    use Arg as A;
    use Dst as D;
    match (&instr.op, dst) {
        (Op::Unary(UnaryOp::Not), D::Bool(d)) => match args[0] {
            A::Bool(a) => map_into(a, d, |v: bool| !v),
            _ => unreachable!("typed when fused"),
        },
        (Op::Unary(u), dst) => match (args[0], dst) {
            (A::F32(a), D::F32(d)) => float_unary(*u, a, d),
            (A::F64(a), D::F64(d)) => float_unary(*u, a, d),
            (A::I32(a), D::I32(d)) => int_unary(*u, a, d),
            (A::I64(a), D::I64(d)) => int_unary(*u, a, d),
            _ => unreachable!("typed when fused"),
        },
        (Op::Binary(b), dst) => match (args[0], args[1], dst) {
            (A::F32(x), A::F32(y), D::F32(d)) => binary(*b, x, y, d),
            (A::F64(x), A::F64(y), D::F64(d)) => binary(*b, x, y, d),
            (A::I32(x), A::I32(y), D::I32(d)) => binary(*b, x, y, d),
            (A::I64(x), A::I64(y), D::I64(d)) => binary(*b, x, y, d),
            _ => unreachable!("typed when fused"),
        },
        (Op::BinaryScalar { op, scalar, scalar_first }, dst) => match (args[0], dst) {
            (A::F32(x), D::F32(d)) => scalar_side(*op, x, scalar.0, *scalar_first, d),
            (A::F64(x), D::F64(d)) => scalar_side(*op, x, scalar.0, *scalar_first, d),
            (A::I32(x), D::I32(d)) => scalar_side(*op, x, scalar.0, *scalar_first, d),
            (A::I64(x), D::I64(d)) => scalar_side(*op, x, scalar.0, *scalar_first, d),
            _ => unreachable!("typed when fused"),
        },
        (Op::Clamp { min, max }, dst) => {
            let (lo, hi) = (min.map(|s| s.0), max.map(|s| s.0));
            match (args[0], dst) {
                (A::F32(x), D::F32(d)) => clamp(x, lo, hi, d),
                (A::F64(x), D::F64(d)) => clamp(x, lo, hi, d),
                (A::I32(x), D::I32(d)) => clamp(x, lo, hi, d),
                (A::I64(x), D::I64(d)) => clamp(x, lo, hi, d),
                _ => unreachable!("typed when fused"),
            }
        }
        (Op::Compare(c), D::Bool(d)) => match (args[0], args[1]) {
            (A::F32(x), A::F32(y)) => compare(*c, x, y, d),
            (A::F64(x), A::F64(y)) => compare(*c, x, y, d),
            (A::I32(x), A::I32(y)) => compare(*c, x, y, d),
            (A::I64(x), A::I64(y)) => compare(*c, x, y, d),
            (A::Bool(x), A::Bool(y)) => compare(*c, x, y, d),
            _ => unreachable!("typed when fused"),
        },
        (Op::CompareScalar { op, scalar }, D::Bool(d)) => match args[0] {
            A::F32(x) => compare(*op, x, Val::Splat(f32::from_scalar(scalar.0)), d),
            A::F64(x) => compare(*op, x, Val::Splat(f64::from_scalar(scalar.0)), d),
            A::I32(x) => compare(*op, x, Val::Splat(i32::from_scalar(scalar.0)), d),
            A::I64(x) => compare(*op, x, Val::Splat(i64::from_scalar(scalar.0)), d),
            A::Bool(x) => compare(*op, x, Val::Splat(bool::from_scalar(scalar.0)), d),
        },
        (Op::Where, dst) => {
            let A::Bool(c) = args[0] else { unreachable!("typed when fused") };
            match (args[1], args[2], dst) {
                (A::F32(x), A::F32(y), D::F32(d)) => select_into(c, x, y, d),
                (A::F64(x), A::F64(y), D::F64(d)) => select_into(c, x, y, d),
                (A::I32(x), A::I32(y), D::I32(d)) => select_into(c, x, y, d),
                (A::I64(x), A::I64(y), D::I64(d)) => select_into(c, x, y, d),
                (A::Bool(x), A::Bool(y), D::Bool(d)) => select_into(c, x, y, d),
                _ => unreachable!("typed when fused"),
            }
        }
        (Op::Cast(_), dst) => cast_arg(args[0], dst),
        (op, _) => unreachable!("not an elementwise op: {op:?}"),
    }
}

fn cast_arg(a: Arg, dst: Dst) {
    macro_rules! to {
        ($val:expr) => {
            match dst {
                Dst::F32(d) => cast_val($val, d),
                Dst::F64(d) => cast_val($val, d),
                Dst::I32(d) => cast_val($val, d),
                Dst::I64(d) => cast_val($val, d),
                Dst::Bool(d) => cast_val($val, d),
            }
        };
    }
    match a {
        Arg::F32(v) => to!(v),
        Arg::F64(v) => to!(v),
        Arg::I32(v) => to!(v),
        Arg::I64(v) => to!(v),
        Arg::Bool(v) => to!(v),
    }
}

fn cast_val<T: Copy + CastTo<U>, U: Copy>(v: Val<T>, d: &mut Out<U>) {
    map_into(v, d, CastTo::cast_to)
}
