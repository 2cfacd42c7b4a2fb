//! The opt-in fast-math mode of generated kernels (docs/GPU.md, "Fast math"): with
//! `TENSOR_CORE_CUDA_FAST_MATH=1` (read once per process) or [`set_cuda_fast_math`], the
//! elementwise kernels' f32 `exp`, `tanh`, `sigmoid`, GELU's tanh form and division use the
//! GPU's approximate instructions (`prelude_fast.cuh`), and f32 `+` and `*` skip the select
//! that keeps a NaN operand's own bits. Not the CPU's bits then, but within stated bounds;
//! graph == eager still holds, since both come from the one generator in the one mode.
//!
//! The mode is part of each kernel's text (the fast functions have names of their own), so a
//! kernel's name, its compiled code in memory and its file in the disk cache never mix the
//! two. The mode is read when a kernel is generated: switch it only between calls.

use crate::switch::Switch;

/// Which functions a generated kernel calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) enum MathMode {
    /// The CPU's own functions, step by step: the CPU's bits (the default).
    #[default]
    CpuBits,
    /// The GPU's approximate instructions for f32 `exp`, `tanh`, `sigmoid`, GELU's tanh
    /// form and division; `+` and `*` without the NaN-operand select.
    Fast,
}

static FAST_MATH: Switch = Switch::new("TENSOR_CORE_CUDA_FAST_MATH", false);

/// The mode kernels are generated in now: [`set_cuda_fast_math`]'s, else the environment's
/// (fast only for `1`).
pub(crate) fn math_mode() -> MathMode {
    if FAST_MATH.on() {
        MathMode::Fast
    } else {
        MathMode::CpuBits
    }
}

/// Turns fast math in generated CUDA kernels on or off for this process (`None`: as
/// `TENSOR_CORE_CUDA_FAST_MATH` says), so that the device checks compare both modes in one
/// run. Kernels generated after it follow it; a captured graph call captures again with
/// the new mode's kernels. Switch it only between calls. Not part of the public API.
#[doc(hidden)]
pub fn set_cuda_fast_math(on: Option<bool>) {
    FAST_MATH.set(on);
}

#[cfg(test)]
mod bounds;
#[cfg(test)]
mod tests {
    use super::*;

    /// The process-wide switch itself. It leaves the override unset, as every other test
    /// expects (the golden tests name their mode and never read it).
    #[test]
    fn set_cuda_fast_math_switches_the_mode_kernels_are_made_in() {
        let from_env = math_mode();
        set_cuda_fast_math(Some(true));
        assert_eq!(math_mode(), MathMode::Fast);
        set_cuda_fast_math(Some(false));
        assert_eq!(math_mode(), MathMode::CpuBits);
        set_cuda_fast_math(None);
        assert_eq!(math_mode(), from_env);
    }
}
