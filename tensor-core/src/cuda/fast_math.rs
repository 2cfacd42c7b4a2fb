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

use std::sync::atomic::{AtomicU8, Ordering};

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

/// 0: as `TENSOR_CORE_CUDA_FAST_MATH` says; 1: off; 2: on.
static OVERRIDE: AtomicU8 = AtomicU8::new(0);

/// The mode kernels are generated in now: [`set_cuda_fast_math`]'s, else the environment's.
pub(crate) fn math_mode() -> MathMode {
    static FROM_ENV: std::sync::OnceLock<MathMode> = std::sync::OnceLock::new();
    let from_env = || *FROM_ENV.get_or_init(|| mode_from_env(std::env::var("TENSOR_CORE_CUDA_FAST_MATH").ok().as_deref()));
    mode_from(OVERRIDE.load(Ordering::Relaxed), from_env)
}

/// Fast only for `1`: unset, `0` or anything else keeps the CPU's bits.
fn mode_from_env(value: Option<&str>) -> MathMode {
    match value.map(str::trim) {
        Some("1") => MathMode::Fast,
        _ => MathMode::CpuBits,
    }
}

/// The override when one is set, else what the environment says (asked only then).
fn mode_from(override_code: u8, from_env: impl FnOnce() -> MathMode) -> MathMode {
    match override_code {
        1 => MathMode::CpuBits,
        2 => MathMode::Fast,
        _ => from_env(),
    }
}

fn override_code(on: Option<bool>) -> u8 {
    match on {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    }
}

/// Turns fast math in generated CUDA kernels on or off for this process (`None`: as
/// `TENSOR_CORE_CUDA_FAST_MATH` says), so that the device checks compare both modes in one
/// run. Kernels generated after it follow it; a captured graph call captures again with
/// the new mode's kernels. Switch it only between calls. Not part of the public API.
#[doc(hidden)]
pub fn set_cuda_fast_math(on: Option<bool>) {
    OVERRIDE.store(override_code(on), Ordering::Relaxed);
}

#[cfg(test)]
mod bounds;
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_1_in_the_environment_turns_fast_math_on() {
        assert_eq!(mode_from_env(Some("1")), MathMode::Fast);
        assert_eq!(mode_from_env(Some(" 1\n")), MathMode::Fast);
        for off in [None, Some("0"), Some(""), Some("true"), Some("2")] {
            assert_eq!(mode_from_env(off), MathMode::CpuBits, "{off:?}");
        }
    }

    #[test]
    fn the_override_wins_and_none_falls_back_to_the_environment() {
        let env_says = |m: MathMode| move || m;
        for env in [MathMode::CpuBits, MathMode::Fast] {
            assert_eq!(mode_from(override_code(Some(true)), env_says(env)), MathMode::Fast);
            assert_eq!(mode_from(override_code(Some(false)), env_says(env)), MathMode::CpuBits);
            assert_eq!(mode_from(override_code(None), env_says(env)), env);
        }
        // The environment is not read while an override is set.
        assert_eq!(mode_from(2, || panic!("read the environment")), MathMode::Fast);
    }

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
