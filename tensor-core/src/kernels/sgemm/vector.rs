//! The vector register tiles, AVX-512 and AVX2: `MR` rows by `NV` vectors of columns, their
//! `MR * NV` accumulators in registers for the whole `k` block (each step: `NV` loads of `b`,
//! `MR` broadcasts of `a`, `MR * NV` fused multiply-adds). One definition, written once for
//! both widths by [`vector_tile!`].

/// The tile the product uses with AVX-512 (chosen by measurement, docs/PERFORMANCE.md).
pub(super) type Tile8x32 = Avx512Tile<8, 2>;

/// The tile the product uses with AVX2: 12 accumulators, 2 loads and a broadcast in 15 of the
/// 16 registers.
pub(super) type Tile6x16 = Avx2Tile<6, 2>;

/// A tile type `$name<MR, NV>` of vectors of `$lanes` f32, its loop compiled with
/// `$features` from the level's intrinsics (zero, load, broadcast, fused multiply-add, store).
macro_rules! vector_tile {
    ($name:ident, $module:ident, $lanes:literal, $features:literal, $what:literal,
     $zero:ident, $load:ident, $splat:ident, $fma:ident, $store:ident) => {
        #[doc = concat!("`MR` rows by `", stringify!($lanes), " * NV` columns, with ", $what, ".")]
        pub(super) struct $name<const MR: usize, const NV: usize>;

        impl<const MR: usize, const NV: usize> super::Tile for $name<MR, NV> {
            const MR: usize = MR;
            const NR: usize = $lanes * NV;

            unsafe fn run(kc: usize, a: *const f32, b: (*const f32, usize), c: *mut f32, ldc: usize, load: bool) {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the trait's contract.
                unsafe {
                    $module::tile::<MR, NV>(kc, a, b.0, b.1, c, ldc, load)
                }
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!(concat!($what, " is x86-64 only: {} {:?} {:?} {:?} {} {}"), kc, a, b, c, ldc, load)
            }
        }

        #[cfg(target_arch = "x86_64")]
        mod $module {
            use std::arch::x86_64::*;

            /// See [`super::super::Tile::run`].
            ///
            /// # Safety
            /// The CPU must have the build's features; as `Tile::run`.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn tile<const MR: usize, const NV: usize>(
                kc: usize,
                a: *const f32,
                b: *const f32,
                ldb: usize,
                c: *mut f32,
                ldc: usize,
                load: bool,
            ) {
                let mut acc = [[$zero(); NV]; MR];
                if load {
                    for (r, row) in acc.iter_mut().enumerate() {
                        for (v, x) in row.iter_mut().enumerate() {
                            // SAFETY: (r, lanes * v ..) is inside c's tile.
                            *x = unsafe { $load(c.add(r * ldc + $lanes * v)) };
                        }
                    }
                }
                let (mut ap, mut bp) = (a, b);
                for _ in 0..kc {
                    let mut bv = [$zero(); NV];
                    for (v, x) in bv.iter_mut().enumerate() {
                        // SAFETY: step p's NR values of b.
                        *x = unsafe { $load(bp.add($lanes * v)) };
                    }
                    for (r, row) in acc.iter_mut().enumerate() {
                        // SAFETY: step p's MR values of the a panel.
                        let av = $splat(unsafe { *ap.add(r) });
                        for (x, &bx) in row.iter_mut().zip(&bv) {
                            *x = $fma(av, bx, *x);
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
                        unsafe { $store(c.add(r * ldc + $lanes * v), x) };
                    }
                }
            }
        }
    };
}

vector_tile!(
    Avx512Tile,
    avx512,
    16,
    "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma",
    "AVX-512",
    _mm512_setzero_ps,
    _mm512_loadu_ps,
    _mm512_set1_ps,
    _mm512_fmadd_ps,
    _mm512_storeu_ps
);
vector_tile!(Avx2Tile, avx2, 8, "avx2,fma", "AVX2 and FMA", _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps);
