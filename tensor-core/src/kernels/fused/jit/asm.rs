//! The emitter the templates write through: an x86-64 assembler (iced-x86) behind a small
//! vector instruction set that is the same for both targets — AVX-512 (16 lanes, 32
//! registers, compare results in mask registers) and AVX2 with FMA (8 lanes, 16 registers,
//! compare results as all-ones lanes in a vector register) — plus a pool of vector registers
//! and a pool of f32 constants. A constant is read from a register loaded once before the loop
//! (the most used ones, as many as the program leaves free) or from memory where it is used;
//! both give the same bits.

use iced_x86::code_asm::*;
use std::collections::HashMap;

/// A vector register, by number.
pub(super) type R = u8;

/// Emission stops (and the program runs in the interpreter) when this is `None`: out of
/// registers, or an instruction the assembler refused.
pub(super) type Emit<T> = Option<T>;

/// The instruction set the code is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512 F: 16 f32 lanes.
    Avx512,
    /// AVX2 with FMA: 8 f32 lanes.
    Avx2,
}

impl Isa {
    /// f32 lanes per vector.
    pub fn lanes(self) -> usize {
        match self {
            Isa::Avx512 => 16,
            Isa::Avx2 => 8,
        }
    }

    /// Vector registers.
    pub fn registers(self) -> usize {
        match self {
            Isa::Avx512 => 32,
            Isa::Avx2 => 16,
        }
    }

    /// Bytes per vector.
    pub fn bytes(self) -> i32 {
        4 * self.lanes() as i32
    }
}

/// Bytes per constant in the pool: each is stored as a full AVX-512 vector (16 copies), so
/// either target reads it as one vector operand.
pub(super) const CONST_BYTES: i32 = 64;

const ZMM: [AsmRegisterZmm; 32] = [
    zmm0, zmm1, zmm2, zmm3, zmm4, zmm5, zmm6, zmm7, zmm8, zmm9, zmm10, zmm11, zmm12, zmm13, zmm14, zmm15, zmm16, zmm17, zmm18, zmm19, zmm20, zmm21,
    zmm22, zmm23, zmm24, zmm25, zmm26, zmm27, zmm28, zmm29, zmm30, zmm31,
];
const YMM: [AsmRegisterYmm; 16] = [ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12, ymm13, ymm14, ymm15];
const XMM: [AsmRegisterXmm; 16] = [xmm0, xmm1, xmm2, xmm3, xmm4, xmm5, xmm6, xmm7, xmm8, xmm9, xmm10, xmm11, xmm12, xmm13, xmm14, xmm15];
const K: [AsmRegisterK; 6] = [k1, k2, k3, k4, k5, k6];

/// Where the lane indices 0, 1, 2, ... sit, relative to the pool register: the vector just
/// before the constants (see `Asm::constants`).
const IOTA: i32 = -CONST_BYTES;

fn zr(r: R) -> AsmRegisterZmm {
    ZMM[r as usize]
}

fn yr(r: R) -> AsmRegisterYmm {
    YMM[r as usize]
}

/// `zmm d` written only in the lanes of mask `m` (AVX-512).
fn under_mask(d: R, m: Mask) -> AsmRegisterZmm {
    match m.0 {
        0 => zr(d).k1(),
        1 => zr(d).k2(),
        2 => zr(d).k3(),
        3 => zr(d).k4(),
        4 => zr(d).k5(),
        _ => zr(d).k6(),
    }
}

/// The register holding the frame's pointer table, the first argument of the generated code.
pub(super) const FRAME: AsmRegister64 = rdi;
/// The register holding the constant pool's address (the third argument).
pub(super) const CONSTS: AsmRegister64 = rdx;
/// The byte offset of the current vector within the chunk.
pub(super) const OFFSET: AsmRegister64 = r8;

/// A vector operand: a register, or a constant (by its bits).
#[derive(Clone, Copy, Debug)]
pub(super) enum V {
    Reg(R),
    Const(u32),
}

/// The result of a compare, one flag per lane: a mask register (AVX-512) or a vector
/// register with all-ones lanes (AVX2).
#[derive(Clone, Copy, Debug)]
pub(super) struct Mask(u8);

/// A two-source vector instruction `d = a op b`.
#[derive(Clone, Copy, Debug)]
pub(super) enum Op2 {
    Add,
    Sub,
    Mul,
    Div,
    And,
    Xor,
    /// Integer lanes: `a - b`.
    SubI,
    /// Integer lanes: `a + b`.
    AddI,
}

