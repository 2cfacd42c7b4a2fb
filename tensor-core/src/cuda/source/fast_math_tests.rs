//! Kernels generated in fast-math mode (`TENSOR_CORE_CUDA_FAST_MATH=1`): golden text of W2's,
//! what changes and what does not (f64, integers, the default mode's units), and (feature
//! `cuda`, where NVRTC is installed) every fast variant compiled by NVRTC to the instructions
//! it is meant to use.

use super::*;
use crate::math::ScalarAttr;
use smallvec::smallvec;

fn instr(op: ElementwiseOp, args: &[usize], dtype: DType) -> Instr {
    Instr { op, args: args.iter().map(|&i| Operand::Input(i)).collect(), dtype }
}

/// W2: `tanh(x * 1.5 + 0.5) * sigmoid(x) - x * 0.5`, as the graph compiler fuses it.
fn w2_instrs() -> Vec<Instr> {
    let s = |v: f64| ScalarAttr(Scalar::Float(v));
    let bs = |op, v| ElementwiseOp::BinaryScalar { op, scalar: s(v), scalar_first: false };
    let r = |i: usize| Operand::ResultOf(i);
    vec![
        instr(bs(BinaryOp::Mul, 1.5), &[0], DType::F32),
        Instr { op: bs(BinaryOp::Add, 0.5), args: smallvec![r(0)], dtype: DType::F32 },
        Instr { op: ElementwiseOp::Unary(UnaryOp::Tanh), args: smallvec![r(1)], dtype: DType::F32 },
        instr(ElementwiseOp::Unary(UnaryOp::Sigmoid), &[0], DType::F32),
        Instr { op: ElementwiseOp::Binary(BinaryOp::Mul), args: smallvec![r(2), r(3)], dtype: DType::F32 },
        instr(bs(BinaryOp::Mul, 0.5), &[0], DType::F32),
        Instr { op: ElementwiseOp::Binary(BinaryOp::Sub), args: smallvec![r(4), r(5)], dtype: DType::F32 },
    ]
}

const CONTIGUOUS_F32: [(DType, Access); 1] = [(DType::F32, Access::Contiguous)];

fn w2(math: MathMode) -> KernelSource {
    elementwise_in(&Program { rank: 1, inputs: &CONTIGUOUS_F32, instrs: &w2_instrs(), outputs: &[6] }, math)
}

#[test]
fn w2s_fast_kernel_calls_the_fast_functions() {
    let k = w2(MathMode::Fast);
    let expected = format!(
        "static __device__ __forceinline__ void {n}_lane(const float a0, float& o0) {{
        const float r0 = tc_mul_plain(a0, __int_as_float(0x3fc00000));
        const float r1 = tc_add_plain(r0, __int_as_float(0x3f000000));
        const float r2 = tc_fast_tanh(r1);
        const float r3 = tc_fast_sigmoid(a0);
        const float r4 = tc_mul_plain(r2, r3);
        const float r5 = tc_mul_plain(a0, __int_as_float(0x3f000000));
        const float r6 = tc_sub(r4, r5);
        o0 = r6;
}}
extern \"C\" __global__ void {n}(
    const long long n,
    const TcIndex ix,
    const float* __restrict__ in0,
    float* __restrict__ out0) {{
    const long long nv = n >> 2;
    for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += (long long)gridDim.x * blockDim.x) {{
        const float4 v0 = reinterpret_cast<const float4*>(in0)[v];
        float4 w0;
        {n}_lane(v0.x, w0.x);
        {n}_lane(v0.y, w0.y);
        {n}_lane(v0.z, w0.z);
        {n}_lane(v0.w, w0.w);
        reinterpret_cast<float4*>(out0)[v] = w0;
    }}
    for (long long i = (nv << 2) + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {{
        {n}_lane(in0[i], out0[i]);
    }}
}}
",
        n = k.name
    );
    assert_eq!(k.kernel, expected);
    assert_eq!(k.per_thread, 4);
    // Its own name (so its own compiled code and cache file), and the fast functions in its
    // translation unit, after the prelude whose functions and constants they use.
    let default = w2(MathMode::CpuBits);
    assert_ne!(k.name, default.name);
    assert_eq!(k.code(), format!("{}{FAST_PRELUDE}{}", header(), k.kernel));
}

