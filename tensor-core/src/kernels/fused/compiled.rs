//! Each instruction of a fused program compiled, once, to a monomorphized loop: a function
//! pointer chosen by the op, the dtypes, whether each operand is a chunk of values or one
//! value, and the CPU (a baseline, an AVX2+FMA and an AVX-512 build of every loop). A chunk then only fills a
//! table of pointers and calls one function per instruction, so even tiny tensors pay a few
//! nanoseconds per op. The loops call the same scalar functions as the eager kernels.

use crate::dtype::{DType, Scalar};
use crate::math::{clamp_value, AddPlain, Cast, CastToAll, ElementwiseOp, Fn1, Fn2, MulPlain, Neg, Num, Visit1, Visit2};
use crate::storage::Element;
use std::mem::MaybeUninit;

/// The frame slot an operand reads when its value is the kernel's own immediate.
pub const IMM: u16 = u16::MAX;

/// A loop over one chunk: the kernel, the frame's pointer table, the chunk length.
pub type KernelFn = unsafe fn(&Kernel, *const *mut u8, usize);

/// A compiled instruction.
pub struct Kernel {
    pub run: KernelFn,
    /// Frame slots of the operands (`IMM`: the immediate of that position).
    pub srcs: [u16; 3],
    pub dst: u16,
    /// Immediates (scalar operands, clamp bounds) as the bits of the operand's type.
    pub imm: [u64; 3],
    /// For clamp: whether a lower (bit 0) and an upper (bit 1) bound are set.
    pub flags: u8,
    /// For a chain of scalar ops (`chain.rs`): its steps, owned by the program.
    pub chain: (*const super::chain::Step, usize),
}

// SAFETY: a kernel is immutable data plus a function pointer — and, for a chain, a pointer
// to its steps: a boxed slice owned by the same `CompiledProgram` as the kernel, never mutated
// and never moved while the program lives (it is boxed once when the program is built). Any
// thread holding the kernel holds the program, so the steps are alive and shared read-only.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Kernel {
    /// Where operand `i` is: a frame slot, or this kernel's immediate.
    ///
    /// # Safety
    /// `p` must point to the frame's table, with an entry for every slot this kernel names.
    #[inline(always)]
    pub(super) unsafe fn src(&self, p: *const *mut u8, i: usize) -> *const u8 {
        unsafe {
            match self.srcs[i] {
                IMM => self.imm.as_ptr().add(i) as *const u8,
                s => *p.add(s as usize),
            }
        }
    }

    /// The destination chunk. The slice borrows the frame behind `p`, not `self`; the frame
    /// gives each kernel's destination to one writer at a time.
    ///
    /// # Safety
    /// `p`'s entry for `self.dst` must point to room for `len` values of `U` that nothing
    /// else reads or writes while the slice lives.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    unsafe fn dst<U>(&self, p: *const *mut u8, len: usize) -> &mut [MaybeUninit<U>] {
        unsafe { std::slice::from_raw_parts_mut(*p.add(self.dst as usize) as *mut MaybeUninit<U>, len) }
    }
}

/// How an operand is read: a chunk of values, or one value for every position.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Slice,
    Value,
}

// ---------------------------------------------------------------------------- the loops

/// `dst[i] = F(a[i])` over a chunk.
///
/// # Safety
/// `p` must be the run's frame: a table of chunk pointers, one per slot, where every slot
/// `k` reads holds at least `len` values of the operand's type (or one value, for an operand
/// read as one value), and `k.dst`'s slot has room for `len` values of the result type that
/// nothing else reads or writes while this runs. Immediates are the bits of the operand's type.
#[inline(always)]
unsafe fn map1_body<T: Copy, U, F: Fn1<T, U>, const SLICE: bool>(k: &Kernel, p: *const *mut u8, len: usize) {
    unsafe {
        let a = k.src(p, 0) as *const T;
        let d = k.dst::<U>(p, len);
        if SLICE {
            let a = std::slice::from_raw_parts(a, len);
            for (o, &x) in d.iter_mut().zip(a) {
                o.write(F::f(x));
            }
        } else {
            let x = *a;
            d.iter_mut().for_each(|o| {
                o.write(F::f(x));
            });
        }
    }
}

