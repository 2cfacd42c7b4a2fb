//! The generated loop against the interpreter, bit for bit: every op with a template, alone
//! and in programs, over values that reach every branch of the scalar functions (zeros of
//! both signs, both infinities, NaNs of both signs and other payloads, the ends of exp's and
//! tanh's ranges, subnormals) and over lengths that end in a partial vector.

use super::super::compiled::{Mode, Src};
use super::Jit;
use crate::dtype::DType;
use crate::dtype::Scalar;
use crate::kernels::fused::{CompiledProgram, Input};
use crate::kernels::simd::{level, Level};
use crate::math::{BinaryOp, ElementwiseOp, FusedProgram, Instr, Operand, ScalarAttr, UnaryOp};
use crate::shape::Shape;
use crate::storage::{Array, Storage};
use std::cell::Cell;

thread_local! {
    /// The instruction set this test thread generates code for (see `Jit::isa`).
    pub(super) static FORCED_ISA: Cell<Option<super::Isa>> = const { Cell::new(None) };
}

/// Runs `f` once per instruction set the CPU has, generating code for that set.
fn for_each_isa(f: impl Fn()) {
    for (isa, needs) in [(super::Isa::Avx512, Level::Avx512), (super::Isa::Avx2, Level::Avx2)] {
        if level() >= needs {
            FORCED_ISA.set(Some(isa));
            f();
        }
    }
    FORCED_ISA.set(None);
}

const UNARY: [UnaryOp; 9] =
    [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu, UnaryOp::Sign, UnaryOp::Sqrt, UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::GeluTanh];
const BINARY: [BinaryOp; 6] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum, BinaryOp::Minimum];

/// Edge values, then a sweep over [-100, 100], then pseudo-random bit patterns.
fn values(n: usize, seed: u32) -> Vec<f32> {
    let edges = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7fa0_0001), // a signaling NaN with a payload
        f32::from_bits(0xffc0_1234),
        f32::MIN_POSITIVE,
        1e-45,
        -1e-45,
        88.722_83,
        88.8,
        -87.336_54,
        -87.4,
        7.905_311,
        -7.905_311,
        7.9,
        0.000_4,
        -0.000_4,
        0.000_39,
        f32::MAX,
        f32::MIN,
    ];
    let mut v: Vec<f32> = edges.to_vec();
    let mut state = seed.wrapping_mul(2_654_435_761).max(1);
    while v.len() < n {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        v.push(if v.len().is_multiple_of(3) { f32::from_bits(state) } else { (state as f32 / u32::MAX as f32 - 0.5) * 200.0 });
    }
    v.truncate(n);
    v
}

fn storage(v: &[f32]) -> Storage {
    Storage::F32(Array::from_shape_vec(ndarray::IxDyn(&[v.len()]), v.to_vec()).unwrap())
}

/// Runs `instrs` both ways on `inputs` (each of length `n`, or one value) and compares bits.
fn same_bits(instrs: Vec<Instr>, inputs: &[Vec<f32>], outputs: Vec<usize>) {
    let n = inputs.iter().map(Vec::len).max().unwrap();
    let decl: Vec<(DType, Shape)> = inputs.iter().map(|v| (DType::F32, Shape::new(&[v.len()]))).collect();
    let program = FusedProgram { shape: Shape::new(&[n]), inputs: decl, instrs, outputs };
    let build = |codegen| CompiledProgram::build(&program, codegen, false);
    let (generated, interpreted) = (build(true), build(false));
    assert!(generated.is_generated(), "{generated:?} has a template ({:?})", FORCED_ISA.get());
    assert_eq!(generated.generated_isa(), FORCED_ISA.get());
    assert!(!interpreted.is_generated());
    let run = |p: &CompiledProgram| -> Vec<Vec<u32>> {
        let ins: Vec<Storage> = inputs.iter().map(|v| storage(v)).collect();
        p.run(ins.iter().map(Input::Shared)).iter().map(|s| s.array::<f32>().unwrap().iter().map(|x| x.to_bits()).collect()).collect()
    };
    let (a, b) = (run(&generated), run(&interpreted));
    for (o, (x, y)) in a.iter().zip(&b).enumerate() {
        if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
            let ins: Vec<String> = inputs.iter().map(|v| format!("{:08x}", v[i.min(v.len() - 1)].to_bits())).collect();
            panic!(
                "{generated:?} ({:?}): output {o}, element {i} (inputs {ins:?}): generated {:08x}, interpreted {:08x}",
                FORCED_ISA.get(),
                x[i],
                y[i]
            );
        }
    }
}

fn instr(op: ElementwiseOp, args: &[Operand]) -> Instr {
    Instr { op, args: args.iter().copied().collect(), dtype: DType::F32 }
}

