//! The generator's output: golden text for a few programs, and (feature `cuda`, where NVRTC
//! is installed) every op on every dtype it takes compiled by NVRTC.

use super::*;
use crate::math::ScalarAttr;
use smallvec::smallvec;

fn instr(op: ElementwiseOp, args: &[usize], dtype: DType) -> Instr {
    Instr { op, args: args.iter().map(|&i| Operand::Input(i)).collect(), dtype }
}

/// The kernel's own part (after the shared prelude).
fn kernel_text(k: &KernelSource) -> &str {
    &k.kernel
}

#[test]
fn a_one_op_program_reads_its_inputs_and_calls_the_tables_function() {
    let inputs = [(DType::F32, Access::Contiguous), (DType::F32, Access::Strided(0))];
    let ins = [instr(ElementwiseOp::Binary(BinaryOp::Add), &[0, 1], DType::F32)];
    let k = elementwise(&Program { rank: 2, inputs: &inputs, instrs: &ins, outputs: &[0] });
    let body = kernel_text(&k);
    let expected = format!(
        "extern \"C\" __global__ void {}(
    const long long n,
    const TcIndex ix,
    const float* __restrict__ in0,
    const float* __restrict__ in1,
    float* __restrict__ out0) {{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {{
        long long rem = i, c[2];
        c[1] = rem % ix.dims[1]; rem /= ix.dims[1];
        c[0] = rem % ix.dims[0]; rem /= ix.dims[0];
        const float a0 = in0[i];
        const float a1 = in1[c[0] * ix.strides[0][0] + c[1] * ix.strides[0][1]];
        const float r0 = tc_add(a0, a1);
        out0[i] = r0;
    }}
}}
",
        k.name
    );
    assert_eq!(body, expected);
    assert!(k.name.starts_with("tc_ew_") && k.name.len() == 6 + 16);
}

#[test]
fn a_fused_chain_keeps_intermediates_in_registers_and_writes_scalars_by_their_bits() {
    // W2: tanh(x * 1.5 + 0.5) * sigmoid(x) - x * 0.5
    let s = |v: f64| ScalarAttr(Scalar::Float(v));
    let bs = |op, v, first| ElementwiseOp::BinaryScalar { op, scalar: s(v), scalar_first: first };
    let r = |i: usize| Operand::ResultOf(i);
    let ins = vec![
        instr(bs(BinaryOp::Mul, 1.5, false), &[0], DType::F32),
        Instr { op: bs(BinaryOp::Add, 0.5, false), args: smallvec![r(0)], dtype: DType::F32 },
        Instr { op: ElementwiseOp::Unary(UnaryOp::Tanh), args: smallvec![r(1)], dtype: DType::F32 },
        instr(ElementwiseOp::Unary(UnaryOp::Sigmoid), &[0], DType::F32),
        Instr { op: ElementwiseOp::Binary(BinaryOp::Mul), args: smallvec![r(2), r(3)], dtype: DType::F32 },
        instr(bs(BinaryOp::Mul, 0.5, false), &[0], DType::F32),
        Instr { op: ElementwiseOp::Binary(BinaryOp::Sub), args: smallvec![r(4), r(5)], dtype: DType::F32 },
    ];
    let k = elementwise(&Program { rank: 1, inputs: &[(DType::F32, Access::Contiguous)], instrs: &ins, outputs: &[6] });
    let lines: Vec<&str> = kernel_text(&k).lines().map(str::trim).filter(|l| l.starts_with("const float r")).collect();
    assert_eq!(
        lines,
        [
            "const float r0 = tc_mul(a0, __int_as_float(0x3fc00000));",
            "const float r1 = tc_add(r0, __int_as_float(0x3f000000));",
            "const float r2 = tc_tanh(r1);",
            "const float r3 = tc_sigmoid(a0);",
            "const float r4 = tc_mul(r2, r3);",
            "const float r5 = tc_mul(a0, __int_as_float(0x3f000000));",
            "const float r6 = tc_sub(r4, r5);",
        ]
    );
    // Contiguous f32 in and out: four elements per thread, through the lane function.
    let text = kernel_text(&k);
    assert!(text.starts_with(&format!("static __device__ __forceinline__ void {}_lane(const float a0, float& o0) {{", k.name)), "{text}");
    assert!(text.contains("        o0 = r6;\n}\n"), "{text}");
    assert!(text.contains(&format!("{}_lane(v0.w, w0.w);", k.name)) && text.contains(&format!("{}_lane(in0[i], out0[i]);", k.name)), "{text}");
    assert_eq!(k.per_thread, 4);
}

