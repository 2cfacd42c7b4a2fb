//! Software prefetch: asking for cache lines a kernel will read soon, where the hardware's
//! prefetchers do not see them coming (a GEMM's next output tile, a convolution's next block
//! of weights, read from memory in a model).

/// Asks for the cache lines holding `len` floats from `p` (a hint: it reads nothing and
/// cannot fault, wherever `p` points).
#[inline]
pub(super) fn lines(p: *const f32, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for at in (0..len).step_by(16) {
        // SAFETY: a prefetch reads nothing and cannot fault; SSE is in every x86-64.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(at) as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}