#[test]
fn every_unary_template_gives_the_interpreters_bits() {
    for_each_isa(|| {
        for u in UNARY {
            same_bits(vec![instr(ElementwiseOp::Unary(u), &[Operand::Input(0)])], &[values(4099, 7)], vec![0]);
        }
    });
}

#[test]
fn every_binary_template_gives_the_interpreters_bits() {
    for_each_isa(binaries);
}

fn binaries() {
    for b in BINARY {
        // Every edge value against every other (NaN against NaN of the other sign included).
        let edges = values(25, 1);
        let (x, y): (Vec<f32>, Vec<f32>) = edges.iter().flat_map(|&a| edges.iter().map(move |&b| (a, b))).unzip();
        same_bits(vec![instr(ElementwiseOp::Binary(b), &[Operand::Input(0), Operand::Input(1)])], &[x, y], vec![0]);
        same_bits(vec![instr(ElementwiseOp::Binary(b), &[Operand::Input(0), Operand::Input(1)])], &[values(1000, 3), values(1000, 4)], vec![0]);
        for scalar_first in [false, true] {
            let op = ElementwiseOp::BinaryScalar { op: b, scalar: ScalarAttr(Scalar::Float(1.5)), scalar_first };
            same_bits(vec![instr(op, &[Operand::Input(0)])], &[values(1000, 5)], vec![0]);
        }
        // A single-value input, read in every lane.
        same_bits(vec![instr(ElementwiseOp::Binary(b), &[Operand::Input(0), Operand::Input(1)])], &[values(77, 6), vec![-2.5]], vec![0]);
    }
}

#[test]
fn clamp_and_programs_give_the_interpreters_bits() {
    for_each_isa(clamp_and_w2);
}

fn clamp_and_w2() {
    let s = |v: f64| Some(ScalarAttr(Scalar::Float(v)));
    same_bits(vec![instr(ElementwiseOp::Clamp { min: s(-1.0), max: s(2.0) }, &[Operand::Input(0)])], &[values(500, 8)], vec![0]);
    same_bits(vec![instr(ElementwiseOp::Clamp { min: None, max: s(0.5) }, &[Operand::Input(0)])], &[values(500, 9)], vec![0]);
    // W2: tanh(x * 1.5 + 0.5) * sigmoid(x) - x * 0.5, over lengths around the vector width.
    let by = |op, v: f64| ElementwiseOp::BinaryScalar { op, scalar: ScalarAttr(Scalar::Float(v)), scalar_first: false };
    let w2 = vec![
        instr(by(BinaryOp::Mul, 1.5), &[Operand::Input(0)]),
        instr(by(BinaryOp::Add, 0.5), &[Operand::ResultOf(0)]),
        instr(ElementwiseOp::Unary(UnaryOp::Tanh), &[Operand::ResultOf(1)]),
        instr(ElementwiseOp::Unary(UnaryOp::Sigmoid), &[Operand::Input(0)]),
        instr(ElementwiseOp::Binary(BinaryOp::Mul), &[Operand::ResultOf(2), Operand::ResultOf(3)]),
        instr(by(BinaryOp::Mul, 0.5), &[Operand::Input(0)]),
        instr(ElementwiseOp::Binary(BinaryOp::Sub), &[Operand::ResultOf(4), Operand::ResultOf(5)]),
    ];
    for n in [1, 15, 16, 17, 1024, 1025, 5000] {
        same_bits(w2.clone(), &[values(n, n as u32)], vec![6]);
    }
    // Two outputs, one of them an intermediate that is read again later.
    same_bits(w2.clone(), &[values(333, 11)], vec![2, 6]);
}

/// A one-instruction program `u(x)` over 4 elements of `dtype`, generated where it can be if
/// `codegen`.
fn unary_program(u: UnaryOp, dtype: DType, codegen: bool) -> CompiledProgram {
    let op = Instr { op: ElementwiseOp::Unary(u), args: [Operand::Input(0)].into_iter().collect(), dtype };
    CompiledProgram::build(
        &FusedProgram { shape: Shape::new(&[4]), inputs: vec![(dtype, Shape::new(&[4]))], instrs: vec![op], outputs: vec![0] },
        codegen,
        false,
    )
}

#[test]
fn programs_without_templates_run_in_the_interpreter() {
    assert!(!unary_program(UnaryOp::Log, DType::F32, true).is_generated()); // `ln` has no template
    assert!(!unary_program(UnaryOp::Exp, DType::F64, true).is_generated()); // f64 programs are interpreted
    let off = unary_program(UnaryOp::Exp, DType::F32, false);
    assert!(!off.is_generated());
    let x = storage(&[0.0, 1.0, -1.0, 2.0]);
    assert_eq!(
        off.run([Input::Shared(&x)])[0].array::<f32>().unwrap().iter().copied().collect::<Vec<f32>>(),
        vec![1.0, 2.718_281_7, 0.367_879_45, 7.389_056]
    );
}

