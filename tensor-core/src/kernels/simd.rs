//! Runtime CPU feature selection. Hot loops are compiled twice, for the baseline x86-64 and
//! for AVX2, and pick at run time. FMA is never enabled: Rust does not contract `a * b + c`
//! on its own, so both versions compute every element bit for bit alike — and eager and
//! graph execution agree whatever the machine.

/// True when the CPU supports AVX2 (checked once, then cached by std).
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