#[test]
fn a_contiguous_program_of_4_byte_values_is_vectorized_with_scalars_read_once() {
    let inputs = [(DType::F32, Access::Contiguous), (DType::F32, Access::Scalar)];
    let ins = [instr(ElementwiseOp::Binary(BinaryOp::Mul), &[0, 1], DType::F32)];
    let k = elementwise(&Program { rank: 2, inputs: &inputs, instrs: &ins, outputs: &[0] });
    let expected = format!(
        "static __device__ __forceinline__ void {n}_lane(const float a0, const float a1, float& o0) {{
        const float r0 = tc_mul(a0, a1);
        o0 = r0;
}}
extern \"C\" __global__ void {n}(
    const long long n,
    const TcIndex ix,
    const float* __restrict__ in0,
    const float* __restrict__ in1,
    float* __restrict__ out0) {{
    const float s1 = in1[0];
    const long long nv = n >> 2;
    for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += (long long)gridDim.x * blockDim.x) {{
        const float4 v0 = reinterpret_cast<const float4*>(in0)[v];
        float4 w0;
        {n}_lane(v0.x, s1, w0.x);
        {n}_lane(v0.y, s1, w0.y);
        {n}_lane(v0.z, s1, w0.z);
        {n}_lane(v0.w, s1, w0.w);
        reinterpret_cast<float4*>(out0)[v] = w0;
    }}
    for (long long i = (nv << 2) + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {{
        {n}_lane(in0[i], s1, out0[i]);
    }}
}}
",
        n = k.name
    );
    assert_eq!(kernel_text(&k), expected);
    // Not vectorized: a strided input, 8-byte values, a bool output, mixed widths.
    let not = |inputs: &[(DType, Access)], out: DType| {
        let ins = [instr(ElementwiseOp::Binary(BinaryOp::Add), &[0, 1], out)];
        elementwise(&Program { rank: 2, inputs, instrs: &ins, outputs: &[0] }).per_thread
    };
    assert_eq!(not(&[(DType::F32, Access::Contiguous), (DType::F32, Access::Strided(0))], DType::F32), 1);
    assert_eq!(not(&[(DType::F64, Access::Contiguous), (DType::F64, Access::Contiguous)], DType::F64), 1);
    assert_eq!(not(&[(DType::I32, Access::Contiguous), (DType::I32, Access::Contiguous)], DType::Bool), 1);
    assert_eq!(not(&[(DType::I32, Access::Contiguous), (DType::F32, Access::Contiguous)], DType::F32), 1);
    assert_eq!(not(&[(DType::I32, Access::Contiguous), (DType::I32, Access::Scalar)], DType::I32), 4);
}

#[test]
fn region_copies_walk_the_region_and_offset_both_sides() {
    let k = copy(DType::F64, 2);
    let expected = format!(
        "extern \"C\" __global__ void {}(const long long n, const TcIndex ix, const long long from, const long long to, const double* __restrict__ in0, double* __restrict__ out0) {{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {{
        long long rem = i, src = from, dst = to;
        {{ const long long c = rem % ix.dims[1]; rem /= ix.dims[1]; src += c * ix.strides[0][1]; dst += c * ix.strides[1][1]; }}
        {{ const long long c = rem % ix.dims[0]; rem /= ix.dims[0]; src += c * ix.strides[0][0]; dst += c * ix.strides[1][0]; }}
        out0[dst] = in0[src];
    }}
}}
",
        k.name
    );
    assert_eq!(kernel_text(&k), expected);
    assert_ne!(copy(DType::F64, 3).name, k.name);
}

