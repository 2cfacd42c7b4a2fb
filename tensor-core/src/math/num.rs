//! The scalar functions behind every elementwise kernel. Eager kernels, graph kernels and
//! fused graph loops all call these same functions, which is what makes their results
//! identical bit for bit. Integer arithmetic wraps (as release-mode Rust does) and integer
//! division by zero gives 0 (as NumPy does) instead of panicking.

use crate::storage::Element;

/// Arithmetic on every numeric element type.
pub(crate) trait Num: Element + PartialOrd {
    /// `self + o`; for floats, `self`'s NaN when it is one (see `quieted!`).
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    /// `self * o`; for floats, `self`'s NaN when it is one (see `quieted!`).
    fn mul(self, o: Self) -> Self;
    /// `self + o` as the CPU adds: the bits of `add` whenever at most one operand is NaN.
    /// For kernels whose other operand is a scalar known, when they are built, not to be NaN
    /// (they skip `add`'s select).
    fn add_plain(self, o: Self) -> Self {
        self.add(o)
    }
    /// `self * o` as the CPU multiplies: the bits of `mul` whenever at most one operand is
    /// NaN (see `add_plain`).
    fn mul_plain(self, o: Self) -> Self {
        self.mul(o)
    }
    fn div(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn pow(self, o: Self) -> Self;
    fn sign(self) -> Self;
    /// The larger of two values; NaN wins, as in PyTorch's `maximum`.
    fn maximum(self, o: Self) -> Self;
    /// The smaller of two values; NaN wins.
    fn minimum(self, o: Self) -> Self;
    /// The remainder of `self / o` truncated, with `self`'s sign (C's `fmod`; integers: 0
    /// when `o` is 0, as `div`).
    fn fmod(self, o: Self) -> Self;
    /// max(x, 0); NaN stays NaN, as in PyTorch (relu is clamp_min(0), which keeps NaN).
    fn relu(self) -> Self {
        if self > Self::zero() || self.is_nan_value() {
            self
        } else {
            Self::zero()
        }
    }
    /// True when the value is NaN (never for integers).
    fn is_nan_value(self) -> bool;
    /// The smallest value, for max reductions.
    fn lowest() -> Self;
    /// The largest value, for min reductions.
    fn highest() -> Self;
    /// Converts a count to this type (for means).
    fn from_usize(n: usize) -> Self;
}

/// Functions only floats have.
pub(crate) trait Float: Num {
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn tanh(self) -> Self;
    fn sigmoid(self) -> Self;
    /// The error function.
    fn erf(self) -> Self;
    /// GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    fn gelu_tanh(self) -> Self;
    /// GELU, exact form: `0.5 x (1 + erf(x / sqrt(2)))`.
    fn gelu_erf(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    /// The largest integer not above `x` (float dtypes; ±0, ±inf and NaN stay).
    fn floor(self) -> Self;
    /// The smallest integer not below `x`.
    fn ceil(self) -> Self;
    /// The nearest integer, halves to even (`0.5` is 0, `1.5` and `2.5` are 2, as ONNX and NumPy).
    fn round(self) -> Self;
    /// The integer part of `x` (towards zero).
    fn trunc(self) -> Self;
    /// The arcsine (radians; NaN outside [-1, 1]).
    fn asin(self) -> Self;
    /// The arccosine (radians; NaN outside [-1, 1]).
    fn acos(self) -> Self;
    /// The arctangent (radians).
    fn atan(self) -> Self;
    /// The inverse hyperbolic sine.
    fn asinh(self) -> Self;
    /// The inverse hyperbolic cosine (NaN below 1).
    fn acosh(self) -> Self;
    /// The inverse hyperbolic tangent (±inf at ±1, NaN outside).
    fn atanh(self) -> Self;
    /// `self * a + b` with one rounding (one `vfmadd` in the AVX2 and AVX-512 builds, the C
    /// library's correctly rounded `fma` in the baseline build: the same bits everywhere).
    fn mul_add(self, a: Self, b: Self) -> Self;
}

/// `sqrt(2 / pi)`, the scale inside the tanh form of GELU.
pub(crate) const GELU_K: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of the tanh form of GELU.
pub(crate) const GELU_C: f64 = 0.044_715;

macro_rules! impl_num_int {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)] fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)] fn div(self, o: Self) -> Self { self.checked_div(o).unwrap_or(0) }
            #[inline(always)] fn neg(self) -> Self { self.wrapping_neg() }
            #[inline(always)] fn abs(self) -> Self { self.wrapping_abs() }
            #[inline(always)] fn pow(self, o: Self) -> Self { int_pow(self as i64, o as i64) as $t }
            #[inline(always)] fn sign(self) -> Self { self.signum() }
            #[inline(always)] fn maximum(self, o: Self) -> Self { if self >= o { self } else { o } }
            #[inline(always)] fn minimum(self, o: Self) -> Self { if self <= o { self } else { o } }
            #[inline(always)] fn fmod(self, o: Self) -> Self { self.checked_rem(o).unwrap_or(0) }
            #[inline(always)] fn is_nan_value(self) -> bool { false }
            fn lowest() -> Self { <$t>::MIN }
            fn highest() -> Self { <$t>::MAX }
            fn from_usize(n: usize) -> Self { n as $t }
        }
    )*};
}
impl_num_int!(i32, i64);