/// A vector with an element at a 64-byte-aligned address: `(buffer, index of that element)`.
fn aligned_buffer(len: usize, fill: f32) -> (Vec<f32>, usize) {
    let v = vec![fill; len + 64];
    let at = (64 - v.as_ptr() as usize % 64) % 64 / 4;
    (v, at)
}

/// `tanh(x * y) - x` and `x * y`, two outputs, generated with or without streaming stores.
fn two_output_jit(streams: bool) -> Jit {
    use Operand::{Input as In, ResultOf as Of};
    let instrs = vec![
        instr(ElementwiseOp::Binary(BinaryOp::Mul), &[In(0), In(1)]),
        instr(ElementwiseOp::Unary(UnaryOp::Tanh), &[Of(0)]),
        instr(ElementwiseOp::Binary(BinaryOp::Sub), &[Of(1), In(0)]),
    ];
    let slice = |slot| Src { slot, mode: Mode::Slice, dtype: DType::F32 };
    let srcs = vec![[slice(0), slice(1)].into_iter().collect(), [slice(2)].into_iter().collect(), [slice(3), slice(0)].into_iter().collect()];
    let isa = FORCED_ISA.get().expect("an instruction set");
    let jit = Jit::compile_for(isa, &instrs, &srcs, &[2, 0], |j| 2 + j, streams).expect("a template for every op");
    assert_eq!(jit.streams, streams);
    jit
}

/// Runs `jit` on `len` elements, the outputs starting `shift` elements (the second output
/// `shift2`) past a 64-byte boundary; returns both outputs' bits, with one element of guard
/// on each side, which must stay untouched.
fn run_shifted(jit: &Jit, x: &[f32], y: &[f32], len: usize, shift: usize, shift2: usize) -> Vec<Vec<u32>> {
    const GUARD: f32 = 12345.0;
    let (mut a, at) = aligned_buffer(len + 32, GUARD);
    let (mut b, bt) = aligned_buffer(len + 32, GUARD);
    let (a0, b0) = (at + 16 + shift, bt + 16 + shift2);
    let frame = [x.as_ptr() as *mut u8, y.as_ptr() as *mut u8, a[a0..].as_mut_ptr() as *mut u8, b[b0..].as_mut_ptr() as *mut u8];
    // SAFETY: every slot points to at least `len` f32 values, outputs overlap no input.
    unsafe { jit.run(frame.as_ptr(), len) };
    for (out, o0) in [(&a, a0), (&b, b0)] {
        assert_eq!((out[o0 - 1], out[o0 + len]), (GUARD, GUARD), "the loop wrote outside its {len} elements");
    }
    [(&a, a0), (&b, b0)].iter().map(|(out, o0)| out[*o0..*o0 + len].iter().map(|v| v.to_bits()).collect()).collect()
}

#[test]
fn streaming_stores_give_the_plain_loops_bits_at_every_alignment_and_length() {
    for_each_isa(|| {
        let (plain, streaming) = (two_output_jit(false), two_output_jit(true));
        let (x, y) = (values(1100, 3), values(1100, 4));
        for len in [0, 1, 7, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 100, 1024, 1100] {
            for shift in 0..16 {
                // Both outputs equally aligned (the streaming loop), and not (the plain one).
                for shift2 in [shift, (shift + 3) % 16] {
                    assert_eq!(
                        run_shifted(&streaming, &x, &y, len, shift, shift2),
                        run_shifted(&plain, &x, &y, len, shift, shift2),
                        "{len} elements, outputs {shift} and {shift2} past the alignment ({:?})",
                        FORCED_ISA.get()
                    );
                }
            }
        }
    });
}

#[test]
fn a_program_compiled_for_a_streaming_step_streams_and_gives_the_same_bits() {
    for_each_isa(|| {
        use Operand::{Input as In, ResultOf as Of};
        let instrs = vec![instr(ElementwiseOp::Unary(UnaryOp::Sigmoid), &[In(0)]), instr(ElementwiseOp::Binary(BinaryOp::Mul), &[Of(0), In(0)])];
        let n = 50_000; // several chunks, run in parallel
        let program = FusedProgram { shape: Shape::new(&[n]), inputs: vec![(DType::F32, Shape::new(&[n]))], instrs, outputs: vec![1] };
        let (streaming, plain) = (CompiledProgram::build(&program, true, true), CompiledProgram::build(&program, true, false));
        assert!(streaming.streams() && !plain.streams());
        let x = storage(&values(n, 9));
        let bits = |p: &CompiledProgram| p.run([Input::Shared(&x)])[0].array::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
        assert_eq!(bits(&streaming), bits(&plain));
    });
}