/// A fused multiply-add `d = d * a + b` (or `-(d * a) + b`), one rounding.
#[derive(Clone, Copy, Debug)]
pub(super) enum Fma {
    MulAdd,
    NegMulAdd,
}

pub(super) struct Asm {
    pub a: CodeAssembler,
    pub isa: Isa,
    free: Vec<R>,
    free_masks: Vec<u8>,
    /// Registers in use at most at once (constants loaded before the loop included).
    pub peak: usize,
    /// The constant pool, as bits.
    pub consts: Vec<u32>,
    /// Constants that live in a register for the whole loop.
    held: HashMap<u32, R>,
    /// How often each constant was asked for.
    pub uses: HashMap<u32, usize>,
}

/// Runs the first expression with `$x` naming the AVX-512 registers (`zmm`), or the second with
/// it naming the AVX2 ones (`ymm`): the same instruction, written once per register type.
macro_rules! by_isa {
    ($e:expr, |$x:ident| $avx512:expr, $avx2:expr) => {
        match $e.isa {
            Isa::Avx512 => {
                let $x = zr;
                $avx512
            }
            Isa::Avx2 => {
                let $x = yr;
                $avx2
            }
        }
    };
}

/// `$m d, a, b` where `b` is a register or a memory operand (`Asm::place`), for either ISA.
macro_rules! three_operands {
    ($e:expr, $m:ident, $d:expr, $a:expr, $b:expr) => {
        match $b {
            Ok(s) => by_isa!($e, |x| $e.a.$m(x($d), x($a), x(s)), $e.a.$m(x($d), x($a), x(s))),
            Err(mem) => by_isa!($e, |x| $e.a.$m(x($d), x($a), mem), $e.a.$m(x($d), x($a), mem)),
        }
    };
}

impl Asm {
    /// An emitter for `isa` whose constants `held` live in the given registers (loaded by
    /// `preload`).
    pub fn new(isa: Isa, held: HashMap<u32, R>) -> Emit<Asm> {
        let taken: Vec<R> = held.values().copied().collect();
        let free: Vec<R> = (0..isa.registers() as u8).rev().filter(|r| !taken.contains(r)).collect();
        let peak = taken.len();
        // k7 is the tail's lane mask; k1..k6 are free for compares.
        let free_masks = (0..6u8).rev().collect();
        Some(Asm { a: CodeAssembler::new(64).ok()?, isa, free, free_masks, peak, consts: Vec::new(), held, uses: HashMap::new() })
    }

    /// Loads the held constants into their registers (before the loop).
    pub fn preload(&mut self) -> Emit<()> {
        let mut held: Vec<(u32, R)> = self.held.iter().map(|(&b, &r)| (b, r)).collect();
        held.sort_unstable();
        for (bits, r) in held {
            let at = self.slot(bits);
            self.load_vec(r, CONSTS + at)?;
        }
        Some(())
    }

    /// A free register.
    pub fn take(&mut self) -> Emit<R> {
        let r = self.free.pop()?;
        self.peak = self.peak.max(self.isa.registers() - self.free.len());
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
        CONST_BYTES * i as i32
    }

    /// The f32 constant `v` as an operand.
    pub fn c(&mut self, v: f32) -> V {
        V::Const(v.to_bits())
    }

    /// Where operand `v` is read: its register, or the constant's register or memory.
    fn place(&mut self, v: V) -> Result<R, AsmMemoryOperand> {
        match v {
            V::Reg(r) => Ok(r),
            V::Const(bits) => {
                *self.uses.entry(bits).or_insert(0) += 1;
                let at = self.slot(bits);
                match self.held.get(&bits) {
                    Some(&r) => Ok(r),
                    None => Err(match self.isa {
                        Isa::Avx512 => zmmword_ptr(CONSTS + at),
                        Isa::Avx2 => ymmword_ptr(CONSTS + at),
                    }),
                }
            }
        }
    }

    /// `r = [mem]`, a whole vector.
    pub fn load_vec(&mut self, r: R, mem: AsmMemoryOperand) -> Emit<()> {
        by_isa!(self, |x| self.a.vmovups(x(r), mem), self.a.vmovups(x(r), mem)).ok()
    }

    /// `[mem] = r`, a whole vector.
    pub fn store_vec(&mut self, mem: AsmMemoryOperand, r: R) -> Emit<()> {
        by_isa!(self, |x| self.a.vmovups(mem, x(r)), self.a.vmovups(mem, x(r))).ok()
    }

