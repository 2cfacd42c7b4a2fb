//! The portable register tile, for CPUs without AVX2: plain arrays and `f32::mul_add`
//! (correctly rounded everywhere, so the same bits as the vector tiles).

/// 4 rows by 8 columns.
pub(super) struct Tile4x8;

const MR: usize = 4;
const NR: usize = 8;

impl super::Tile for Tile4x8 {
    const MR: usize = MR;
    const NR: usize = NR;

    unsafe fn run(kc: usize, a: *const f32, (b, ldb): (*const f32, usize), c: *mut f32, ldc: usize, load: bool) {
        let mut acc = [[0f32; NR]; MR];
        if load {
            for (r, row) in acc.iter_mut().enumerate() {
                // SAFETY: row r of c's tile (the trait's contract).
                row.copy_from_slice(unsafe { std::slice::from_raw_parts(c.add(r * ldc), NR) });
            }
        }
        // SAFETY: the panel of a holds kc steps of MR values.
        let a = unsafe { std::slice::from_raw_parts(a, kc * MR) };
        for (p, ap) in a.chunks_exact(MR).enumerate() {
            // SAFETY: b's row p holds NR values.
            let bp = unsafe { std::slice::from_raw_parts(b.add(p * ldb), NR) };
            for (row, &av) in acc.iter_mut().zip(ap) {
                for (x, &bv) in row.iter_mut().zip(bp) {
                    *x = av.mul_add(bv, *x);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            // SAFETY: as the loads.
            unsafe { std::slice::from_raw_parts_mut(c.add(r * ldc), NR) }.copy_from_slice(row);
        }
    }
}