#[test]
fn row_selections_read_the_index_and_index_add_and_softmax_keep_their_order() {
    let select = index_select(DType::F32, DType::I64);
    let text = kernel_text(&select);
    assert!(text.contains("const long long k = (long long)in1[j];"), "{text}");
    assert!(text.contains("out0[i] = (k >= 0 && k < size) ? in0[(o * size + k) * inner + r] : (float)0;"), "{text}");
    let add = index_add(DType::F64, DType::I32);
    let text = kernel_text(&add);
    assert!(text.contains("const int* __restrict__ in1"), "{text}");
    assert!(text.contains("const bool hit = j < len && (long long)in1[j] == k;"), "{text}");
    assert!(text.contains("if (hit && at < 2048) hits[at] = (int)j;"), "{text}");
    assert!(text.contains("for (long long h = 0; h < found; ++h) acc = tc_add(acc, in0[(o * len + hits[h]) * inner + r]);"), "{text}");
    assert!(text.contains("if ((long long)in1[j] == k) acc = tc_add(acc, in0[(o * len + j) * inner + r]);"), "{text}");
    for log in [false, true] {
        let k = softmax(DType::F32, log);
        let text = kernel_text(&k);
        assert!(text.contains("acc = tc_maximum(acc, x[c]);") && text.contains("acc = tc_add(acc, tc_exp(tc_sub(x[c], m)));"), "{text}");
        let last = if log { "y[c] = tc_sub(tc_sub(x[c], m), tc_ln(s));" } else { "y[c] = tc_div(tc_exp(tc_sub(x[c], m)), s);" };
        assert!(text.contains(last), "{text}");
    }
}

#[test]
fn each_op_kind_becomes_its_twin_in_the_prelude() {
    let one = |op: ElementwiseOp, dtype: DType, n_in: usize, out: DType| -> String {
        let inputs: Vec<(DType, Access)> =
            (0..n_in).map(|k| (if k == 0 && matches!(op, ElementwiseOp::Where) { DType::Bool } else { dtype }, Access::Contiguous)).collect();
        let ins = [instr(op, &(0..n_in).collect::<Vec<_>>(), out)];
        let k = elementwise(&Program { rank: 1, inputs: &inputs, instrs: &ins, outputs: &[0] });
        kernel_text(&k).lines().find(|l| l.contains("r0 =")).expect("an instruction").trim().to_string()
    };
    assert_eq!(one(ElementwiseOp::Unary(UnaryOp::Log), DType::F64, 1, DType::F64), "const double r0 = tc_ln(a0);");
    assert_eq!(one(ElementwiseOp::Unary(UnaryOp::Not), DType::Bool, 1, DType::Bool), "const tc_bool r0 = tc_not(a0);");
    assert_eq!(one(ElementwiseOp::Unary(UnaryOp::Relu), DType::I64, 1, DType::I64), "const long long r0 = tc_relu(a0);");
    assert_eq!(one(ElementwiseOp::Compare(CmpOp::Le), DType::I32, 2, DType::Bool), "const tc_bool r0 = tc_cmp_Le(a0, a1);");
    assert_eq!(one(ElementwiseOp::Where, DType::F32, 3, DType::F32), "const float r0 = tc_where(a0, a1, a2);");
    assert_eq!(one(ElementwiseOp::Cast(DType::I32), DType::F64, 1, DType::I32), "const int r0 = tc_cast<int>(a0);");
    let clamp = ElementwiseOp::Clamp { min: Some(ScalarAttr(Scalar::Int(-2))), max: Some(ScalarAttr(Scalar::Float(3.0))) };
    assert_eq!(one(clamp, DType::I32, 1, DType::I32), "const int r0 = tc_clamp_hi(tc_clamp_lo(a0, ((int)0xfffffffe)), ((int)0x00000003));");
    let pow_first = ElementwiseOp::BinaryScalar { op: BinaryOp::Pow, scalar: ScalarAttr(Scalar::Float(2.0)), scalar_first: true };
    assert_eq!(one(pow_first, DType::F64, 1, DType::F64), "const double r0 = tc_pow(__longlong_as_double(0x4000000000000000LL), a0);");
}

