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

/// The level whose hand-written register tiles (the convolution kernels' blockings) run
/// fastest here: [`level`], except on a CPU that has AVX-512 but runs it at AVX2's rate
/// ([`half_rate_avx512`]), where it is AVX2. There the FMA peak is the same with 8 lanes as
/// with 16, and the tiles tuned for AVX2 measured faster than the AVX-512 paths
/// (docs/PERFORMANCE.md, "W9 on AMD's Zen 4"). Kernels whose bits are the general path's
/// choose by this; those whose choice changes the last bits choose by [`machine_tile_level`].
///
/// ```
/// use tensor_core::kernels::simd::{level, tile_level};
/// assert!(tile_level() <= level());
/// ```
#[inline]
pub fn tile_level() -> Level {
    tiles_for(level())
}

/// [`tile_level`] for the CPU's own level, whatever [`set_max_level`] caps (as
/// [`machine_level`] is to [`level`]).
#[inline]
pub fn machine_tile_level() -> Level {
    tiles_for(machine_level())
}

fn tiles_for(l: Level) -> Level {
    if l == Level::Avx512 && half_rate_avx512() {
        Level::Avx2
    } else {
        l
    }
}

/// Whether this CPU executes each 512-bit instruction as two 256-bit halves: AMD's Zen 4
/// (family 0x19; its Zen 3 siblings have no AVX-512). Zen 5 (family 0x1A) and Intel's server
/// cores run 512-bit FMAs at full rate. (Intel parts with a single 512-bit FMA unit also have
/// AVX2's peak; they are not told apart here and keep the AVX-512 paths.)
pub fn half_rate_avx512() -> bool {
    static HALF_RATE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HALF_RATE.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::__cpuid;
            let (vendor, signature) = (__cpuid(0), __cpuid(1).eax);
            half_rate_cpu([vendor.ebx, vendor.edx, vendor.ecx], signature)
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// [`half_rate_avx512`] from CPUID's vendor words (leaf 0: `ebx`, `edx`, `ecx`) and the
/// processor signature (leaf 1, `eax`): AMD, family 0x19 (base 0xF plus extended 0x0A).
fn half_rate_cpu(vendor: [u32; 3], signature: u32) -> bool {
    const AMD: [u32; 3] = [u32::from_le_bytes(*b"Auth"), u32::from_le_bytes(*b"enti"), u32::from_le_bytes(*b"cAMD")];
    let family = ((signature >> 8) & 0xf) + ((signature >> 20) & 0xff);
    vendor == AMD && family == 0x19
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

#[cfg(test)]
mod tests {
    use super::*;

    fn vendor(name: &[u8; 12]) -> [u32; 3] {
        let word = |i: usize| u32::from_le_bytes(name[i * 4..i * 4 + 4].try_into().unwrap());
        [word(0), word(1), word(2)]
    }

    /// Zen 4 (family 0x19) runs AVX-512 at half rate; Zen 5 (0x1A) and Intel's cores do not.
    #[test]
    fn half_rate_avx512_is_amds_family_0x19() {
        let (amd, intel) = (vendor(b"AuthenticAMD"), vendor(b"GenuineIntel"));
        assert!(half_rate_cpu(amd, 0x00A1_0F11), "EPYC 9004 (Genoa, Zen 4)");
        assert!(half_rate_cpu(amd, 0x00A6_0F12), "Ryzen 7040 (Phoenix, Zen 4)");
        assert!(!half_rate_cpu(amd, 0x00B0_0F21), "EPYC 9005 (Turin, Zen 5)");
        assert!(!half_rate_cpu(amd, 0x0080_0F12), "EPYC 7001 (Naples, Zen 1: family 0x17)");
        assert!(!half_rate_cpu(intel, 0x0008_06F8), "Xeon 4th gen (Sapphire Rapids)");
        assert!(!half_rate_cpu(intel, 0x00A1_0F11), "an Intel signature that reads as family 0x19");
    }

    /// The tile level is the level but on a half-rate AVX-512 CPU, and never above it.
    #[test]
    fn tile_level_is_avx2_only_where_avx512_runs_at_half_rate() {
        let _no_cap_changes_meanwhile = LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        assert!(tile_level() <= level() && machine_tile_level() <= machine_level());
        let half = machine_level() == Level::Avx512 && half_rate_avx512();
        assert_eq!(machine_tile_level() == Level::Avx2, machine_level() == Level::Avx2 || half);
        assert_eq!(tiles_for(Level::Avx2), Level::Avx2);
        assert_eq!(tiles_for(Level::Baseline), Level::Baseline);
        assert_eq!(tiles_for(Level::Avx512), if half_rate_avx512() { Level::Avx2 } else { Level::Avx512 });
    }
}