/// `dst[i] = F(a[i], b[i])` over a chunk.
///
/// # Safety
/// `p` must be the run's frame: a table of chunk pointers, one per slot, where every slot
/// `k` reads holds at least `len` values of the operand's type (or one value, for an operand
/// read as one value), and `k.dst`'s slot has room for `len` values of the result type that
/// nothing else reads or writes while this runs. Immediates are the bits of the operand's type.
#[inline(always)]
unsafe fn map2_body<T: Copy, U, F: Fn2<T, U>, const A: bool, const B: bool>(k: &Kernel, p: *const *mut u8, len: usize) {
    unsafe {
        let (a, b) = (k.src(p, 0) as *const T, k.src(p, 1) as *const T);
        let d = k.dst::<U>(p, len);
        match (A, B) {
            (true, true) => {
                let (a, b) = (std::slice::from_raw_parts(a, len), std::slice::from_raw_parts(b, len));
                for ((o, &x), &y) in d.iter_mut().zip(a).zip(b) {
                    o.write(F::f(x, y));
                }
            }
            (true, false) => {
                let (a, y) = (std::slice::from_raw_parts(a, len), *b);
                for (o, &x) in d.iter_mut().zip(a) {
                    o.write(F::f(x, y));
                }
            }
            (false, true) => {
                let (x, b) = (*a, std::slice::from_raw_parts(b, len));
                for (o, &y) in d.iter_mut().zip(b) {
                    o.write(F::f(x, y));
                }
            }
            (false, false) => {
                let (x, y) = (*a, *b);
                d.iter_mut().for_each(|o| {
                    o.write(F::f(x, y));
                });
            }
        }
    }
}

/// `dst[i] = clamp(a[i], lo, hi)` over a chunk, the bounds as immediates (`flags` says which).
///
/// # Safety
/// `p` must be the run's frame: a table of chunk pointers, one per slot, where every slot
/// `k` reads holds at least `len` values of the operand's type (or one value, for an operand
/// read as one value), and `k.dst`'s slot has room for `len` values of the result type that
/// nothing else reads or writes while this runs. Immediates are the bits of the operand's type.
#[inline(always)]
unsafe fn clamp_body<T: Num, const SLICE: bool>(k: &Kernel, p: *const *mut u8, len: usize) {
    unsafe {
        let lo = (k.flags & 1 != 0).then(|| *(k.imm.as_ptr().add(1) as *const T));
        let hi = (k.flags & 2 != 0).then(|| *(k.imm.as_ptr().add(2) as *const T));
        let a = k.src(p, 0) as *const T;
        let d = k.dst::<T>(p, len);
        if SLICE {
            for (o, &x) in d.iter_mut().zip(std::slice::from_raw_parts(a, len)) {
                o.write(clamp_value(x, lo, hi));
            }
        } else {
            let v = clamp_value(*a, lo, hi);
            d.iter_mut().for_each(|o| {
                o.write(v);
            });
        }
    }
}

/// `where`: operand modes checked per element (rare enough not to specialize).
///
/// # Safety
/// `p` must be the run's frame: a table of chunk pointers, one per slot, where every slot
/// `k` reads holds at least `len` values of the operand's type (or one value, for an operand
/// read as one value), and `k.dst`'s slot has room for `len` values of the result type that
/// nothing else reads or writes while this runs. Immediates are the bits of the operand's type.
#[inline(always)]
unsafe fn select_body<T: Copy>(k: &Kernel, p: *const *mut u8, len: usize) {
    unsafe {
        let (c, a, b) = (k.src(p, 0) as *const bool, k.src(p, 1) as *const T, k.src(p, 2) as *const T);
        let step = |i: usize, slice: bool| if slice { i } else { 0 };
        let modes = k.flags;
        let d = k.dst::<T>(p, len);
        for (i, o) in d.iter_mut().enumerate() {
            let pick = *c.add(step(i, modes & 1 != 0));
            o.write(if pick { *a.add(step(i, modes & 2 != 0)) } else { *b.add(step(i, modes & 4 != 0)) });
        }
    }
}

