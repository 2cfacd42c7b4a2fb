// The scalar functions of tensor-core's elementwise ops, in CUDA C: the twins of the Rust
// functions in src/math (num.rs, fastmath.rs), one per `CUDA` name of math/functions.rs.
// Every generated kernel starts with this file. It is compiled with --fmad=false, and the
// arithmetic uses the explicitly rounded intrinsics (__fadd_rn, __fmaf_rn, ...), so each step
// rounds exactly as the Rust function's step does: the f32 functions below give the CPU's
// bits. Where the CPU calls the C library (ln, pow, erf, and every f64 transcendental), the
// CUDA library's function stands in: within 2 ulp, not always the same bits (docs/GPU.md).

typedef unsigned char tc_bool;  // Rust's bool: one byte, 0 or 1

// ------------------------------------------------------------------ arithmetic (num.rs)

__device__ __forceinline__ float tc_quiet(float x) { return __int_as_float(__float_as_int(x) | 0x400000); }
__device__ __forceinline__ double tc_quiet(double x) { return __longlong_as_double(__double_as_longlong(x) | 0x8000000000000LL); }

// Float `add` and `mul` return the first operand's NaN (quieted) when it is one (num.rs).
__device__ __forceinline__ float tc_add(float x, float y) { return isnan(x) ? tc_quiet(x) : __fadd_rn(x, y); }
__device__ __forceinline__ double tc_add(double x, double y) { return isnan(x) ? tc_quiet(x) : __dadd_rn(x, y); }
__device__ __forceinline__ float tc_mul(float x, float y) { return isnan(x) ? tc_quiet(x) : __fmul_rn(x, y); }
__device__ __forceinline__ double tc_mul(double x, double y) { return isnan(x) ? tc_quiet(x) : __dmul_rn(x, y); }
__device__ __forceinline__ float tc_add_plain(float x, float y) { return __fadd_rn(x, y); }
__device__ __forceinline__ double tc_add_plain(double x, double y) { return __dadd_rn(x, y); }
__device__ __forceinline__ float tc_mul_plain(float x, float y) { return __fmul_rn(x, y); }
__device__ __forceinline__ double tc_mul_plain(double x, double y) { return __dmul_rn(x, y); }
__device__ __forceinline__ float tc_sub(float x, float y) { return __fsub_rn(x, y); }
__device__ __forceinline__ double tc_sub(double x, double y) { return __dsub_rn(x, y); }
__device__ __forceinline__ float tc_div(float x, float y) { return __fdiv_rn(x, y); }
__device__ __forceinline__ double tc_div(double x, double y) { return __ddiv_rn(x, y); }
__device__ __forceinline__ float tc_neg(float x) { return -x; }
__device__ __forceinline__ double tc_neg(double x) { return -x; }
__device__ __forceinline__ float tc_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double tc_abs(double x) { return fabs(x); }
__device__ __forceinline__ float tc_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double tc_pow(double x, double y) { return pow(x, y); }
template <typename T> __device__ __forceinline__ T tc_sign_float(T x) { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x); }
__device__ __forceinline__ float tc_sign(float x) { return tc_sign_float(x); }
__device__ __forceinline__ double tc_sign(double x) { return tc_sign_float(x); }
// NaN wins, as in PyTorch's maximum and minimum.
__device__ __forceinline__ float tc_maximum(float x, float y) { return (isnan(x) || x >= y) ? x : y; }
__device__ __forceinline__ double tc_maximum(double x, double y) { return (isnan(x) || x >= y) ? x : y; }
__device__ __forceinline__ float tc_minimum(float x, float y) { return (isnan(x) || x <= y) ? x : y; }
__device__ __forceinline__ double tc_minimum(double x, double y) { return (isnan(x) || x <= y) ? x : y; }
__device__ __forceinline__ float tc_fmod(float x, float y) { return fmodf(x, y); }
__device__ __forceinline__ double tc_fmod(double x, double y) { return fmod(x, y); }
// NaN stays NaN (relu is clamp_min(0)).
__device__ __forceinline__ float tc_relu(float x) { return (x > 0.0f || isnan(x)) ? x : 0.0f; }
__device__ __forceinline__ double tc_relu(double x) { return (x > 0.0 || isnan(x)) ? x : 0.0; }