#[test]
fn literals_are_exact_bits_converted_as_the_cpu_converts() {
    assert_eq!(literal(Scalar::Float(0.1), DType::F32), format!("__int_as_float(0x{:08x})", 0.1f32.to_bits()));
    assert_eq!(literal(Scalar::Float(-2.7), DType::I64), "((long long)0xfffffffffffffffeULL)");
    assert_eq!(literal(Scalar::Int(i64::MIN), DType::I64), "((long long)0x8000000000000000ULL)");
    assert_eq!(literal(Scalar::Float(0.5), DType::Bool), "((tc_bool)1)");
    assert_eq!(literal(Scalar::Float(f64::NAN), DType::I32), "((int)0x00000000)");
}

#[test]
fn the_constants_are_fastmaths_own_bits() {
    let k = elementwise(&Program {
        rank: 1,
        inputs: &[(DType::F32, Access::Contiguous)],
        instrs: &[instr(ElementwiseOp::Unary(UnaryOp::Exp), &[0], DType::F32)],
        outputs: &[0],
    });
    assert!(k.code().contains(&format!("#define TC_EXP_P0 __int_as_float(0x{:08x})", fastmath::EXP_P[0].to_bits())));
    assert!(k.code().contains(&format!("#define TC_TANH_Q3 __int_as_float(0x{:08x})", fastmath::TANH_Q[3].to_bits())));
    assert!(k.code().contains(&format!("#define TC_GELU_K __longlong_as_double(0x{:016x}LL)", GELU_K.to_bits())));
}

#[test]
fn a_reduction_walks_kept_then_reduced_dims_and_combines_in_a_fixed_tree() {
    let k = reduction(ReduceOp::Mean, DType::F32, 1, 2);
    let body = kernel_text(&k);
    assert!(body.contains("o_off += (o_rem % ix.dims[0]) * ix.strides[0][0]; o_rem /= ix.dims[0];"), "{body}");
    assert!(body.contains("r_off += (r_rem % ix.dims[1 + 1]) * ix.strides[1][1]; r_rem /= ix.dims[1 + 1];"), "{body}");
    assert!(body.contains("acc = tc_add(acc, in0[o_off + r_off]);"));
    assert!(body.contains("out0[o] = tc_div(sh[0], (float)n_red);"));
    let max = reduction(ReduceOp::Max, DType::I64, 0, 1);
    assert!(kernel_text(&max).contains("long long acc = ((long long)0x8000000000000000ULL);"));
    assert_ne!(k.name, reduction(ReduceOp::Sum, DType::F32, 1, 2).name);
}

#[test]
fn a_serial_reduction_gives_each_output_a_thread_that_combines_in_order() {
    let k = reduction_serial(ReduceOp::Mean, DType::F32, 2, 1);
    let body = kernel_text(&k);
    assert!(
        body.contains("for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < n_out; o += (long long)gridDim.x * blockDim.x)"),
        "{body}"
    );
    assert!(body.contains("o_off += (o_rem % ix.dims[1]) * ix.strides[0][1]; o_rem /= ix.dims[1];"), "{body}");
    assert!(body.contains("r_off += (r_rem % ix.dims[2 + 0]) * ix.strides[1][0]; r_rem /= ix.dims[2 + 0];"), "{body}");
    assert!(body.contains("for (long long r = 0; r < n_red; r++)"), "{body}");
    assert!(body.contains("acc = tc_add(acc, in0[o_off + r_off]);"), "{body}");
    assert!(body.contains("out0[o] = tc_div(acc, (float)n_red);"), "{body}");
    assert!(!body.contains("__syncthreads"), "no block-wide tree: {body}");
    assert!(k.name.starts_with("tc_reduce_serial_"));
    assert_ne!(k.name, reduction(ReduceOp::Mean, DType::F32, 2, 1).name);
}