/// Three builds of each loop: the baseline, AVX2 with FMA, and AVX-512 (the same bits: see
/// `simd`). Each build has its body's safety contract; the AVX builds also need a CPU with
/// their features, which `pick!` checks (`simd::level`) before choosing one.
macro_rules! builds {
    ($base:ident, $avx2:ident, $avx512:ident, $body:ident, <$($g:ident $(: $b:path)?),*>, <$(const $c:ident),*>) => {
        unsafe fn $base<$($g $(: $b)?,)* $(const $c: bool),*>(k: &Kernel, p: *const *mut u8, len: usize) { unsafe {
            $body::<$($g,)* $($c),*>(k, p, len)
        }}
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $avx2<$($g $(: $b)?,)* $(const $c: bool),*>(k: &Kernel, p: *const *mut u8, len: usize) { unsafe {
            $body::<$($g,)* $($c),*>(k, p, len)
        }}
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
        unsafe fn $avx512<$($g $(: $b)?,)* $(const $c: bool),*>(k: &Kernel, p: *const *mut u8, len: usize) { unsafe {
            $body::<$($g,)* $($c),*>(k, p, len)
        }}
    };
}
builds!(map1_base, map1_avx2, map1_avx512, map1_body, <T: Copy, U, F: Fn1<T, U>>, <const SLICE>);
builds!(map2_base, map2_avx2, map2_avx512, map2_body, <T: Copy, U, F: Fn2<T, U>>, <const A, const B>);
builds!(clamp_base, clamp_avx2, clamp_avx512, clamp_body, <T: Num>, <const SLICE>);
builds!(select_base, select_avx2, select_avx512, select_body, <T: Copy>, <>);
builds!(chain_base, chain_avx2, chain_avx512, chain_body, <T: Num>, <>);

/// The build of a loop for the CPU's level (chosen when the program is built).
macro_rules! pick {
    ($base:ident, $avx2:ident, $avx512:ident, [$($t:ty),*], [$($c:tt),*]) => {{
        #[cfg(target_arch = "x86_64")]
        {
            match crate::kernels::simd::level() {
                crate::kernels::simd::Level::Avx512 => $avx512::<$($t,)* $({ $c }),*> as KernelFn,
                crate::kernels::simd::Level::Avx2 => $avx2::<$($t,)* $({ $c }),*> as KernelFn,
                crate::kernels::simd::Level::Baseline => $base::<$($t,)* $({ $c }),*> as KernelFn,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $base::<$($t,)* $({ $c }),*> as KernelFn
        }
    }};
}

/// The loop of a chain of scalar ops on `T`.
pub(super) fn chain<T: Num + 'static>() -> KernelFn {
    pick!(chain_base, chain_avx2, chain_avx512, [T], [])
}

use super::chain::chain_body;

fn map1<T: Copy + 'static, U: 'static, F: Fn1<T, U> + 'static>(slice: bool) -> KernelFn {
    if slice {
        pick!(map1_base, map1_avx2, map1_avx512, [T, U, F], [true])
    } else {
        pick!(map1_base, map1_avx2, map1_avx512, [T, U, F], [false])
    }
}

fn map2<T: Copy + 'static, U: 'static, F: Fn2<T, U> + 'static>(a: bool, b: bool) -> KernelFn {
    match (a, b) {
        (true, true) => pick!(map2_base, map2_avx2, map2_avx512, [T, U, F], [true, true]),
        (true, false) => pick!(map2_base, map2_avx2, map2_avx512, [T, U, F], [true, false]),
        (false, true) => pick!(map2_base, map2_avx2, map2_avx512, [T, U, F], [false, true]),
        (false, false) => pick!(map2_base, map2_avx2, map2_avx512, [T, U, F], [false, false]),
    }
}

