//! The AVX-512 register tile: `MR` rows by `NV` vectors of 16 columns, its `MR * NV`
//! accumulators in registers for the whole `k` block (each step: `NV` loads of `b`, `MR`
//! broadcasts of `a`, `MR * NV` `vfmadd`s).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The tile the product uses with AVX-512 (chosen by measurement, docs/PERFORMANCE.md).
pub(super) type Tile8x32 = Avx512Tile<8, 2>;

/// `MR` rows by `16 * NV` columns.
pub(super) struct Avx512Tile<const MR: usize, const NV: usize>;

impl<const MR: usize, const NV: usize> super::Tile for Avx512Tile<MR, NV> {
    const MR: usize = MR;
    const NR: usize = 16 * NV;

    unsafe fn run(kc: usize, a: *const f32, b: (*const f32, usize), c: *mut f32, ldc: usize, load: bool) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the trait's contract.
        unsafe {
            tile::<MR, NV>(kc, a, b.0, b.1, c, ldc, load)
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("AVX-512 is x86-64 only: {kc} {a:?} {b:?} {c:?} {ldc} {load}")
    }
}

/// See [`super::Tile::run`].
///
/// # Safety
/// The CPU must have AVX-512F; as `Tile::run`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn tile<const MR: usize, const NV: usize>(kc: usize, a: *const f32, b: *const f32, ldb: usize, c: *mut f32, ldc: usize, load: bool) {
    let mut acc = [[_mm512_setzero_ps(); NV]; MR];
    if load {
        for (r, row) in acc.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                // SAFETY: (r, 16 v ..) is inside c's tile.
                *x = unsafe { _mm512_loadu_ps(c.add(r * ldc + 16 * v)) };
            }
        }
    }
    let (mut ap, mut bp) = (a, b);
    for _ in 0..kc {
        let mut bv = [_mm512_setzero_ps(); NV];
        for (v, x) in bv.iter_mut().enumerate() {
            // SAFETY: step p's NR values of b.
            *x = unsafe { _mm512_loadu_ps(bp.add(16 * v)) };
        }
        for (r, row) in acc.iter_mut().enumerate() {
            // SAFETY: step p's MR values of the a panel.
            let av = _mm512_set1_ps(unsafe { *ap.add(r) });
            for (x, &bx) in row.iter_mut().zip(&bv) {
                *x = _mm512_fmadd_ps(av, bx, *x);
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
            unsafe { _mm512_storeu_ps(c.add(r * ldc + 16 * v), x) };
        }
    }
}