// Integers wrap (as release-mode Rust does); division by zero gives 0 (as NumPy does).
#define TC_INT_FNS(T, U)                                                                          \
    __device__ __forceinline__ T tc_add(T x, T y) { return (T)((U)x + (U)y); }                  \
    __device__ __forceinline__ T tc_add_plain(T x, T y) { return (T)((U)x + (U)y); }            \
    __device__ __forceinline__ T tc_sub(T x, T y) { return (T)((U)x - (U)y); }                  \
    __device__ __forceinline__ T tc_mul(T x, T y) { return (T)((U)x * (U)y); }                  \
    __device__ __forceinline__ T tc_mul_plain(T x, T y) { return (T)((U)x * (U)y); }            \
    __device__ __forceinline__ T tc_div(T x, T y) {                                              \
        const T lowest = (T)((U)1 << (sizeof(T) * 8 - 1));                                      \
        return (y == 0 || (y == (T)-1 && x == lowest)) ? (T)0 : x / y;                           \
    }                                                                                            \
    __device__ __forceinline__ T tc_neg(T x) { return (T)(0 - (U)x); }                           \
    __device__ __forceinline__ T tc_abs(T x) { return x < 0 ? (T)(0 - (U)x) : x; }              \
    __device__ __forceinline__ T tc_sign(T x) { return (T)((x > 0) - (x < 0)); }                 \
    __device__ __forceinline__ T tc_maximum(T x, T y) { return x >= y ? x : y; }                 \
    __device__ __forceinline__ T tc_minimum(T x, T y) { return x <= y ? x : y; }                 \
    __device__ __forceinline__ T tc_fmod(T x, T y) { return (y == 0 || y == (T)-1) ? (T)0 : x % y; } \
    __device__ __forceinline__ T tc_relu(T x) { return x > 0 ? x : (T)0; }                       \
    __device__ __forceinline__ T tc_pow(T x, T y) { return (T)tc_int_pow((long long)x, (long long)y); }
// Rust's checked_div(..).unwrap_or(0) gives 0 for MIN / -1 too (an overflow).
__device__ __forceinline__ long long tc_int_pow(long long base, long long e) {
    if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e % 2 == 0) ? 1 : -1) : 0);
    unsigned long long r = 1, b = (unsigned long long)base;
    unsigned long long n = (unsigned long long)(e > 4294967295LL ? 4294967295LL : e);
    while (n) { if (n & 1) r *= b; b *= b; n >>= 1; }
    return (long long)r;
}
TC_INT_FNS(int, unsigned int)
TC_INT_FNS(long long, unsigned long long)

__device__ __forceinline__ tc_bool tc_not(tc_bool x) { return !x; }

// Comparisons (IEEE: every comparison with NaN is false, but `ne`).
#define TC_CMP(NAME, OP) \
    template <typename T> __device__ __forceinline__ tc_bool tc_cmp_##NAME(T x, T y) { return x OP y; }
TC_CMP(Eq, ==)
TC_CMP(Ne, !=)
TC_CMP(Lt, <)
TC_CMP(Le, <=)
TC_CMP(Gt, >)
TC_CMP(Ge, >=)

// Casts as Rust's `as`: float to int truncates and saturates, NaN gives 0 (cvt.rzi does the
// same); to bool is `!= 0`.
template <typename U> struct tc_caster;
template <> struct tc_caster<float> {
    template <typename T> __device__ static float go(T x) { return (float)x; }
    __device__ static float go(double x) { return __double2float_rn(x); }
};
template <> struct tc_caster<double> {
    template <typename T> __device__ static double go(T x) { return (double)x; }
};
template <> struct tc_caster<int> {
    template <typename T> __device__ static int go(T x) { return (int)x; }
    // Rust's `as` gives 0 for NaN, the conversion instructions their lowest value.
    __device__ static int go(float x) { return isnan(x) ? 0 : __float2int_rz(x); }
    __device__ static int go(double x) { return isnan(x) ? 0 : __double2int_rz(x); }
};
template <> struct tc_caster<long long> {
    template <typename T> __device__ static long long go(T x) { return (long long)x; }
    __device__ static long long go(float x) { return isnan(x) ? 0 : __float2ll_rz(x); }
    __device__ static long long go(double x) { return isnan(x) ? 0 : __double2ll_rz(x); }
};
template <> struct tc_caster<tc_bool> {
    template <typename T> __device__ static tc_bool go(T x) { return x != (T)0; }
};
template <typename U, typename T> __device__ __forceinline__ U tc_cast(T x) { return tc_caster<U>::go(x); }

