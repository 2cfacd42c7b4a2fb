//! The emitter the templates write through: an x86-64 assembler (iced-x86), a pool of the 32
//! AVX-512 vector registers, and a pool of f32 constants. A constant is read either from a
//! register loaded once before the loop (the most used ones, as many as the program leaves
//! free) or broadcast from memory where it is used; both give the same bits.

use iced_x86::code_asm::*;
use std::collections::HashMap;

/// A vector register, by number (`zmm0`..`zmm31`).
pub(super) type R = u8;

/// Emission stops (and the program runs in the interpreter) when this is `None`: out of
/// registers, or an instruction the assembler refused.
pub(super) type Emit<T> = Option<T>;

const ZMM: [AsmRegisterZmm; 32] = [
    zmm0, zmm1, zmm2, zmm3, zmm4, zmm5, zmm6, zmm7, zmm8, zmm9, zmm10, zmm11, zmm12, zmm13, zmm14, zmm15, zmm16, zmm17, zmm18, zmm19, zmm20, zmm21,
    zmm22, zmm23, zmm24, zmm25, zmm26, zmm27, zmm28, zmm29, zmm30, zmm31,
];

/// The register `r`.
pub(super) fn z(r: R) -> AsmRegisterZmm {
    ZMM[r as usize]
}

/// Where a constant operand is read from.
pub(super) enum Src {
    Reg(AsmRegisterZmm),
    Mem(AsmMemoryOperand),
}

/// Applies one assembler method to a constant operand, whichever form it has (the two forms
/// are different operand types, so the call is written once per form).
macro_rules! with_src {
    ($src:expr, |$s:ident| $call:expr) => {
        match $src {
            $crate::kernels::fused::jit::asm::Src::Reg($s) => $call,
            $crate::kernels::fused::jit::asm::Src::Mem($s) => $call,
        }
    };
}
pub(super) use with_src;

/// The register holding the frame's pointer table, the first argument of the generated code.
pub(super) const FRAME: AsmRegister64 = rdi;
/// The register holding the constant pool's address (the third argument).
pub(super) const CONSTS: AsmRegister64 = rdx;
/// The byte offset of the current vector within the chunk.
pub(super) const OFFSET: AsmRegister64 = r8;

pub(super) struct Asm {
    pub a: CodeAssembler,
    free: Vec<R>,
    /// Registers in use at most at once (constants loaded before the loop included).
    pub peak: usize,
    /// The constant pool, as bits.
    pub consts: Vec<u32>,
    /// Constants that live in a register for the whole loop.
    held: HashMap<u32, R>,
    /// How often each constant was asked for.
    pub uses: HashMap<u32, usize>,
}

impl Asm {
    /// An emitter whose constants `held` live in the given registers (loaded by `preload`).
    pub fn new(held: HashMap<u32, R>) -> Emit<Asm> {
        let taken: Vec<R> = held.values().copied().collect();
        let free: Vec<R> = (0..32u8).rev().filter(|r| !taken.contains(r)).collect();
        let peak = taken.len();
        Some(Asm { a: CodeAssembler::new(64).ok()?, free, peak, consts: Vec::new(), held, uses: HashMap::new() })
    }

    /// Loads the held constants into their registers (before the loop).
    pub fn preload(&mut self) -> Emit<()> {
        let mut held: Vec<(u32, R)> = self.held.iter().map(|(&b, &r)| (b, r)).collect();
        held.sort_unstable();
        for (bits, r) in held {
            let at = self.slot(bits);
            self.a.vbroadcastss(z(r), dword_ptr(CONSTS + at)).ok()?;
        }
        Some(())
    }

    /// A free register.
    pub fn take(&mut self) -> Emit<R> {
        let r = self.free.pop()?;
        self.peak = self.peak.max(32 - self.free.len());
        Some(r)
    }

    /// Gives `r` back.
    pub fn give(&mut self, r: R) {
        debug_assert!(!self.free.contains(&r));
        self.free.push(r);
    }

    /// The byte offset of constant `bits` in the pool.
    fn slot(&mut self, bits: u32) -> i32 {
        let i = match self.consts.iter().position(|&c| c == bits) {
            Some(i) => i,
            None => {
                self.consts.push(bits);
                self.consts.len() - 1
            }
        };
        4 * i as i32
    }

    /// The f32 constant `v` as an operand.
    pub fn c(&mut self, v: f32) -> Src {
        self.bits(v.to_bits())
    }

    /// The constant with bit pattern `bits` as an operand.
    pub fn bits(&mut self, bits: u32) -> Src {
        *self.uses.entry(bits).or_insert(0) += 1;
        let at = self.slot(bits);
        match self.held.get(&bits) {
            Some(&r) => Src::Reg(z(r)),
            None => Src::Mem(dword_bcst(CONSTS + at)),
        }
    }

    /// A new register holding `v` in every lane.
    pub fn load_c(&mut self, v: f32) -> Emit<R> {
        let r = self.take()?;
        match self.c(v) {
            Src::Reg(held) => self.a.vmovaps(z(r), held).ok()?,
            Src::Mem(_) => {
                let at = self.slot(v.to_bits());
                self.a.vbroadcastss(z(r), dword_ptr(CONSTS + at)).ok()?
            }
        }
        Some(r)
    }

    /// A new register holding a copy of `x`.
    pub fn copy(&mut self, x: R) -> Emit<R> {
        let r = self.take()?;
        self.a.vmovaps(z(r), z(x)).ok()?;
        Some(r)
    }
}