#[test]
fn the_default_modes_units_are_unchanged_by_the_fast_functions() {
    let default = w2(MathMode::CpuBits);
    assert_eq!(default, elementwise(&Program { rank: 1, inputs: &CONTIGUOUS_F32, instrs: &w2_instrs(), outputs: &[6] }));
    assert!(!default.kernel.contains(FAST_PREFIX));
    assert_eq!(default.code(), format!("{}{}", header(), default.kernel));
    assert!(!header().contains(FAST_PREFIX), "the shared prelude has no fast-math function");
}

#[test]
fn fast_math_changes_f32_only() {
    let one = |op: ElementwiseOp, dtype: DType, n_in: usize, math: MathMode| -> String {
        let inputs: Vec<(DType, Access)> = (0..n_in).map(|_| (dtype, Access::Strided(0))).collect();
        let ins = [instr(op, &(0..n_in).collect::<Vec<_>>(), dtype)];
        let k = elementwise_in(&Program { rank: 1, inputs: &inputs, instrs: &ins, outputs: &[0] }, math);
        k.kernel.lines().find(|l| l.contains("r0 =")).expect("an instruction").trim().to_string()
    };
    let fast = |op, n_in| one(op, DType::F32, n_in, MathMode::Fast);
    assert_eq!(fast(ElementwiseOp::Unary(UnaryOp::Exp), 1), "const float r0 = tc_fast_exp(a0);");
    assert_eq!(fast(ElementwiseOp::Unary(UnaryOp::GeluTanh), 1), "const float r0 = tc_fast_gelu_tanh(a0);");
    assert_eq!(fast(ElementwiseOp::Binary(BinaryOp::Div), 2), "const float r0 = tc_fast_div(a0, a1);");
    let recip = ElementwiseOp::BinaryScalar { op: BinaryOp::Div, scalar: ScalarAttr(Scalar::Float(1.0)), scalar_first: true };
    assert_eq!(fast(recip, 1), "const float r0 = tc_fast_div(__int_as_float(0x3f800000), a0);");
    // The CPU's functions stay where fast math has no twin.
    assert_eq!(fast(ElementwiseOp::Unary(UnaryOp::Log), 1), "const float r0 = tc_ln(a0);");
    assert_eq!(fast(ElementwiseOp::Unary(UnaryOp::Erf), 1), "const float r0 = tc_erf(a0);");
    assert_eq!(fast(ElementwiseOp::Binary(BinaryOp::Sub), 2), "const float r0 = tc_sub(a0, a1);");
    // f64 and the integers: the same kernel in both modes.
    for (op, dtype, n_in) in [
        (ElementwiseOp::Unary(UnaryOp::Exp), DType::F64, 1),
        (ElementwiseOp::Unary(UnaryOp::Sigmoid), DType::F64, 1),
        (ElementwiseOp::Binary(BinaryOp::Div), DType::F64, 2),
        (ElementwiseOp::Binary(BinaryOp::Mul), DType::F64, 2),
        (ElementwiseOp::Binary(BinaryOp::Div), DType::I32, 2),
        (ElementwiseOp::Binary(BinaryOp::Add), DType::I64, 2),
    ] {
        assert_eq!(one(op.clone(), dtype, n_in, MathMode::Fast), one(op, dtype, n_in, MathMode::CpuBits), "{dtype}");
    }
}

