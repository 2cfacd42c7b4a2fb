//! Code generation for fused programs: one machine-code loop per program, in which every
//! intermediate result stays in a vector register, instead of one pass over the chunk per
//! instruction. Built when the program is, on x86-64 CPUs with AVX-512 (16 f32 lanes, 32
//! registers), for programs over f32 whose every op has a template (`ops`); any other program,
//! CPU or SIMD level runs in the interpreter (`compiled`), which stays the reference.
//!
//! Same bits by construction: the templates perform each scalar function's IEEE operations in
//! its order, one instruction each (`mul_add` is one `vfmadd`; nothing is contracted or
//! reassociated), so a lane computes exactly what the eager loop computes for that element.
//! The tests compare the generated code with the interpreter bit for bit, NaNs included.
//!
//! The generated function takes the chunk's frame (the interpreter's table of pointers:
//! inputs, registers, outputs), the chunk length and the constant pool. It walks the chunk
//! 16 lanes at a time; the last, partial vector is read and written under a lane mask, so no
//! lane outside the chunk is touched. (Only that vector: masked loads and stores in the main
//! loop made W2 2x slower on AMD Zen 4.)

mod asm;
mod ops;
#[cfg(test)]
mod tests;

use super::compiled::{imm_bits, Mode, Src as Operand};
use super::{Instr, Operand as Arg};
use crate::dtype::DType;
use crate::kernels::simd::{level, Level};
use crate::math::ElementwiseOp;
pub(crate) use asm::Isa;
use asm::{Asm, Emit, FRAME, OFFSET, R};
use iced_x86::code_asm::*;
use std::collections::HashMap;

/// The generated code: `(frame, len, constants)`.
type JitFn = unsafe extern "sysv64" fn(*const *mut u8, usize, *const u32);

/// A fused program compiled to one loop.
pub(crate) struct Jit {
    /// The executable mapping that holds the code (kept alive for `run`).
    _code: memmap2::Mmap,
    entry: JitFn,
    consts: Box<[u32]>,
    /// The instruction set of the code.
    #[cfg_attr(not(test), allow(dead_code))] // read by the tests of both paths
    pub(crate) isa: Isa,
    /// Whether the code writes its outputs with streaming stores.
    pub(crate) streams: bool,
}

impl Jit {
    /// The loop for the program, or `None` when it has no generated form here (another
    /// dtype, an op without a template, the baseline SIMD level). `srcs` are the operands as
    /// the interpreter reads them; `out_slot(j)` is output `j`'s frame slot. With `streams`,
    /// whole vectors of the outputs are written with streaming stores where the chunk allows
    /// (see `Program::streaming_loop`); a program too long for that gets the plain loop.
    pub(super) fn compile(
        instrs: &[Instr],
        srcs: &[smallvec::SmallVec<[Operand; 3]>],
        outputs: &[usize],
        out_slot: impl Fn(usize) -> usize,
        streams: bool,
    ) -> Option<Jit> {
        let isa = Self::isa()?;
        let streaming = || Self::compile_for(isa, instrs, srcs, outputs, &out_slot, true);
        streams.then(streaming).flatten().or_else(|| Self::compile_for(isa, instrs, srcs, outputs, &out_slot, false))
    }

    /// The instruction set generated code uses at the current SIMD level, if any.
    pub(crate) fn isa() -> Option<Isa> {
        #[cfg(test)]
        if let Some(isa) = tests::FORCED_ISA.get() {
            return Some(isa);
        }
        match level() {
            Level::Avx512 => Some(Isa::Avx512),
            Level::Avx2 => Some(Isa::Avx2),
            Level::Baseline => None,
        }
    }