fn int_pow(base: i64, exp: i64) -> i64 {
    if exp >= 0 {
        base.wrapping_pow(exp.min(u32::MAX as i64) as u32)
    } else {
        match base {
            1 => 1,
            -1 if exp % 2 == 0 => 1,
            -1 => -1,
            _ => 0,
        }
    }
}

// Why float `add` and `mul` return `self`'s NaN when `self` is one: given two NaNs, the CPU
// returns its first operand's; `+` and `*` commute, so which operand comes first is the
// compiler's choice, and an eager loop and a fused loop (or two SIMD builds of one loop) can
// choose differently: the sum of `-NaN` and `+NaN` had either sign. Returning `self`'s NaN
// (quieted, as the CPU would) makes it one. With one NaN operand, or none, the result was one
// already, so kernels whose other operand is a scalar that is not NaN use `add_plain` and
// `mul_plain`, which skip the select. (`-` and `/` do not commute: their order is fixed.)
//
// `quieted!(x, T)`: the NaN `x` with its quiet bit set.
macro_rules! quieted {
    ($x:expr, $t:ty) => {
        <$t>::from_bits($x.to_bits() | (1 << (<$t>::MANTISSA_DIGITS - 2)))
    };
}

macro_rules! impl_num_float {
    ($($t:ty => $fmod:path),*) => {$(
        impl Num for $t {
            // `self`'s NaN when it is one (see `quieted!`).
            #[inline(always)] fn add(self, o: Self) -> Self { if self.is_nan() { quieted!(self, $t) } else { self + o } }
            #[inline(always)] fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)] fn mul(self, o: Self) -> Self { if self.is_nan() { quieted!(self, $t) } else { self * o } }
            #[inline(always)] fn add_plain(self, o: Self) -> Self { self + o }
            #[inline(always)] fn mul_plain(self, o: Self) -> Self { self * o }
            #[inline(always)] fn div(self, o: Self) -> Self { self / o }
            #[inline(always)] fn neg(self) -> Self { -self }
            #[inline(always)] fn abs(self) -> Self { <$t>::abs(self) }
            #[inline(always)] fn pow(self, o: Self) -> Self { <$t>::powf(self, o) }
            #[inline(always)] fn sign(self) -> Self {
                if self > 0.0 { 1.0 } else if self < 0.0 { -1.0 } else { self }
            }
            #[inline(always)] fn maximum(self, o: Self) -> Self {
                if self.is_nan() || self >= o { self } else { o }
            }
            #[inline(always)] fn minimum(self, o: Self) -> Self {
                if self.is_nan() || self <= o { self } else { o }
            }
            // libm's, exact as C's: the remainder is representable, so it never rounds.
            #[inline(always)] fn fmod(self, o: Self) -> Self { $fmod(self, o) }
            #[inline(always)] fn is_nan_value(self) -> bool { self.is_nan() }
            fn lowest() -> Self { <$t>::NEG_INFINITY }
            fn highest() -> Self { <$t>::INFINITY }
            fn from_usize(n: usize) -> Self { n as $t }
        }
    )*};
}
impl_num_float!(f32 => libm::fmodf, f64 => libm::fmod);