// clamp_value (functions.rs): below lo gives lo, then above hi gives hi; NaN passes.
template <typename T> __device__ __forceinline__ T tc_clamp_lo(T v, T lo) { return v < lo ? lo : v; }
template <typename T> __device__ __forceinline__ T tc_clamp_hi(T v, T hi) { return v > hi ? hi : v; }
template <typename T> __device__ __forceinline__ T tc_where(tc_bool c, T a, T b) { return c ? a : b; }

// ------------------------------------------------------------------ f32 functions (fastmath.rs)

// The constants (TC_LOG2E, TC_EXP_P0, ...) are fastmath.rs's own, written by the generator
// ahead of this file as exact bit patterns.

// exp's reduction (fastmath::exp_reduce): x clamped to exp's range, then x = k ln2 + r with
// a two-part ln2 (Cody-Waite); returns r, and k in *ki.
__device__ __forceinline__ float tc_exp_reduce(float x, int* ki) {
    float xc = x < TC_EXP_LO ? TC_EXP_LO : x;
    xc = xc > TC_EXP_HI ? TC_EXP_HI : xc;
    float kf = __fmaf_rn(xc, TC_LOG2E, TC_ROUND_MAGIC);
    *ki = __float_as_int(kf) - __float_as_int(TC_ROUND_MAGIC);
    float k = __fsub_rn(kf, TC_ROUND_MAGIC);
    return __fmaf_rn(-k, TC_LN2_LO, __fmaf_rn(-k, TC_LN2_HI, xc));
}

// e^r * 2^k from y = e^r (fastmath::exp_scale): 2^k through the exponent bits, wrapping as
// Rust's `wrapping_add` does, then inf above exp's range and 0 below it.
__device__ __forceinline__ float tc_exp_scale(float y, int ki, float x) {
    y = __int_as_float((int)((unsigned int)__float_as_int(y) + ((unsigned int)ki << 23)));
    y = x > TC_EXP_HI ? __int_as_float(0x7f800000) : y;
    return x < TC_EXP_LO ? 0.0f : y;
}

// e^x: the reduction, a degree-6 polynomial in r, the scaling (fastmath::exp_f32).
__device__ __forceinline__ float tc_exp(float x) {
    // A NaN passes through the CPU's arithmetic as itself (quieted); the GPU's arithmetic
    // makes its own NaN, whose bits the exponent step would turn into a number.
    if (isnan(x)) return tc_quiet(x);
    int ki;
    float r = tc_exp_reduce(x, &ki);
    float p = TC_EXP_P0;
    p = __fmaf_rn(p, r, TC_EXP_P1);
    p = __fmaf_rn(p, r, TC_EXP_P2);
    p = __fmaf_rn(p, r, TC_EXP_P3);
    p = __fmaf_rn(p, r, TC_EXP_P4);
    p = __fmaf_rn(p, r, TC_EXP_P5);
    return tc_exp_scale(__fadd_rn(__fmaf_rn(p, __fmul_rn(r, r), r), 1.0f), ki, x);
}

// tanh(x): the odd rational approximation of Eigen and XLA (fastmath::tanh_by), its one
// quotient by `div`.
template <typename Div> __device__ __forceinline__ float tc_tanh_by(float x, Div div) {
    const float clampv = TC_TANH_CLAMP;
    float xc = x < -clampv ? -clampv : x;
    xc = xc > clampv ? clampv : xc;
    float x2 = __fmul_rn(xc, xc);
    float p = TC_TANH_P0;
    p = __fmaf_rn(p, x2, TC_TANH_P1);
    p = __fmaf_rn(p, x2, TC_TANH_P2);
    p = __fmaf_rn(p, x2, TC_TANH_P3);
    p = __fmaf_rn(p, x2, TC_TANH_P4);
    p = __fmaf_rn(p, x2, TC_TANH_P5);
    p = __fmaf_rn(p, x2, TC_TANH_P6);
    float q = TC_TANH_Q0;
    q = __fmaf_rn(q, x2, TC_TANH_Q1);
    q = __fmaf_rn(q, x2, TC_TANH_Q2);
    q = __fmaf_rn(q, x2, TC_TANH_Q3);
    float t = div(__fmul_rn(xc, p), q);
    t = fabsf(x) > clampv ? (x > 0.0f ? 1.0f : -1.0f) : t;
    return fabsf(x) < TC_TANH_TINY ? x : t;
}

// IEEE division, rounded to nearest.
struct tc_div_ieee {
    __device__ __forceinline__ float operator()(float a, float b) const { return __fdiv_rn(a, b); }
};