// ------------------------------------------------------------------------ instruction choice

/// An operand as compiled: its frame slot (or the immediate) and how it is read.
#[derive(Clone, Copy, Debug)]
pub struct Src {
    pub slot: u16,
    pub mode: Mode,
    pub dtype: DType,
}

/// The bits of `s` converted to `dtype`, as an immediate.
pub(super) fn imm_bits(s: Scalar, dtype: DType) -> u64 {
    fn bits<T: Element>(s: Scalar) -> u64 {
        let mut out = 0u64;
        let v = T::from_scalar(s);
        // SAFETY: T is at most 8 bytes; this copies its bytes into the start of `out`.
        unsafe { std::ptr::copy_nonoverlapping(&v as *const T as *const u8, &mut out as *mut u64 as *mut u8, std::mem::size_of::<T>()) };
        out
    }
    match dtype {
        DType::F32 => bits::<f32>(s),
        DType::F64 => bits::<f64>(s),
        DType::I32 => bits::<i32>(s),
        DType::I64 => bits::<i64>(s),
        DType::Bool => bits::<bool>(s),
    }
}

macro_rules! by_float {
    ($dtype:expr, $f:ident, $($arg:expr),*) => {
        match $dtype {
            DType::F32 => $f::<f32>($($arg),*),
            DType::F64 => $f::<f64>($($arg),*),
            d => unreachable!("float op on {d}"),
        }
    };
}

macro_rules! by_num {
    ($dtype:expr, $f:ident, $($arg:expr),*) => {
        match $dtype {
            DType::F32 => $f::<f32>($($arg),*),
            DType::F64 => $f::<f64>($($arg),*),
            DType::I32 => $f::<i32>($($arg),*),
            DType::I64 => $f::<i64>($($arg),*),
            DType::Bool => unreachable!("numeric op on bool"),
        }
    };
}

macro_rules! by_any {
    ($dtype:expr, $f:ident, $($arg:expr),*) => {
        match $dtype {
            DType::F32 => $f::<f32>($($arg),*),
            DType::F64 => $f::<f64>($($arg),*),
            DType::I32 => $f::<i32>($($arg),*),
            DType::I64 => $f::<i64>($($arg),*),
            DType::Bool => $f::<bool>($($arg),*),
        }
    };
}

/// Builds a kernel for the function the table picks, reading its operand as a chunk or one
/// value.
struct Loop1(bool);

impl<T: Copy + 'static, U: 'static> Visit1<T, U> for Loop1 {
    type Out = KernelFn;
    fn visit<F: Fn1<T, U> + 'static>(self) -> KernelFn {
        map1::<T, U, F>(self.0)
    }
}

/// Builds a kernel for the function of two values the table picks.
struct Loop2(bool, bool);

impl<T: Copy + 'static, U: 'static> Visit2<T, U> for Loop2 {
    type Out = KernelFn;
    fn visit<F: Fn2<T, U> + 'static>(self) -> KernelFn {
        map2::<T, U, F>(self.0, self.1)
    }
}

fn float_unary<T: crate::math::Float>(u: crate::math::UnaryOp, slice: bool) -> KernelFn {
    u.visit_float::<T, _>(Loop1(slice))
}

fn num_unary<T: Num>(u: crate::math::UnaryOp, slice: bool) -> KernelFn {
    u.visit_num::<T, _>(Loop1(slice))
}

fn binary<T: Num>(b: crate::math::BinaryOp, x: bool, y: bool) -> KernelFn {
    b.visit::<T, _>(Loop2(x, y))
}

fn compare<T: PartialOrd + Copy + 'static>(c: crate::math::CmpOp, x: bool, y: bool) -> KernelFn {
    c.visit::<T, _>(Loop2(x, y))
}

