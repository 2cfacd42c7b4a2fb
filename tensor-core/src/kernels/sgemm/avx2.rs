//! The AVX2 register tile: `MR` rows by `NV` vectors of 8 columns, its `MR * NV`
//! accumulators in registers for the whole `k` block (each step: `NV` loads of `b`, `MR`
//! broadcasts of `a`, `MR * NV` `vfmadd`s).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The tile the product uses with AVX2: 12 accumulators, 2 loads and a broadcast in 15 of the
/// 16 registers.
pub(super) type Tile6x16 = Avx2Tile<6, 2>;

/// `MR` rows by `8 * NV` columns.
pub(super) struct Avx2Tile<const MR: usize, const NV: usize>;

impl<const MR: usize, const NV: usize> super::Tile for Avx2Tile<MR, NV> {
    const MR: usize = MR;
    const NR: usize = 8 * NV;

    unsafe fn run(kc: usize, a: *const f32, b: (*const f32, usize), c: *mut f32, ldc: usize, load: bool) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the trait's contract.
        unsafe {
            tile::<MR, NV>(kc, a, b.0, b.1, c, ldc, load)
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("AVX2 is x86-64 only: {kc} {a:?} {b:?} {c:?} {ldc} {load}")
    }
}

/// See [`super::Tile::run`].
///
/// # Safety
/// The CPU must have AVX2 and FMA; as `Tile::run`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const MR: usize, const NV: usize>(kc: usize, a: *const f32, b: *const f32, ldb: usize, c: *mut f32, ldc: usize, load: bool) {
    let mut acc = [[_mm256_setzero_ps(); NV]; MR];
    if load {
        for (r, row) in acc.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                // SAFETY: (r, 8 v ..) is inside c's tile.
                *x = unsafe { _mm256_loadu_ps(c.add(r * ldc + 8 * v)) };
            }
        }
    }
    let (mut ap, mut bp) = (a, b);
    for _ in 0..kc {
        let mut bv = [_mm256_setzero_ps(); NV];
        for (v, x) in bv.iter_mut().enumerate() {
            // SAFETY: step p's NR values of b.
            *x = unsafe { _mm256_loadu_ps(bp.add(8 * v)) };
        }
        for (r, row) in acc.iter_mut().enumerate() {
            // SAFETY: step p's MR values of the a panel.
            let av = _mm256_set1_ps(unsafe { *ap.add(r) });
            for (x, &bx) in row.iter_mut().zip(&bv) {
                *x = _mm256_fmadd_ps(av, bx, *x);
            }
        }
        // SAFETY: advancing within the panels (one step past the last at the end).
        unsafe {
            ap = ap.add(MR);
            bp = bp.add(ldb);
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (v, &x) in row.iter().enumerate() {
            // SAFETY: as the loads.
            unsafe { _mm256_storeu_ps(c.add(r * ldc + 8 * v), x) };
        }
    }
}