/// Every kernel the GPU path can generate for one op, compiled by NVRTC for Hopper, with the
/// options the runtime uses. NVRTC needs no GPU; without the library the test says so and
/// checks nothing (`.ci/run` installs it from the Python package index).
#[cfg(feature = "cuda")]
#[test]
fn nvrtc_compiles_every_op_on_every_dtype() {
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("NVRTC not found: skipping the compile check (see docs/GPU.md)");
        return;
    }
    let mut sources = Vec::new();
    let all = [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool];
    for u in [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Not,
        UnaryOp::Erf,
        UnaryOp::GeluTanh,
        UnaryOp::GeluErf,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Trunc,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Asinh,
        UnaryOp::Acosh,
        UnaryOp::Atanh,
    ] {
        for d in all.into_iter().filter(|d| match u.domain() {
            crate::math::Domain::Float => d.is_float(),
            crate::math::Domain::Numeric => d.is_numeric(),
            crate::math::Domain::Bool => *d == DType::Bool,
        }) {
            sources.push(one_op(ElementwiseOp::Unary(u), &[d], d));
        }
    }
    for d in all.into_iter().filter(|d| d.is_numeric()) {
        for b in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow, BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::Fmod] {
            sources.push(one_op(ElementwiseOp::Binary(b), &[d, d], d));
            sources.push(one_op(ElementwiseOp::BinaryScalar { op: b, scalar: ScalarAttr(Scalar::Float(1.5)), scalar_first: true }, &[d], d));
        }
        sources.push(one_op(ElementwiseOp::Clamp { min: Some(ScalarAttr(Scalar::Int(0))), max: Some(ScalarAttr(Scalar::Int(6))) }, &[d], d));
        for r in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
            sources.extend([reduction(r, d, 2, 1), reduction_serial(r, d, 2, 1)]);
        }
    }
    for d in all {
        for c in [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge] {
            sources.push(one_op(ElementwiseOp::Compare(c), &[d, d], DType::Bool));
            sources.push(one_op(ElementwiseOp::CompareScalar { op: c, scalar: ScalarAttr(Scalar::Int(1)) }, &[d], DType::Bool));
        }
        sources.push(one_op(ElementwiseOp::Where, &[DType::Bool, d, d], d));
        if d.is_int() {
            sources.extend([DType::F32, DType::F64].map(|to| one_hot(d, to)));
        }
        for to in all {
            sources.push(one_op(ElementwiseOp::Cast(to), &[d], to));
        }
    }
    for d in all {
        sources.extend((1..=MAX_RANK).map(|rank| copy(d, rank)));
        for i in [DType::I64, DType::I32] {
            sources.push(index_select(d, i));
            if d.is_numeric() {
                sources.push(index_add(d, i));
            }
        }
    }
    for d in [DType::F32, DType::F64] {
        sources.extend([softmax(d, false), softmax(d, true)]);
    }
    // Vectorized programs: f32 and i32, a scalar input, two outputs.
    for d in [DType::F32, DType::I32] {
        let inputs = [(d, Access::Contiguous), (d, Access::Scalar), (d, Access::Contiguous)];
        let ins = [
            instr(ElementwiseOp::Binary(BinaryOp::Mul), &[0, 1], d),
            Instr { op: ElementwiseOp::Binary(BinaryOp::Add), args: smallvec![Operand::ResultOf(0), Operand::Input(2)], dtype: d },
        ];
        let k = elementwise(&Program { rank: 1, inputs: &inputs, instrs: &ins, outputs: &[0, 1] });
        assert_eq!(k.per_thread, 4);
        sources.push(k);
    }
    // One translation unit of all of them (a kernel each), so NVRTC starts once.
    let unit: String = sources.iter().map(|s| s.kernel.as_str()).collect();
    let all_in_one = KernelSource { name: "all".into(), kernel: unit, per_thread: 1 };
    let ptx = crate::cuda::compile(&all_in_one, "compute_90").unwrap_or_else(|e| panic!("{e}"));
    for s in &sources {
        assert!(ptx.contains(&format!(".entry {}(", s.name)), "{} is missing from the PTX", s.name);
    }
}

