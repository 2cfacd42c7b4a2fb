//! Adding a per-channel bias to a `[channels, plane]` block, as the convolutions' last step:
//! one vector loop per channel with the bias as a plain scalar.

use super::simd::multiversion;
use crate::math::Float;

multiversion! {
    /// `out[c, i] += bias[c]` for `out` `[bias.len(), plane]`, with `add`'s bits.
    pub(super) fn add<T: Float>(out: &mut [T], bias: &[T], plane: usize) = add_body;
}

#[inline(always)]
fn add_body<T: Float>(out: &mut [T], bias: &[T], plane: usize) {
    for (row, &b) in out.chunks_mut(plane).zip(bias) {
        // A bias that is not NaN takes `add`'s bits without its select (see `Num`).
        match b.is_nan_value() {
            false => row.iter_mut().for_each(|v| *v = v.add_plain(b)),
            true => row.iter_mut().for_each(|v| *v = v.add(b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::simd::{set_max_level, Level};
    use crate::math::Num;

    #[test]
    fn adds_each_channels_bias_with_adds_bits_at_every_level() {
        let quiet_nan = f32::from_bits(0x7fc0_1234);
        let x: Vec<f32> = vec![1.0, -2.5, quiet_nan, 0.25, 1e30, -0.0, 3.0, f32::INFINITY, 7.0];
        let bias = [0.5f32, -1e30, f32::NAN];
        let want: Vec<u32> = x.chunks(3).zip(bias).flat_map(|(row, b)| row.iter().map(move |v| v.add(b).to_bits())).collect();
        let _only_this_test_caps_the_level = crate::kernels::simd::LEVEL_CAPS.lock().unwrap_or_else(|e| e.into_inner());
        for cap in [Level::Baseline, Level::Avx2, Level::Avx512] {
            set_max_level(cap);
            let mut out = x.clone();
            add(&mut out, &bias, 3);
            set_max_level(Level::Avx512);
            assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "{cap:?}");
        }
        // By hand where no NaN is involved.
        let mut out = vec![1.0f64, 2.0, 3.0, 4.0];
        add(&mut out, &[10.0, -1.0], 2);
        assert_eq!(out, [11.0, 12.0, 2.0, 3.0]);
    }
}