impl Float for f32 {
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f32::mul_add(self, a, b)
    }
    #[inline(always)]
    fn exp(self) -> Self {
        super::fastmath::exp_f32(self)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        f32::ln(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        super::fastmath::tanh_f32(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        super::fastmath::sigmoid_f32(self)
    }
    #[inline(always)]
    fn erf(self) -> Self {
        libm::erff(self)
    }
    #[inline(always)]
    fn gelu_tanh(self) -> Self {
        let inner = (self + GELU_C as f32 * self * self * self) * GELU_K as f32;
        0.5 * self * (1.0 + super::fastmath::tanh_f32(inner))
    }
    #[inline(always)]
    fn gelu_erf(self) -> Self {
        0.5 * self * (1.0 + libm::erff(self * std::f32::consts::FRAC_1_SQRT_2))
    }
    // libm's, as `erf`: the same bits on every platform.
    #[inline(always)]
    fn sin(self) -> Self {
        libm::sinf(self)
    }
    #[inline(always)]
    fn cos(self) -> Self {
        libm::cosf(self)
    }
    // libm's too: `rint` rounds halves to even (the default rounding mode), as ONNX's Round.
    #[inline(always)]
    fn floor(self) -> Self {
        libm::floorf(self)
    }
    #[inline(always)]
    fn ceil(self) -> Self {
        libm::ceilf(self)
    }
    #[inline(always)]
    fn round(self) -> Self {
        libm::rintf(self)
    }
    #[inline(always)]
    fn trunc(self) -> Self {
        libm::truncf(self)
    }
    #[inline(always)]
    fn asin(self) -> Self {
        libm::asinf(self)
    }
    #[inline(always)]
    fn acos(self) -> Self {
        libm::acosf(self)
    }
    #[inline(always)]
    fn atan(self) -> Self {
        libm::atanf(self)
    }
    #[inline(always)]
    fn asinh(self) -> Self {
        libm::asinhf(self)
    }
    #[inline(always)]
    fn acosh(self) -> Self {
        libm::acoshf(self)
    }
    #[inline(always)]
    fn atanh(self) -> Self {
        libm::atanhf(self)
    }
}

impl Float for f64 {
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f64::mul_add(self, a, b)
    }
    #[inline(always)]
    fn exp(self) -> Self {
        f64::exp(self)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        f64::ln(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        f64::tanh(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        if self >= 0.0 {
            1.0 / (1.0 + (-self).exp())
        } else {
            let e = self.exp();
            e / (1.0 + e)
        }
    }
    #[inline(always)]
    fn erf(self) -> Self {
        libm::erf(self)
    }
    #[inline(always)]
    fn gelu_tanh(self) -> Self {
        let inner = (self + GELU_C * self * self * self) * GELU_K;
        0.5 * self * (1.0 + inner.tanh())
    }
    #[inline(always)]
    fn gelu_erf(self) -> Self {
        0.5 * self * (1.0 + libm::erf(self * std::f64::consts::FRAC_1_SQRT_2))
    }
    #[inline(always)]
    fn sin(self) -> Self {
        libm::sin(self)
    }
    #[inline(always)]
    fn cos(self) -> Self {
        libm::cos(self)
    }
    #[inline(always)]
    fn floor(self) -> Self {
        libm::floor(self)
    }
    #[inline(always)]
    fn ceil(self) -> Self {
        libm::ceil(self)
    }
    #[inline(always)]
    fn round(self) -> Self {
        libm::rint(self)
    }
    #[inline(always)]
    fn trunc(self) -> Self {
        libm::trunc(self)
    }
    #[inline(always)]
    fn asin(self) -> Self {
        libm::asin(self)
    }
    #[inline(always)]
    fn acos(self) -> Self {
        libm::acos(self)
    }
    #[inline(always)]
    fn atan(self) -> Self {
        libm::atan(self)
    }
    #[inline(always)]
    fn asinh(self) -> Self {
        libm::asinh(self)
    }
    #[inline(always)]
    fn acosh(self) -> Self {
        libm::acosh(self)
    }
    #[inline(always)]
    fn atanh(self) -> Self {
        libm::atanh(self)
    }
}
