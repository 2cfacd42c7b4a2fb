//! Runtime CPU feature selection. Hot loops are compiled three times — for the baseline
//! x86-64, for AVX2 with FMA, and for AVX-512 — and pick the widest build the CPU runs.
//!
//! Every build computes every element bit for bit alike, so eager and graph execution agree
//! whatever loop runs: Rust never contracts `a * b + c` on its own, division and square root
//! are correctly rounded at every vector width, and where the scalar functions want a fused
//! multiply-add they ask for it with `mul_add`, which is correctly rounded everywhere — one
//! `vfmadd` instruction in the AVX2 and AVX-512 builds, the C library's (correctly rounded)
//! `fma` in the baseline build. The tests force each level in turn and compare the bits.

use std::sync::atomic::{AtomicU8, Ordering};

/// An instruction-set level the hot loops are built for, narrowest first.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::kernels::simd::{level, Level};
/// // The widest build the CPU runs; every level computes the same bits.
/// assert!(matches!(level(), Level::Baseline | Level::Avx2 | Level::Avx512));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// x86-64 as every such CPU has it (SSE2), or any other architecture.
    Baseline,
    /// AVX2 with FMA (x86-64-v3).
    Avx2,
    /// AVX-512 F, VL, BW and DQ with AVX2 and FMA (x86-64-v4).
    Avx512,
}

const UNSET: u8 = u8::MAX;
static DETECTED: AtomicU8 = AtomicU8::new(UNSET);
static MAX: AtomicU8 = AtomicU8::new(Level::Avx512 as u8);

/// The level the hot loops run at: the widest the CPU supports, capped by [`set_max_level`].
///
/// ```
/// use tensor_core::kernels::simd::{level, Level};
/// assert!(level() >= Level::Baseline);
/// ```
#[inline]
pub fn level() -> Level {
    from_u8((machine_level() as u8).min(MAX.load(Ordering::Relaxed)))
}

/// The widest level the CPU supports, whatever [`set_max_level`] caps. Kernels whose choice
/// of algorithm changes the last bits (which convolution runs a layer) choose by this, so the
/// cap changes speed only: on one machine every cap gives the same bits.
#[inline]
pub fn machine_level() -> Level {
    match DETECTED.load(Ordering::Relaxed) {
        UNSET => {
            let l = detect();
            DETECTED.store(l as u8, Ordering::Relaxed);
            l
        }
        l => from_u8(l),
    }
}

/// Held by the crate's tests that cap the level, so that they do not cap it under each
/// other (each sets a cap, runs, and lifts it).
#[cfg(test)]
pub(crate) static LEVEL_CAPS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Caps the level of the loops (for example to compare builds, or to rule one out while
/// debugging); `Level::Avx512` lifts the cap. Every level gives the same bits, so this changes
/// speed only. Fused programs pick their loops when they are built: set it before tracing.
///
/// ```standalone_crate
/// use tensor_core::kernels::simd::{level, set_max_level, Level};
/// set_max_level(Level::Baseline);
/// assert_eq!(level(), Level::Baseline);
/// set_max_level(Level::Avx512);
/// ```
pub fn set_max_level(max: Level) {
    MAX.store(max as u8, Ordering::Relaxed);
}

fn from_u8(l: u8) -> Level {
    match l {
        0 => Level::Baseline,
        1 => Level::Avx2,
        _ => Level::Avx512,
    }
}

fn detect() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let avx2 = has!("avx2") && has!("fma");
        if avx2 && has!("avx512f") && has!("avx512vl") && has!("avx512bw") && has!("avx512dq") {
            return Level::Avx512;
        }
        if avx2 {
            return Level::Avx2;
        }
    }
    Level::Baseline
}

/// Defines a loop in three builds and a function that runs the widest the CPU supports:
/// `multiversion!(fn name<generics>(args) [-> ret] = body;)` where `body` is an
/// `#[inline(always)]` function with the same signature (so each build inlines and
/// vectorizes it).
macro_rules! multiversion {
    ($(#[$m:meta])* $vis:vis fn $name:ident<$($g:ident $(: $b:path)?),*>($($arg:ident: $ty:ty),*) $(-> $ret:ty)? = $body:ident;) => {
        $(#[$m])*
        $vis fn $name<$($g $(: $b)?),*>($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY (of calling the two builds): the CPU must have their features.
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2<$($g $(: $b)?),*>($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
                unsafe fn avx512<$($g $(: $b)?),*>($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                match $crate::kernels::simd::level() {
                    // SAFETY: the CPU supports the build's features (checked by `level`).
                    $crate::kernels::simd::Level::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    $crate::kernels::simd::Level::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::kernels::simd::Level::Baseline => {}
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use multiversion;