    /// `[mem] = r`, a whole vector, by a streaming store: the line is not read into the cache
    /// first (no write-allocate) and not kept there. `mem` must be aligned to the vector's
    /// size; the stores are weakly ordered, so the thread fences before others read them
    /// (`CompiledProgram::run_streaming`).
    pub fn store_streaming(&mut self, mem: AsmMemoryOperand, r: R) -> Emit<()> {
        by_isa!(self, |x| self.a.vmovntps(mem, x(r)), self.a.vmovntps(mem, x(r))).ok()
    }

    /// `r` = the f32 at `mem` in every lane.
    pub fn broadcast(&mut self, r: R, mem: AsmMemoryOperand) -> Emit<()> {
        by_isa!(self, |x| self.a.vbroadcastss(x(r), mem), self.a.vbroadcastss(x(r), mem)).ok()
    }

    /// A new register holding operand `v`.
    pub fn get(&mut self, v: V) -> Emit<R> {
        let r = self.take()?;
        match self.place(v) {
            Ok(s) => by_isa!(self, |x| self.a.vmovaps(x(r), x(s)), self.a.vmovaps(x(r), x(s))).ok()?,
            Err(mem) => self.load_vec(r, mem)?,
        }
        Some(r)
    }

    /// A new register holding the constant `v`.
    pub fn load_c(&mut self, v: f32) -> Emit<R> {
        let c = self.c(v);
        self.get(c)
    }

    /// A new register holding a copy of `x`.
    pub fn copy(&mut self, x: R) -> Emit<R> {
        self.get(V::Reg(x))
    }

    /// `d = a op b`.
    pub fn op2(&mut self, op: Op2, d: R, a: R, b: V) -> Emit<()> {
        let b = self.place(b);
        macro_rules! go {
            ($m:ident) => {
                three_operands!(self, $m, d, a, b)
            };
        }
        match op {
            Op2::Add => go!(vaddps),
            Op2::Sub => go!(vsubps),
            Op2::Mul => go!(vmulps),
            Op2::Div => go!(vdivps),
            Op2::And => go!(vandps),
            Op2::Xor => go!(vxorps),
            Op2::SubI => go!(vpsubd),
            Op2::AddI => go!(vpaddd),
        }
        .ok()
    }

    /// `d = d * a + b` (`-(d * a) + b` for `NegMulAdd`), one rounding.
    pub fn fma(&mut self, op: Fma, d: R, a: R, b: V) -> Emit<()> {
        let b = self.place(b);
        macro_rules! go {
            ($m:ident) => {
                three_operands!(self, $m, d, a, b)
            };
        }
        match op {
            Fma::MulAdd => go!(vfmadd213ps),
            Fma::NegMulAdd => go!(vfnmadd213ps),
        }
        .ok()
    }

    /// `d = sqrt(a)`.
    pub fn sqrt(&mut self, d: R, a: R) -> Emit<()> {
        by_isa!(self, |x| self.a.vsqrtps(x(d), x(a)), self.a.vsqrtps(x(d), x(a))).ok()
    }

    /// `d = a << n` on integer lanes.
    pub fn shift_left(&mut self, d: R, a: R, n: i32) -> Emit<()> {
        by_isa!(self, |x| self.a.vpslld(x(d), x(a), n), self.a.vpslld(x(d), x(a), n)).ok()
    }

    /// A new mask: `a PRED b` per lane.
    pub fn cmp(&mut self, a: R, b: V, pred: i32) -> Emit<Mask> {
        let b = self.place(b);
        match self.isa {
            Isa::Avx512 => {
                let m = self.free_masks.pop()?;
                match b {
                    Ok(s) => self.a.vcmpps(K[m as usize], zr(a), zr(s), pred),
                    Err(mem) => self.a.vcmpps(K[m as usize], zr(a), mem, pred),
                }
                .ok()?;
                Some(Mask(m))
            }
            Isa::Avx2 => {
                let m = self.take()?;
                match b {
                    Ok(s) => self.a.vcmpps(yr(m), yr(a), yr(s), pred),
                    Err(mem) => self.a.vcmpps(yr(m), yr(a), mem, pred),
                }
                .ok()?;
                Some(Mask(m))
            }
        }
    }

    /// Gives a mask back.
    pub fn give_mask(&mut self, m: Mask) {
        match self.isa {
            Isa::Avx512 => self.free_masks.push(m.0),
            Isa::Avx2 => self.give(m.0),
        }
    }

