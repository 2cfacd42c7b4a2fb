// Opt-in fast math (TENSOR_CORE_CUDA_FAST_MATH=1, cuda/fast_math.rs, docs/GPU.md "Fast math"):
// the f32 functions that stand in for prelude.cuh's in kernels generated in that mode. They
// use the GPU's approximate instructions, as XLA's and PyTorch's fast-math builds do, so
// they do not give the CPU's bits, only results within the bounds docs/GPU.md states; at the
// special values they give the CPU's results (NaN stays NaN, exp(-inf) = 0, exp(+inf) = inf,
// exp's overflow and flush to 0 at the ends of its range, tanh(+-inf) = +-1, tanh(+-0) = +-0,
// sigmoid's 0 and 1). Only the translation units of kernels that call them include this file,
// so every other kernel's unit stays byte for byte what it was.

// 2^x within 2 ulp of the rounded result (PTX ISA); subnormal inputs and results flush to 0,
// which the callers below never meet (their arguments lie in [-0.5, 0.5]).
__device__ __forceinline__ float tc_ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// 1/x within 1 ulp (PTX ISA); 1/0 = inf, 1/inf = 0, and a result below 2^-126 flushes to 0.
__device__ __forceinline__ float tc_rcp_approx(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// e^x: tc_exp's reduction x = k ln2 + r (two-part ln2, so the error does not grow with |x|),
// then 2^(r log2 e) by ex2.approx in place of the degree-6 polynomial, and tc_exp's scaling
// by 2^k (exact: the clamp keeps the result a normal number).
__device__ __forceinline__ float tc_fast_exp(float x) {
    int ki;
    float r = tc_exp_reduce(x, &ki);
    float y = tc_exp_scale(tc_ex2_approx(__fmul_rn(r, TC_LOG2E)), ki, x);
    // A NaN passes as itself (quieted), as on the CPU: the exponent step would have turned
    // the GPU's own NaN into a number. A select, not tc_exp's early return (a branch).
    return isnan(x) ? tc_quiet(x) : y;
}

// A quotient as a product with rcp.approx's reciprocal.
struct tc_div_by_rcp {
    __device__ __forceinline__ float operator()(float a, float b) const { return __fmul_rn(a, tc_rcp_approx(b)); }
};

// tanh(x): tc_tanh's odd rational, its one division a reciprocal by rcp.approx and a product
// (the denominator lies in [0.0049, 0.91], far from rcp's flush).
__device__ __forceinline__ float tc_fast_tanh(float x) { return tc_tanh_by(x, tc_div_by_rcp()); }

// 1 / (1 + e^-x) with the fast exp and reciprocal. Where 1 + e^-x rounds to 1 (x > 17, and
// +inf) the result is exactly 1, as on the CPU, whatever rcp.approx would make of 1.
__device__ __forceinline__ float tc_fast_sigmoid(float x) {
    const float d = __fadd_rn(1.0f, tc_fast_exp(-x));
    return d == 1.0f ? 1.0f : tc_rcp_approx(d);
}

__device__ __forceinline__ float tc_fast_gelu_tanh(float x) {
    float cube = __fmul_rn(__fmul_rn(__fmul_rn((float)TC_GELU_C, x), x), x);
    float inner = __fmul_rn(__fadd_rn(x, cube), (float)TC_GELU_K);
    return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tc_fast_tanh(inner)));
}

// x / y within 2 ulp over the whole range (div.full scales the operands where 1/y would leave
// the normal range, which div.approx and __fdividef do not); gpu_check compares its
// infinities and NaNs with the CPU's.
__device__ __forceinline__ float tc_fast_div(float x, float y) {
    float d;
    asm("div.full.f32 %0, %1, %2;" : "=f"(d) : "f"(x), "f"(y));
    return d;
}