/// `a * b + c` stays two roundings (`--fmad=false`), as on the CPU; a kernel NVRTC refuses is
/// an `Err` carrying its log.
#[cfg(feature = "cuda")]
#[test]
fn nvrtc_keeps_each_rounding_and_reports_its_log() {
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("NVRTC not found: skipping the compile check (see docs/GPU.md)");
        return;
    }
    let inputs = [(DType::F32, Access::Contiguous), (DType::F32, Access::Contiguous), (DType::F32, Access::Contiguous)];
    let ins = vec![
        instr(ElementwiseOp::Binary(BinaryOp::Mul), &[0, 1], DType::F32),
        Instr { op: ElementwiseOp::Binary(BinaryOp::Add), args: smallvec![Operand::ResultOf(0), Operand::Input(2)], dtype: DType::F32 },
    ];
    let k = elementwise(&Program { rank: 1, inputs: &inputs, instrs: &ins, outputs: &[1] });
    let ptx = crate::cuda::compile(&k, "compute_90").unwrap_or_else(|e| panic!("{e}"));
    assert!(ptx.contains("mul.rn.f32") && ptx.contains("add.rn.f32") && !ptx.contains("fma"), "{ptx}");
    let broken =
        KernelSource { name: "tc_broken".into(), kernel: "extern \"C\" __global__ void tc_broken() { undeclared(); }".into(), per_thread: 1 };
    let err = crate::cuda::compile(&broken, "compute_90").expect_err("it does not compile").to_string();
    assert!(err.contains("tc_broken") && err.contains("undeclared"), "{err}");
}

#[cfg(feature = "cuda")]
fn one_op(op: ElementwiseOp, dtypes: &[DType], out: DType) -> KernelSource {
    let inputs: Vec<(DType, Access)> =
        dtypes.iter().enumerate().map(|(k, &d)| (d, if k == 1 { Access::Strided(0) } else { Access::Contiguous })).collect();
    let ins = [instr(op, &(0..dtypes.len()).collect::<Vec<_>>(), out)];
    elementwise(&Program { rank: 3, inputs: &inputs, instrs: &ins, outputs: &[0] })
}

/// `x * s + y` over f64 (`s` one value), two outputs: a program the single kernel does not
/// vectorize.
fn scaled_sum(d: DType) -> (Vec<(DType, Access)>, Vec<Instr>) {
    let inputs = vec![(d, Access::Contiguous), (d, Access::Scalar), (d, Access::Contiguous)];
    let ins = vec![
        instr(ElementwiseOp::Binary(BinaryOp::Mul), &[0, 1], d),
        Instr { op: ElementwiseOp::Binary(BinaryOp::Add), args: smallvec![Operand::ResultOf(0), Operand::Input(2)], dtype: d },
    ];
    (inputs, ins)
}

#[test]
fn a_segment_table_lists_first_blocks_then_counts_and_pointers() {
    // 5 elements: 1 block of 256; 1000: 4 blocks; 256: 1 block.
    let (table, blocks) = SegmentTable::new(&[(5, &[0x100, 0x200]), (1000, &[0x300, 0x400]), (256, &[0x500, 0x600])], 256).expect("fits");
    assert_eq!(blocks, 6);
    assert_eq!(table.words[..13], [3, 0, 1, 5, 5, 0x100, 0x200, 1000, 0x300, 0x400, 256, 0x500, 0x600]);
    assert!(table.words[13..].iter().all(|&w| w == 0));
    // Four elements a thread: 1000 elements are 250 threads, one block.
    assert_eq!(SegmentTable::new(&[(5, &[1]), (1000, &[2])], 1024).map(|t| t.1), Some(2));
    // Segments of different arity, none, or more than the table holds: no table.
    assert!(SegmentTable::new(&[(5, &[1]), (5, &[1, 2])], 256).is_none());
    assert!(SegmentTable::new(&[], 256).is_none());
    let many: Vec<(usize, &[u64])> = (0..=batch_capacity(2)).map(|_| (1, &[1u64, 2][..])).collect();
    assert!(SegmentTable::new(&many[..batch_capacity(2)], 256).is_some());
    assert!(SegmentTable::new(&many, 256).is_none());
}

