//! Reading image rows in place with AVX2, for the convolutions that do (`depthwise_rows`,
//! `conv_stem`): vectors of 8 consecutive columns, masked where they meet the edge of a row
//! (a masked load reads the lanes inside and gives zeros for the others, a convolution's
//! padding, without touching their memory), and every other column of 16 for stride 2.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The lanes `l` of the 8 columns `col + l` that lie in `0..w`, all bits set where they do.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn inside(col: isize, w: usize) -> __m256i {
    let c = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(col as i32));
    _mm256_and_si256(_mm256_cmpgt_epi32(c, _mm256_set1_epi32(-1)), _mm256_cmpgt_epi32(_mm256_set1_epi32(w as i32), c))
}

/// The 8 values of a row of `w` at `row` from column `col` on, zero outside the row:
/// a plain load where all 8 lie inside, a masked one otherwise.
///
/// # Safety
/// The CPU must have AVX2; `row` must point at `w` readable values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn load(row: *const f32, col: isize, w: usize) -> __m256 {
    let at = row.wrapping_offset(col);
    // SAFETY: inside the row all 8 are readable; masked, only the lanes inside are read (a
    // masked load touches no other memory and cannot fault there).
    unsafe {
        if col >= 0 && col as usize + 8 <= w {
            _mm256_loadu_ps(at)
        } else {
            _mm256_maskload_ps(at, inside(col, w))
        }
    }
}

/// Lanes 0, 2, 4, 6 of `a`, then of `b`: the even columns of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn evens(a: __m256, b: __m256) -> __m256 {
    // Within each 128-bit half: a0 a2 b0 b2 | a4 a6 b4 b6; then the middle quarters swap.
    let t = _mm256_shuffle_ps::<0b10_00_10_00>(a, b);
    _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(t)))
}

/// Lanes 1, 3, 5, 7 of `a`, then of `b`: the odd columns of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn odds(a: __m256, b: __m256) -> __m256 {
    let t = _mm256_shuffle_ps::<0b11_01_11_01>(a, b);
    _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(t)))
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn reads_the_row_and_zeros_around_it_and_splits_even_and_odd_columns() {
        if crate::kernels::simd::machine_level() < crate::kernels::simd::Level::Avx2 {
            return;
        }
        let row: Vec<f32> = (1..=10).map(|v| v as f32).collect();
        let lanes = |v: __m256| {
            let mut out = [0f32; 8];
            // SAFETY: 8 values into 8.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
            out
        };
        // SAFETY: the CPU has AVX2 (checked); the row holds 10 values.
        unsafe {
            assert_eq!(lanes(load(row.as_ptr(), -1, 10)), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
            assert_eq!(lanes(load(row.as_ptr(), 2, 10)), [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
            assert_eq!(lanes(load(row.as_ptr(), 5, 10)), [6.0, 7.0, 8.0, 9.0, 10.0, 0.0, 0.0, 0.0]);
            assert_eq!(lanes(load(row.as_ptr(), -3, 4)), [0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 0.0]);
            let (a, b) = (load(row.as_ptr(), 0, 10), load(row.as_ptr(), 8, 10));
            assert_eq!(lanes(evens(a, b)), [1.0, 3.0, 5.0, 7.0, 9.0, 0.0, 0.0, 0.0]);
            assert_eq!(lanes(odds(a, b)), [2.0, 4.0, 6.0, 8.0, 10.0, 0.0, 0.0, 0.0]);
        }
    }
}