// tanh(x) for f32 (fastmath::tanh_f32).
__device__ __forceinline__ float tc_tanh(float x) { return tc_tanh_by(x, tc_div_ieee()); }

__device__ __forceinline__ float tc_sigmoid(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, tc_exp(-x))); }

__device__ __forceinline__ float tc_gelu_tanh(float x) {
    float cube = __fmul_rn(__fmul_rn(__fmul_rn((float)TC_GELU_C, x), x), x);
    float inner = __fmul_rn(__fadd_rn(x, cube), (float)TC_GELU_K);
    return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tc_tanh(inner)));
}

// The C library's functions on the CPU (glibc, libm): CUDA's stand in.
__device__ __forceinline__ float tc_ln(float x) { return logf(x); }
__device__ __forceinline__ float tc_sqrt(float x) { return __fsqrt_rn(x); }
__device__ __forceinline__ float tc_erf(float x) { return erff(x); }
__device__ __forceinline__ float tc_sin(float x) { return sinf(x); }
__device__ __forceinline__ float tc_cos(float x) { return cosf(x); }
__device__ __forceinline__ float tc_floor(float x) { return floorf(x); }
__device__ __forceinline__ float tc_ceil(float x) { return ceilf(x); }
__device__ __forceinline__ float tc_round(float x) { return rintf(x); }
__device__ __forceinline__ float tc_trunc(float x) { return truncf(x); }
__device__ __forceinline__ float tc_asin(float x) { return asinf(x); }
__device__ __forceinline__ float tc_acos(float x) { return acosf(x); }
__device__ __forceinline__ float tc_atan(float x) { return atanf(x); }
__device__ __forceinline__ float tc_asinh(float x) { return asinhf(x); }
__device__ __forceinline__ float tc_acosh(float x) { return acoshf(x); }
__device__ __forceinline__ float tc_atanh(float x) { return atanhf(x); }
__device__ __forceinline__ float tc_gelu_erf(float x) {
    return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, erff(__fmul_rn(x, TC_FRAC_1_SQRT_2_F32))));
}

// ------------------------------------------------------------------ f64 functions (num.rs)

__device__ __forceinline__ double tc_exp(double x) { return exp(x); }
__device__ __forceinline__ double tc_ln(double x) { return log(x); }
__device__ __forceinline__ double tc_sqrt(double x) { return __dsqrt_rn(x); }
__device__ __forceinline__ double tc_tanh(double x) { return tanh(x); }
__device__ __forceinline__ double tc_erf(double x) { return erf(x); }
__device__ __forceinline__ double tc_sin(double x) { return sin(x); }
__device__ __forceinline__ double tc_cos(double x) { return cos(x); }
__device__ __forceinline__ double tc_floor(double x) { return floor(x); }
__device__ __forceinline__ double tc_ceil(double x) { return ceil(x); }
__device__ __forceinline__ double tc_round(double x) { return rint(x); }
__device__ __forceinline__ double tc_trunc(double x) { return trunc(x); }
__device__ __forceinline__ double tc_asin(double x) { return asin(x); }
__device__ __forceinline__ double tc_acos(double x) { return acos(x); }
__device__ __forceinline__ double tc_atan(double x) { return atan(x); }
__device__ __forceinline__ double tc_asinh(double x) { return asinh(x); }
__device__ __forceinline__ double tc_acosh(double x) { return acosh(x); }
__device__ __forceinline__ double tc_atanh(double x) { return atanh(x); }
__device__ __forceinline__ double tc_sigmoid(double x) {
    if (x >= 0.0) return __ddiv_rn(1.0, __dadd_rn(1.0, exp(-x)));
    double e = exp(x);
    return __ddiv_rn(e, __dadd_rn(1.0, e));
}
__device__ __forceinline__ double tc_gelu_tanh(double x) {
    double inner = __dmul_rn(__dadd_rn(x, __dmul_rn(__dmul_rn(__dmul_rn(TC_GELU_C, x), x), x)), TC_GELU_K);
    return __dmul_rn(__dmul_rn(0.5, x), __dadd_rn(1.0, tanh(inner)));
}
__device__ __forceinline__ double tc_gelu_erf(double x) {
    return __dmul_rn(__dmul_rn(0.5, x), __dadd_rn(1.0, erf(__dmul_rn(x, TC_FRAC_1_SQRT_2_F64))));
}
