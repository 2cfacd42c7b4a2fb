//! Runs of scalar ops fused further: `x * a + b`, repeated. In a fused program each instruction
//! is one call over a chunk, which for a tiny tensor costs more than its arithmetic. A run of
//! instructions that each combine the previous result with an immediate (`+ - * /` by a
//! scalar, either side), with no other reader of the intermediate results, becomes one kernel
//! that keeps a block of values in registers and applies every step to it. Each step is the
//! `Num` function the eager kernel calls (or its `_plain` form, the same bits for a scalar
//! that is not NaN), one rounding per op, in the same order — so the bits do not change.

use super::compiled::{self, Kernel, KernelFn, Mode, Src, IMM};
use super::{Instr, Operand};
use crate::dtype::DType;
use crate::math::Num;
use crate::math::{BinaryOp, ElementwiseOp};

/// One step: `x op imm` (or `imm op x` when `imm_first`), the immediate as the bits of `T`.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    op: BinaryOp,
    imm_first: bool,
    imm: u64,
}

/// Values per block: one AVX2 register of f32.
const BLOCK: usize = 8;

/// The scalar step of instruction `instr`, if it is one a chain can hold. A NaN scalar is
/// left to the general loops: a chain's `+` and `*` skip the choice between two NaNs
/// (`Num::add_plain`).
pub fn step_of(instr: &Instr) -> Option<Step> {
    match &instr.op {
        ElementwiseOp::BinaryScalar { op, scalar, scalar_first }
            if matches!(op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div) && !scalar.0.as_f64().is_nan() =>
        {
            Some(Step { op: *op, imm_first: *scalar_first, imm: compiled::imm_bits(scalar.0, instr.dtype) })
        }
        _ => None,
    }
}

/// The kernel of a chain: reads `src`, writes `dst`, applies `steps` (kept alive by the
/// program, which owns the boxed slice).
pub fn kernel(dtype: DType, src: Src, dst: u16, steps: &[Step]) -> Option<Kernel> {
    if src.mode != Mode::Slice {
        return None;
    }
    let run: KernelFn = match dtype {
        DType::F32 => compiled::chain::<f32>(),
        DType::F64 => compiled::chain::<f64>(),
        DType::I32 => compiled::chain::<i32>(),
        DType::I64 => compiled::chain::<i64>(),
        DType::Bool => return None,
    };
    Some(Kernel { run, srcs: [src.slot, IMM, IMM], dst, imm: [0; 3], flags: 0, chain: (steps.as_ptr(), steps.len()) })
}

/// The runs of chainable instructions: `(first, last)` index pairs, each at least two long,
/// where every instruction but the last feeds only the next one and is not an output.
pub fn runs(instrs: &[Instr], outputs: &[usize]) -> Vec<(usize, usize)> {
    let mut readers = vec![0usize; instrs.len()];
    for i in instrs {
        for a in &i.args {
            if let Operand::ResultOf(r) = a {
                readers[*r] += 1;
            }
        }
    }
    let links = |k: usize| -> bool {
        // Instruction k + 1 continues the run ending at k.
        k + 1 < instrs.len()
            && step_of(&instrs[k + 1]).is_some()
            && instrs[k + 1].args[0] == Operand::ResultOf(k)
            && readers[k] == 1
            && !outputs.contains(&k)
            && instrs[k + 1].dtype == instrs[k].dtype
    };
    let mut out = Vec::new();
    let mut k = 0;
    while k < instrs.len() {
        if step_of(&instrs[k]).is_some() {
            let first = k;
            while links(k) {
                k += 1;
            }
            if k > first {
                out.push((first, k));
            }
        }
        k += 1;
    }
    out
}

#[inline(always)]
fn apply<T: Num>(x: T, s: &Step, c: T) -> T {
    let (a, b) = if s.imm_first { (c, x) } else { (x, c) };
    match s.op {
        BinaryOp::Add => a.add_plain(b),
        BinaryOp::Sub => a.sub(b),
        BinaryOp::Mul => a.mul_plain(b),
        BinaryOp::Div => a.div(b),
        _ => unreachable!("only + - * / are chained"),
    }
}

/// The immediate of a step as a `T`.
#[inline(always)]
fn imm<T: Copy>(s: &Step) -> T {
    // SAFETY: `imm` holds the bytes of a `T` (at most 8) at its start, written by `imm_bits`.
    unsafe { std::ptr::read_unaligned(&s.imm as *const u64 as *const T) }
}

/// # Safety
/// As every kernel: the frame holds `len` values of `T` at the source and destination slots,
/// and `k.chain` points to live steps. The destination may be the source's register (the
/// register of the run's first input dies inside the run): each block is read whole before it
/// is written, through raw pointers, so no reference ever covers both.
#[inline(always)]
pub(super) unsafe fn chain_body<T: Num>(k: &Kernel, p: *const *mut u8, len: usize) {
    unsafe {
        let src = k.src(p, 0) as *const T;
        let dst = *p.add(k.dst as usize) as *mut T;
        let steps = std::slice::from_raw_parts(k.chain.0, k.chain.1);
        // Long chunks go in wide blocks, so each step's branch is paid once per many values;
        // tiny tensors in one-register blocks, so no work is wasted on padding.
        let wide = len - len % WIDE;
        blocks::<T, WIDE>(src, dst, 0, wide, steps);
        blocks::<T, BLOCK>(src, dst, wide, len, steps);
    }
}

/// Values per block of long chunks: eight AVX2 registers of f32.
const WIDE: usize = 64;

/// Applies the steps to `[start, end)` in blocks of `B` values (the last one may be short).
///
/// # Safety
/// `src` and `dst` must be valid for reads and writes of `end` values of `T` (they may be
/// the same buffer: each block is read whole before it is written).
#[inline(always)]
unsafe fn blocks<T: Num, const B: usize>(src: *const T, dst: *mut T, mut start: usize, end: usize, steps: &[Step]) {
    unsafe {
        while start < end {
            let n = B.min(end - start);
            // A full block is copied with a constant length (a few vector moves, not a memcpy call).
            let mut block = if n == B { std::ptr::read_unaligned(src.add(start) as *const [T; B]) } else { [T::zero(); B] };
            if n < B {
                std::ptr::copy_nonoverlapping(src.add(start), block.as_mut_ptr(), n);
            }
            for step in steps {
                let c = imm::<T>(step);
                // One op over the whole block: vector instructions, the branch taken once.
                match (step.op, step.imm_first) {
                    (BinaryOp::Add, false) => block.iter_mut().for_each(|x| *x = x.add_plain(c)),
                    (BinaryOp::Mul, false) => block.iter_mut().for_each(|x| *x = x.mul_plain(c)),
                    _ => block.iter_mut().for_each(|x| *x = apply(*x, step, c)),
                }
            }
            if n == B {
                std::ptr::write_unaligned(dst.add(start) as *mut [T; B], block);
            } else {
                std::ptr::copy_nonoverlapping(block.as_ptr(), dst.add(start), n);
            }
            start += n;
        }
    }
}