    /// [`compile`](Self::compile) for a given instruction set, which the CPU must have.
    pub(super) fn compile_for(
        isa: Isa,
        instrs: &[Instr],
        srcs: &[smallvec::SmallVec<[Operand; 3]>],
        outputs: &[usize],
        out_slot: impl Fn(usize) -> usize,
        streams: bool,
    ) -> Option<Jit> {
        if !instrs.iter().all(supported) {
            return None;
        }
        if srcs.iter().flatten().any(|s| s.dtype != DType::F32) {
            return None;
        }
        let program = Program { instrs, srcs, outputs, out_slot: &out_slot, streams };
        // A first pass counts registers and constant uses; the second keeps the most used
        // constants in the registers the program leaves free.
        let dry = program.emit(isa, HashMap::new())?;
        let top = isa.registers() - 1;
        let spare = top.saturating_sub(dry.peak);
        let mut by_use: Vec<(u32, usize)> = dry.uses.into_iter().collect();
        by_use.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let held: HashMap<u32, R> = by_use.iter().take(spare).enumerate().map(|(i, &(bits, _))| (bits, (top - i) as R)).collect();
        let mut e = program.emit(isa, held)?;
        Jit::load(&mut e, streams)
    }

    /// Assembles `e` (which `streams`, or not) into executable memory.
    fn load(e: &mut Asm, streams: bool) -> Option<Jit> {
        let len = 4096 * 4;
        let mut map = memmap2::MmapMut::map_anon(len).ok()?;
        let code = e.a.assemble(map.as_ptr() as u64).ok()?;
        if code.len() > len {
            return None;
        }
        map[..code.len()].copy_from_slice(&code);
        let map = map.make_exec().ok()?;
        // SAFETY: the mapping holds the function just assembled for this address, with the
        // System V calling convention `JitFn` names; it lives as long as `Jit`.
        let entry: JitFn = unsafe { std::mem::transmute::<*const u8, JitFn>(map.as_ptr()) };
        Some(Jit { _code: map, entry, consts: e.constants().into_boxed_slice(), isa: e.isa, streams })
    }

    /// Runs the loop over one chunk.
    ///
    /// # Safety
    /// `frame` must be the chunk's frame as the interpreter's kernels receive it (a pointer
    /// for each slot the program reads or writes, to `len` f32 values — one value for an
    /// operand read as a value), with outputs that overlap no input, but for an output that
    /// is exactly an input read at or before the output's instruction (each input is loaded
    /// once per vector, at its first use; each output stored as soon as it is computed; see
    /// `CompiledProgram::writes_in_place`). Code that streams must
    /// be followed by a store fence on this thread before another thread reads the outputs.
    pub(super) unsafe fn run(&self, frame: *const *mut u8, len: usize) {
        // SAFETY: the code reads and writes only through the frame's pointers, within `len`
        // elements (the last vector under a lane mask), and the CPU has AVX-512 (checked when
        // compiling).
        // The pool register points past the lane indices (see `Asm::constants`).
        unsafe { (self.entry)(frame, len, self.consts.as_ptr().add(16)) }
    }
}

/// True when `i` has a template.
fn supported(i: &Instr) -> bool {
    let nan_free = |s: &crate::math::ScalarAttr| !s.0.as_f64().is_nan();
    i.dtype == DType::F32
        && match &i.op {
            ElementwiseOp::Unary(u) => ops::unary_supported(*u),
            ElementwiseOp::Binary(b) => ops::binary_supported(*b),
            ElementwiseOp::BinaryScalar { op, scalar, .. } => ops::binary_supported(*op) && nan_free(scalar),
            ElementwiseOp::Clamp { min, max } => min.iter().chain(max).all(nan_free),
            _ => false,
        }
}

struct Program<'a, F: Fn(usize) -> usize> {
    instrs: &'a [Instr],
    srcs: &'a [smallvec::SmallVec<[Operand; 3]>],
    outputs: &'a [usize],
    out_slot: &'a F,
    /// Whole vectors of the outputs are written with streaming stores where the chunk allows.
    streams: bool,
}

