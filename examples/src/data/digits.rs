//! The UCI optical digits (scikit-learn's `load_digits`): 1,797 images of 8x8 pixels with gray
//! levels 0..16, shipped gzipped in `examples/data/digits/` and compiled into the binary.
//!
//! Each image becomes a LeNet-5 input of 1x28x28: pixels scaled to `[0, 1]` (divided by 16),
//! upscaled 3x by **nearest neighbour** to 24x24, then padded with 2 zero pixels on each side.
//! Nearest rather than bilinear because each source pixel is itself a count over a 4x4 block
//! of the original 32x32 bitmap: a 3x3 block per pixel keeps exactly the data there is and
//! invents no in-between values. The digit then fills the middle 24x24 of the frame, about
//! as MNIST's digits fill theirs (20x20 inside 28x28).
//!
//! The train/test split is fixed: a SplitMix64 shuffle with seed [`SPLIT_SEED`] (a
//! generator written out in [`super::SplitMix64`], so the split never changes with a crate
//! version), the first [`TEST_SIZE`] = 360 for testing and the other 1,437 for training.

use super::{gunzip, shuffled, DataError, Dataset, Split, PIXELS, SIDE};

/// The shipped data: `digits.csv.gz`, 1,797 rows of 64 pixels then the label, no header.
pub const CSV_GZ: &[u8] = include_bytes!("../../data/digits/digits.csv.gz");

/// The number of images in the shipped file.
pub const LEN: usize = 1797;

/// The size of the test split (20%); the other 1,437 images train.
pub const TEST_SIZE: usize = 360;

/// The seed of the fixed split's shuffle.
pub const SPLIT_SEED: u64 = 2024;

/// The side of a source image.
pub const SRC_SIDE: usize = 8;

/// The largest source gray level.
pub const MAX_LEVEL: u8 = 16;

/// The upscaling factor (8 -> 24).
pub const SCALE: usize = 3;

/// The zero border around the upscaled image (24 + 2 + 2 = 28).
pub const PAD: usize = (SIDE - SRC_SIDE * SCALE) / 2;

type Result<T> = std::result::Result<T, DataError>;

/// The shipped digits with the fixed split, as LeNet-5 inputs.
pub fn load() -> Result<Split> {
    load_from(CSV_GZ)
}

/// Digits from `digits.csv.gz` bytes, with the fixed split, as LeNet-5 inputs.
pub fn load_from(csv_gz: &[u8]) -> Result<Split> {
    let text = gunzip(csv_gz, "digits.csv.gz")?;
    let all = parse_csv(&text)?;
    if all.len() <= TEST_SIZE {
        return Err(DataError::format("digits.csv", format!("{} images, too few for a test split of {TEST_SIZE}", all.len())));
    }
    let order = shuffled(all.len(), SPLIT_SEED);
    let (test, train) = order.split_at(TEST_SIZE);
    Ok(Split { name: "UCI digits (8x8 -> 28x28)".into(), train: all.select(train), test: all.select(test) })
}

/// Parses the CSV (64 gray levels 0..16 then a label 0..9 per line) into LeNet-5 inputs.
pub fn parse_csv(bytes: &[u8]) -> Result<Dataset> {
    let text = std::str::from_utf8(bytes).map_err(|e| DataError::format("digits.csv", format!("not text: {e}")))?;
    let mut out = Dataset::default();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let (pixels, label) = parse_row(line).map_err(|problem| DataError::format(format!("digits.csv line {}", i + 1), problem))?;
        out.images.extend_from_slice(&to_lenet_input(&pixels));
        out.labels.push(label as i64);
    }
    Ok(out)
}

/// One row: 64 gray levels then the label.
fn parse_row(line: &str) -> std::result::Result<([u8; 64], u8), String> {
    let values = line
        .split(',')
        .map(|v| v.trim().parse::<u8>().map_err(|_| format!("{v:?} is not a small integer")))
        .collect::<std::result::Result<Vec<u8>, String>>()?;
    let [pixels @ .., label] = values.as_slice() else { return Err("empty line".into()) };
    let pixels: [u8; 64] = pixels.try_into().map_err(|_| format!("expected 65 values (64 pixels and a label), found {}", values.len()))?;
    if let Some(p) = pixels.iter().find(|&&p| p > MAX_LEVEL) {
        return Err(format!("pixel value {p} is above {MAX_LEVEL}"));
    }
    if *label > 9 {
        return Err(format!("label {label} is not a digit"));
    }
    Ok((pixels, *label))
}

/// An 8x8 image of gray levels 0..16 as a 28x28 input in `[0, 1]`: each pixel becomes a 3x3
/// block (nearest neighbour), centred with a 2-pixel zero border.
pub fn to_lenet_input(pixels: &[u8; 64]) -> Vec<f32> {
    let mut out = vec![0.0f32; PIXELS];
    for r in 0..SRC_SIDE * SCALE {
        for c in 0..SRC_SIDE * SCALE {
            let level = pixels[(r / SCALE) * SRC_SIDE + c / SCALE];
            out[(r + PAD) * SIDE + c + PAD] = f32::from(level) / f32::from(MAX_LEVEL);
        }
    }
    out
}
