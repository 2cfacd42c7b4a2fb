//! Counter-based random numbers: Philox 4x32-10 (Salmon et al., "Parallel random numbers: as
//! easy as 1, 2, 3", 2011), the generator cuRAND, PyTorch and JAX use for the same reason.
//!
//! A draw is a pure function of `(key, counter)` — the state of a `Generator` — and of each
//! element's index: element `i` takes its bits from the Philox block whose 128-bit counter is
//! `(block of i, counter)`, so a draw's numbers never depend on how the work is split over
//! threads, nor on whether it runs eagerly or in a graph. Drawing advances the state's counter
//! by one, which gives each draw its own 2^64 blocks.
//!
//! - uniform f32 in `[0, 1)`: 4 per block, the top 24 bits of a word times 2^-24;
//! - uniform f64 in `[0, 1)`: 2 per block, the top 53 bits of two words times 2^-53;
//! - normal (Box-Muller, computed in f64): one per block, `sqrt(-2 ln u1) cos(2 pi u2)` with
//!   `u1` in `(0, 1]` and `u2` in `[0, 1)` from the block's two halves.

use super::parallel::par_min_len;
use rayon::prelude::*;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// The Philox 4x32 block function with 10 rounds.
pub fn philox4x32_10(mut ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let p0 = u64::from(M0) * u64::from(ctr[0]);
        let p1 = u64::from(M1) * u64::from(ctr[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        ctr = [hi1 ^ ctr[1] ^ k[0], lo1, hi0 ^ ctr[3] ^ k[1], lo0];
    }
    ctr
}

/// The random words of block `block` of the draw at `(key, counter)`.
#[inline]
fn block(key: u64, counter: u64, block: u64) -> [u32; 4] {
    philox4x32_10([block as u32, (block >> 32) as u32, counter as u32, (counter >> 32) as u32], [key as u32, (key >> 32) as u32])
}

/// 53 random bits from two words, as an f64 in `[0, 1)`.
#[inline]
fn unit_f64(hi: u32, lo: u32) -> f64 {
    (((u64::from(hi) << 32) | u64::from(lo)) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Fills `out` with element `start + j` at `out[j]` of a draw, in parallel chunks for long
/// outputs; `fill` writes one chunk given its first element's index.
fn fill_parallel<T: Send>(out: &mut [T], fill: impl Fn(usize, &mut [T]) + Sync) {
    const CHUNK: usize = 4096;
    if out.len() >= par_min_len() {
        out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, o)| fill(c * CHUNK, o));
    } else {
        out.chunks_mut(CHUNK).enumerate().for_each(|(c, o)| fill(c * CHUNK, o));
    }
}

/// `n` uniform f32 values in `[0, 1)`.
pub fn uniform_f32(key: u64, counter: u64, n: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; n];
    // Chunks start at multiples of 4, so each chunk covers whole blocks.
    fill_parallel(&mut out, |start, o| {
        for (b, quad) in o.chunks_mut(4).enumerate() {
            let words = block(key, counter, ((start / 4) + b) as u64);
            for (v, w) in quad.iter_mut().zip(words) {
                *v = (w >> 8) as f32 * (1.0 / (1u32 << 24) as f32);
            }
        }
    });
    out
}

/// `n` uniform f64 values in `[0, 1)`.
pub fn uniform_f64(key: u64, counter: u64, n: usize) -> Vec<f64> {
    let mut out = vec![0.0f64; n];
    fill_parallel(&mut out, |start, o| {
        for (b, pair) in o.chunks_mut(2).enumerate() {
            let w = block(key, counter, ((start / 2) + b) as u64);
            pair[0] = unit_f64(w[0], w[1]);
            if let Some(second) = pair.get_mut(1) {
                *second = unit_f64(w[2], w[3]);
            }
        }
    });
    out
}

/// `n` standard normal values, computed in f64.
pub fn normal_f64(key: u64, counter: u64, n: usize) -> Vec<f64> {
    let mut out = vec![0.0f64; n];
    fill_parallel(&mut out, |start, o| {
        for (j, v) in o.iter_mut().enumerate() {
            let w = block(key, counter, (start + j) as u64);
            // u1 in (0, 1], so ln(u1) is finite.
            let u1 = 1.0 - unit_f64(w[0], w[1]);
            let u2 = unit_f64(w[2], w[3]);
            *v = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The known-answer vectors of the Random123 distribution (kat_vectors, philox4x32 10).
    #[test]
    fn philox_matches_the_reference_vectors() {
        assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
        assert_eq!(philox4x32_10([u32::MAX; 4], [u32::MAX; 2]), [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]);
        let pi_ctr = [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344];
        assert_eq!(philox4x32_10(pi_ctr, [0xa409_3822, 0x299f_31d0]), [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]);
    }

    #[test]
    fn element_values_depend_only_on_their_index() {
        // A prefix of a longer draw is the shorter draw, whatever the chunking.
        let long = uniform_f32(7, 3, 100_003);
        assert_eq!(&long[..10], &uniform_f32(7, 3, 10)[..]);
        assert_eq!(&normal_f64(1, 2, 9_000)[..5], &normal_f64(1, 2, 5)[..]);
        assert_eq!(&uniform_f64(1, 2, 9)[..3], &uniform_f64(1, 2, 3)[..]);
        // Another counter or key gives other numbers.
        assert_ne!(uniform_f32(7, 4, 10), uniform_f32(7, 3, 10));
        assert_ne!(uniform_f32(8, 3, 10), uniform_f32(7, 3, 10));
    }

    #[test]
    fn the_distributions_have_their_moments() {
        let u = uniform_f32(1, 0, 200_000);
        assert!(u.iter().all(|&v| (0.0..1.0).contains(&v)));
        let mean = u.iter().map(|&v| f64::from(v)).sum::<f64>() / u.len() as f64;
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
        let z = normal_f64(2, 0, 200_000);
        let m = z.iter().sum::<f64>() / z.len() as f64;
        let var = z.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / z.len() as f64;
        assert!(m.abs() < 0.01 && (var - 1.0).abs() < 0.01, "mean {m}, variance {var}");
    }
}