impl<F: Fn(usize) -> usize> Program<'_, F> {
    /// The whole function: prologue, the loop over whole vectors (first the streaming one,
    /// when the program streams and the chunk allows), the last partial vector under a lane
    /// mask, epilogue.
    fn emit(&self, isa: Isa, held: HashMap<u32, R>) -> Emit<Asm> {
        let mut e = Asm::new(isa, held)?;
        e.preload()?;
        let mut top = e.a.create_label();
        let mut tail = e.a.create_label();
        let mut done = e.a.create_label();
        let lanes = isa.lanes() as i32;
        // rsi: elements left; r8: the byte offset of the current vector.
        e.a.xor(OFFSET, OFFSET).ok()?;
        if self.streams {
            self.streaming_loop(&mut e, top, tail)?;
        }
        e.a.set_label(&mut top).ok()?;
        e.a.cmp(rsi, lanes).ok()?;
        e.a.jb(tail).ok()?;
        self.body(&mut e, None, false)?;
        e.a.add(OFFSET, isa.bytes()).ok()?;
        e.a.sub(rsi, lanes).ok()?;
        e.a.jmp(top).ok()?;
        e.a.set_label(&mut tail).ok()?;
        e.a.test(rsi, rsi).ok()?;
        e.a.jz(done).ok()?;
        let mask = e.tail_mask()?;
        self.body(&mut e, Some(mask), false)?;
        e.a.set_label(&mut done).ok()?;
        e.vzeroupper()?;
        e.a.ret().ok()?;
        Some(e)
    }

    /// The loop with streaming stores, which need addresses aligned to the vector's size.
    /// It runs when every output's chunk has the same offset from that alignment and the chunk
    /// holds two vectors or more: the lanes before the first aligned address run under a mask
    /// with ordinary stores, then whole vectors with streaming stores, leaving the last partial
    /// vector to `tail`. Otherwise it jumps to the plain loop at `plain`.
    fn streaming_loop(&self, e: &mut Asm, plain: CodeLabel, tail: CodeLabel) -> Emit<()> {
        let (lanes, bytes) = (e.isa.lanes() as i32, e.isa.bytes());
        let mut top = e.a.create_label();
        let slot = |j: usize| qword_ptr(FRAME + 8 * (self.out_slot)(j) as i32);
        e.a.mov(r9, slot(0)).ok()?;
        for j in 1..self.outputs.len() {
            e.a.mov(r10, slot(j)).ok()?;
            e.a.xor(r10, r9).ok()?;
            e.a.test(r10, bytes - 1).ok()?;
            e.a.jnz(plain).ok()?;
        }
        e.a.cmp(rsi, 2 * lanes).ok()?;
        e.a.jb(plain).ok()?;
        // r9: the lanes before the first aligned address (f32 outputs are 4-byte aligned).
        e.a.neg(r9).ok()?;
        e.a.and(r9, bytes - 1).ok()?;
        e.a.shr(r9, 2).ok()?;
        e.a.test(r9, r9).ok()?;
        e.a.jz(top).ok()?;
        e.a.mov(r10, rsi).ok()?;
        e.a.mov(rsi, r9).ok()?;
        let mask = e.tail_mask()?;
        self.body(e, Some(mask), false)?;
        if let Some(m) = mask {
            e.give(m);
        }
        e.a.lea(OFFSET, ptr(r9 * 4)).ok()?;
        e.a.sub(r10, r9).ok()?;
        e.a.mov(rsi, r10).ok()?;
        e.a.set_label(&mut top).ok()?;
        e.a.cmp(rsi, lanes).ok()?;
        e.a.jb(tail).ok()?;
        self.body(e, None, true)?;
        e.a.add(OFFSET, bytes).ok()?;
        e.a.sub(rsi, lanes).ok()?;
        e.a.jmp(top).ok()?;
        Some(())
    }

    /// One vector of every instruction: operands loaded on first use, results kept in
    /// registers until their last use, outputs stored as soon as they are computed.
    /// `tail`: the partial vector's lane mask (`Some(None)` for AVX-512's k7); `streaming`:
    /// whole vectors are stored with streaming stores (to aligned addresses).
    fn body(&self, e: &mut Asm, tail: Option<Option<R>>, streaming: bool) -> Emit<()> {
        let n = self.instrs.len();
        let mut last_use = vec![0usize; n];
        let mut slot_last: HashMap<u16, usize> = HashMap::new();
        for (k, s) in self.srcs.iter().enumerate() {
            for (a, src) in self.instrs[k].args.iter().zip(s) {
                match a {
                    Arg::ResultOf(r) => last_use[*r] = k,
                    Arg::Input(_) => {
                        slot_last.insert(src.slot, k);
                    }
                }
            }
        }
        let mut result: Vec<Option<R>> = vec![None; n];
        let mut loaded: HashMap<u16, R> = HashMap::new();
        for (k, instr) in self.instrs.iter().enumerate() {
            let mut args: smallvec::SmallVec<[R; 3]> = smallvec::SmallVec::new();
            for (a, src) in instr.args.iter().zip(&self.srcs[k]) {
                let r = match a {
                    Arg::ResultOf(j) => result[*j]?,
                    Arg::Input(_) => match loaded.get(&src.slot) {
                        Some(&r) => r,
                        None => {
                            let r = load(e, src, tail)?;
                            loaded.insert(src.slot, r);
                            r
                        }
                    },
                };
                args.push(r);
            }
            let d = self.op(e, instr, &args)?;
            for (j, _) in self.outputs.iter().enumerate().filter(|(_, o)| **o == k) {
                e.a.mov(rax, qword_ptr(FRAME + 8 * (self.out_slot)(j) as i32)).ok()?;
                match tail {
                    Some(mask) => e.store_masked(ptr(rax + OFFSET), d, mask)?,
                    None if streaming => e.store_streaming(ptr(rax + OFFSET), d)?,
                    None => e.store_vec(ptr(rax + OFFSET), d)?,
                }
            }
            // Free what this instruction read for the last time, then the result if unread.
            for (a, src) in instr.args.iter().zip(&self.srcs[k]) {
                match a {
                    Arg::ResultOf(j) if last_use[*j] == k => {
                        if let Some(r) = result[*j].take() {
                            e.give(r);
                        }
                    }
                    Arg::Input(_) if slot_last.get(&src.slot) == Some(&k) => {
                        if let Some(r) = loaded.remove(&src.slot) {
                            e.give(r);
                        }
                    }
                    _ => {}
                }
            }
            if last_use[k] > k {
                result[k] = Some(d);
            } else {
                e.give(d);
            }
        }
        Some(())
    }

    /// The template of `instr` on its operand registers.
    fn op(&self, e: &mut Asm, instr: &Instr, args: &[R]) -> Emit<R> {
        let f32_of = |s: &crate::math::ScalarAttr| f32::from_bits(imm_bits(s.0, DType::F32) as u32);
        match &instr.op {
            ElementwiseOp::Unary(u) => ops::unary(e, *u, args[0]),
            ElementwiseOp::Binary(b) => ops::binary(e, *b, args[0], args[1]),
            ElementwiseOp::BinaryScalar { op, scalar, scalar_first } => {
                let s = e.load_c(f32_of(scalar))?;
                let d = if *scalar_first { ops::binary(e, *op, s, args[0]) } else { ops::binary(e, *op, args[0], s) };
                e.give(s);
                d
            }
            ElementwiseOp::Clamp { min, max } => ops::clamp(e, args[0], min.as_ref().map(f32_of), max.as_ref().map(f32_of)),
            _ => None,
        }
    }
}

/// Loads an input operand's current vector (the tail's lanes only, under its mask), or its
/// one value in every lane.
fn load(e: &mut Asm, src: &Operand, tail: Option<Option<R>>) -> Emit<R> {
    let r = e.take()?;
    e.a.mov(rax, qword_ptr(FRAME + 8 * src.slot as i32)).ok()?;
    match (src.mode, tail) {
        (Mode::Slice, Some(mask)) => e.load_masked(r, ptr(rax + OFFSET), mask)?,
        (Mode::Slice, None) => e.load_vec(r, ptr(rax + OFFSET))?,
        (Mode::Value, _) => e.broadcast(r, dword_ptr(rax))?,
    }
    Some(r)
}