#[test]
fn a_fast_batched_kernel_calls_the_fast_single_kernels_lane_function() {
    let p = Program { rank: 1, inputs: &CONTIGUOUS_F32, instrs: &w2_instrs(), outputs: &[6] };
    let (single, batched) = (elementwise_in(&p, MathMode::Fast), elementwise_batched_in(&p, MathMode::Fast));
    let lane_of = |k: &KernelSource| k.kernel.split("extern").next().expect("helpers first").replace(&k.name, "K");
    assert_eq!(lane_of(&single), lane_of(&batched));
    assert!(lane_of(&batched).contains("tc_fast_sigmoid(a0)"));
    assert_ne!(batched.name, elementwise_batched(&p).name);
}

/// Every fast variant (vectorized and scalar, each fast function and division, a batched
/// kernel) compiled by NVRTC as the runtime compiles it; the PTX uses the approximate
/// instructions and no IEEE division.
#[cfg(feature = "cuda")]
#[test]
fn nvrtc_compiles_every_fast_variant() {
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("NVRTC not found: skipping the compile check (see docs/GPU.md)");
        return;
    }
    let mut sources = vec![w2(MathMode::Fast)];
    let ops = [
        (ElementwiseOp::Unary(UnaryOp::Exp), 1),
        (ElementwiseOp::Unary(UnaryOp::Tanh), 1),
        (ElementwiseOp::Unary(UnaryOp::Sigmoid), 1),
        (ElementwiseOp::Unary(UnaryOp::GeluTanh), 1),
        (ElementwiseOp::Binary(BinaryOp::Div), 2),
        (ElementwiseOp::Binary(BinaryOp::Add), 2),
        (ElementwiseOp::Binary(BinaryOp::Mul), 2),
        (ElementwiseOp::BinaryScalar { op: BinaryOp::Div, scalar: ScalarAttr(Scalar::Float(2.0)), scalar_first: true }, 1),
    ];
    for (op, n_in) in ops {
        // Contiguous inputs: vectorized; a strided one: one element a thread.
        for access in [Access::Contiguous, Access::Strided(0)] {
            let inputs = vec![(DType::F32, access); n_in];
            let ins = [instr(op.clone(), &(0..n_in).collect::<Vec<_>>(), DType::F32)];
            let k = elementwise_in(&Program { rank: 2, inputs: &inputs, instrs: &ins, outputs: &[0] }, MathMode::Fast);
            assert_eq!(k.per_thread, if access == Access::Contiguous { 4 } else { 1 });
            sources.push(k);
        }
    }
    sources.push(elementwise_batched_in(&Program { rank: 0, inputs: &CONTIGUOUS_F32, instrs: &w2_instrs(), outputs: &[6] }, MathMode::Fast));
    // One unit of all of them, as the NVRTC test of the default kernels does.
    let unit: String = sources.iter().map(|s| s.kernel.as_str()).collect();
    let all_in_one = KernelSource { name: "all_fast".into(), kernel: unit, per_thread: 1 };
    let ptx = crate::cuda::compile(&all_in_one, "compute_90").unwrap_or_else(|e| panic!("{e}"));
    for s in &sources {
        assert!(ptx.contains(&format!(".entry {}(", s.name)), "{} is missing from the PTX", s.name);
    }
    for instruction in ["ex2.approx.ftz.f32", "rcp.approx.ftz.f32", "div.full.f32"] {
        assert!(ptx.contains(instruction), "no {instruction} in the PTX");
    }
    assert!(!ptx.contains("div.rn.f32") && !ptx.contains("rcp.rn.f32"), "an IEEE division is left in the fast kernels");
    // W2's fast kernel alone: two approximate reciprocals and one ex2 for each of its four
    // elements a thread and its scalar tail, nothing of the default functions.
    let ptx = crate::cuda::compile(&sources[0], "compute_90").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ptx.matches("ex2.approx.ftz.f32").count(), 5, "{ptx}");
    assert_eq!(ptx.matches("rcp.approx.ftz.f32").count(), 10, "{ptx}");
    assert!(!ptx.contains("div.rn.f32"), "{ptx}");
}