#[test]
fn a_batched_kernel_finds_its_segment_and_calls_the_programs_lane_function() {
    let (inputs, ins) = scaled_sum(DType::F64);
    let p = Program { rank: 0, inputs: &inputs, instrs: &ins, outputs: &[0, 1] };
    let k = elementwise_batched(&p);
    assert_eq!(k.per_thread, 1);
    let lane = format!("{}_lane", k.name);
    let expected = format!(
        "static __device__ __forceinline__ void {lane}(const double a0, const double a1, const double a2, double& o0, double& o1) {{
        const double r0 = tc_mul(a0, a1);
        const double r1 = tc_add(r0, a2);
        o0 = r0;
        o1 = r1;
}}
extern \"C\" __global__ void {name}(const __grid_constant__ TcTable t) {{
    // The segment of this block: the last whose first block is at most blockIdx.x.
    const unsigned long long segments = t.w[0];
    unsigned long long s = 0, hi = segments - 1;
    while (s < hi) {{
        const unsigned long long mid = (s + hi + 1) >> 1;
        if (t.w[1 + mid] <= blockIdx.x) s = mid; else hi = mid - 1;
    }}
    const unsigned long long* seg = t.w + 1 + segments + s * 6;
    const long long n = (long long)seg[0];
    const long long q = (long long)(blockIdx.x - t.w[1 + s]) * blockDim.x + threadIdx.x;
    const double* __restrict__ in0 = (const double*)seg[1];
    const double* __restrict__ in1 = (const double*)seg[2];
    const double* __restrict__ in2 = (const double*)seg[3];
    double* __restrict__ out0 = (double*)seg[4];
    double* __restrict__ out1 = (double*)seg[5];
    if (q < n) {{
        const long long i = q;
        {lane}(in0[i], in1[0], in2[i], out0[i], out1[i]);
    }}
}}
",
        name = k.name
    );
    assert_eq!(k.kernel, expected);
    assert!(k.name.starts_with("tc_batch_"));
    // The lane function is the single vectorized kernel's, so every element gets its bits.
    let (inputs, ins) = scaled_sum(DType::F32);
    let p = Program { rank: 1, inputs: &inputs, instrs: &ins, outputs: &[0, 1] };
    let (single, batched) = (elementwise(&p), elementwise_batched(&p));
    let lane_of = |k: &KernelSource| k.kernel.split("extern").next().expect("helpers first").replace(&k.name, "K");
    assert_eq!(lane_of(&single), lane_of(&batched));
    assert_eq!(batched.per_thread, 4);
    let body = &batched.kernel;
    assert!(body.contains("    const long long nv = n >> 2;\n    if (q < nv) {\n        const float4 v0 = reinterpret_cast<const float4*>(in0)[q];\n        const float s1 = in1[0];\n"), "{body}");
    assert!(body.contains("    } else if (q == nv) {\n        for (long long i = nv << 2; i < n; i++) {\n"), "{body}");
    assert!(body.contains("(v0.w, s1, v2.w, w0.w, w1.w);\n        reinterpret_cast<float4*>(out0)[q] = w0;\n"), "{body}");
}

/// Batched kernels compile, and read their table where it is (the parameter space), with no
/// copy of its 3,968 bytes into each thread's local memory.
#[cfg(feature = "cuda")]
#[test]
fn nvrtc_compiles_batched_kernels_reading_the_table_in_place() {
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("NVRTC not found: skipping the compile check (see docs/GPU.md)");
        return;
    }
    for d in [DType::F32, DType::F64, DType::I32] {
        let (inputs, ins) = scaled_sum(d);
        let k = elementwise_batched(&Program { rank: 0, inputs: &inputs, instrs: &ins, outputs: &[0, 1] });
        let ptx = crate::cuda::compile(&k, "compute_90").unwrap_or_else(|e| panic!("{e}"));
        assert!(ptx.contains(&format!(".entry {}(", k.name)), "{ptx}");
        assert!(!ptx.contains(".local"), "the table is copied to local memory:\n{ptx}");
        assert!(!ptx.contains("fma"), "{ptx}");
    }
}