/// `binary`, for an operand that is a scalar other than NaN: `+` and `*` need not choose
/// between two NaNs (see `Num::add_plain`).
fn binary_by_scalar<T: Num>(b: crate::math::BinaryOp, x: bool, y: bool) -> KernelFn {
    match b {
        crate::math::BinaryOp::Add => map2::<T, T, AddPlain>(x, y),
        crate::math::BinaryOp::Mul => map2::<T, T, MulPlain>(x, y),
        other => binary::<T>(other, x, y),
    }
}

fn clamp<T: Num>(slice: bool) -> KernelFn {
    if slice {
        pick!(clamp_base, clamp_avx2, clamp_avx512, [T], [true])
    } else {
        pick!(clamp_base, clamp_avx2, clamp_avx512, [T], [false])
    }
}

fn select<T: Copy + 'static>() -> KernelFn {
    pick!(select_base, select_avx2, select_avx512, [T], [])
}

fn cast_from<T: CastToAll>(to: DType, slice: bool) -> KernelFn {
    match to {
        DType::F32 => map1::<T, f32, Cast>(slice),
        DType::F64 => map1::<T, f64, Cast>(slice),
        DType::I32 => map1::<T, i32, Cast>(slice),
        DType::I64 => map1::<T, i64, Cast>(slice),
        DType::Bool => map1::<T, bool, Cast>(slice),
    }
}

/// Compiles one instruction: `op` on `srcs` into frame slot `dst`.
pub fn compile(op: &ElementwiseOp, srcs: &[Src], dst: u16) -> Kernel {
    let slice = |i: usize| srcs[i].mode == Mode::Slice;
    let mut k = Kernel { run: map1::<f32, f32, Neg>(true), srcs: [0; 3], dst, imm: [0; 3], flags: 0, chain: (std::ptr::null(), 0) };
    for (i, s) in srcs.iter().enumerate() {
        k.srcs[i] = s.slot;
    }
    let dtype = srcs[0].dtype;
    k.run = match op {
        ElementwiseOp::Unary(u) if dtype == DType::Bool => u.visit_bool(Loop1(slice(0))),
        ElementwiseOp::Unary(u) if dtype.is_float() => by_float!(dtype, float_unary, *u, slice(0)),
        ElementwiseOp::Unary(u) => by_num!(dtype, num_unary, *u, slice(0)),
        ElementwiseOp::Binary(b) => by_num!(dtype, binary, *b, slice(0), slice(1)),
        ElementwiseOp::BinaryScalar { op: b, scalar, scalar_first } => {
            // The scalar becomes the immediate of its side.
            let (x, s) = if *scalar_first { (1, 0) } else { (0, 1) };
            k.srcs[x] = srcs[0].slot;
            k.srcs[s] = IMM;
            k.imm[s] = imm_bits(scalar.0, dtype);
            let modes = if *scalar_first { (false, slice(0)) } else { (slice(0), false) };
            if scalar.0.as_f64().is_nan() {
                by_num!(dtype, binary, *b, modes.0, modes.1)
            } else {
                by_num!(dtype, binary_by_scalar, *b, modes.0, modes.1)
            }
        }
        ElementwiseOp::Compare(c) => by_any!(dtype, compare, *c, slice(0), slice(1)),
        ElementwiseOp::CompareScalar { op: c, scalar } => {
            k.srcs[1] = IMM;
            k.imm[1] = imm_bits(scalar.0, dtype);
            by_any!(dtype, compare, *c, slice(0), false)
        }
        ElementwiseOp::Clamp { min, max } => {
            if let Some(lo) = min {
                k.imm[1] = imm_bits(lo.0, dtype);
                k.flags |= 1;
            }
            if let Some(hi) = max {
                k.imm[2] = imm_bits(hi.0, dtype);
                k.flags |= 2;
            }
            by_num!(dtype, clamp, slice(0))
        }
        ElementwiseOp::Where => {
            k.flags = slice(0) as u8 | (slice(1) as u8) << 1 | (slice(2) as u8) << 2;
            by_any!(srcs[1].dtype, select,)
        }
        ElementwiseOp::Cast(to) => by_any!(dtype, cast_from, *to, slice(0)),
    };
    k
}
