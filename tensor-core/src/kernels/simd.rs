//! Runtime CPU feature selection. Hot loops are compiled twice, for the baseline x86-64 and
//! for AVX2 with FMA, and pick at run time.
//!
//! Both builds compute every element bit for bit alike, so eager and graph execution agree
//! whatever loop runs: Rust never contracts `a * b + c` on its own, and where the scalar
//! functions want a fused multiply-add they ask for it with `mul_add`, which is correctly
//! rounded everywhere — one `vfmadd` instruction in the AVX2+FMA build, the C library's
//! (correctly rounded) `fma` in the baseline build.

/// True when the CPU supports AVX2 and FMA (checked once, then cached by std).
#[inline]
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