    /// `m = m | other`; `other` is given back.
    pub fn or_masks(&mut self, m: Mask, other: Mask) -> Emit<()> {
        match self.isa {
            Isa::Avx512 => self.a.korw(K[m.0 as usize], K[m.0 as usize], K[other.0 as usize]).ok()?,
            Isa::Avx2 => self.a.vorps(yr(m.0), yr(m.0), yr(other.0)).ok()?,
        }
        self.give_mask(other);
        Some(())
    }

    /// `d = if m { v } else { d }` per lane; the mask is given back.
    pub fn blend(&mut self, d: R, m: Mask, v: V) -> Emit<()> {
        let v = self.place(v);
        match self.isa {
            Isa::Avx512 => {
                let dk = under_mask(d, m);
                match v {
                    Ok(s) => self.a.vblendmps(dk, zr(d), zr(s)),
                    Err(mem) => self.a.vblendmps(dk, zr(d), mem),
                }
                .ok()?
            }
            Isa::Avx2 => match v {
                Ok(s) => self.a.vblendvps(yr(d), yr(d), yr(s), yr(m.0)),
                Err(mem) => self.a.vblendvps(yr(d), yr(d), mem, yr(m.0)),
            }
            .ok()?,
        }
        self.give_mask(m);
        Some(())
    }

    /// `d = if m { x } else { 0 }` per lane; the mask is given back.
    pub fn keep_or_zero(&mut self, d: R, m: Mask, x: R) -> Emit<()> {
        match self.isa {
            Isa::Avx512 => {
                let dk = under_mask(d, m);
                self.a.vmovaps(dk.z(), zr(x)).ok()?
            }
            Isa::Avx2 => self.a.vandps(yr(d), yr(x), yr(m.0)).ok()?,
        }
        self.give_mask(m);
        Some(())
    }

    /// Ends the vector code (clears the upper register halves for SSE code that follows).
    pub fn vzeroupper(&mut self) -> Emit<()> {
        self.a.vzeroupper().ok()
    }

    /// The tail's lane mask for the first `count` lanes (`count` in esi, below the lane
    /// count): k7 for AVX-512; a register from the pool for AVX2 (returned).
    pub fn tail_mask(&mut self) -> Emit<Option<R>> {
        match self.isa {
            Isa::Avx512 => {
                self.a.mov(ecx, esi).ok()?;
                self.a.mov(eax, 1).ok()?;
                self.a.shl(eax, cl).ok()?;
                self.a.dec(eax).ok()?;
                self.a.kmovw(k7, eax).ok()?;
                Some(None)
            }
            Isa::Avx2 => {
                // Lane i is on when count > i.
                let m = self.take()?;
                self.a.vmovd(XMM[m as usize], esi).ok()?;
                self.a.vpbroadcastd(yr(m), XMM[m as usize]).ok()?;
                self.a.vpcmpgtd(yr(m), yr(m), ymmword_ptr(CONSTS + IOTA)).ok()?;
                Some(Some(m))
            }
        }
    }

    /// `r` = the first lanes of `[mem]` (zero elsewhere) under the tail mask.
    pub fn load_masked(&mut self, r: R, mem: AsmMemoryOperand, mask: Option<R>) -> Emit<()> {
        match (self.isa, mask) {
            (Isa::Avx512, _) => self.a.vmovups(zr(r).k7().z(), mem).ok(),
            (Isa::Avx2, Some(m)) => self.a.vmaskmovps(yr(r), yr(m), mem).ok(),
            (Isa::Avx2, None) => None,
        }
    }

    /// `[mem]` = the first lanes of `r` under the tail mask.
    pub fn store_masked(&mut self, mem: AsmMemoryOperand, r: R, mask: Option<R>) -> Emit<()> {
        match (self.isa, mask) {
            (Isa::Avx512, _) => self.a.vmovups(mem.k7(), zr(r)).ok(),
            (Isa::Avx2, Some(m)) => self.a.vmaskmovps(mem, yr(m), yr(r)).ok(),
            (Isa::Avx2, None) => None,
        }
    }

    /// The constant pool as the generated code reads it: the lane indices (one vector, which
    /// the code finds at `IOTA`, just before the pool register's address), then each constant
    /// as a full vector.
    pub fn constants(&self) -> Vec<u32> {
        let mut out: Vec<u32> = (0..16).collect();
        for &c in &self.consts {
            out.extend(std::iter::repeat_n(c, 16));
        }
        out
    }
}
