//! The shipped UCI digits: their counts, the fixed split and the 8x8 -> 28x28 mapping.

use examples::data::digits::{self, LEN, TEST_SIZE};
use examples::data::{shuffled, PIXELS};

/// Images per class in the whole file (the UCI page's test-set counts; see the README).
const CLASS_COUNTS: [usize; 10] = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180];

#[test]
fn split_is_fixed_and_covers_the_file() {
    let split = digits::load().unwrap();
    assert_eq!((split.train.len(), split.test.len()), (LEN - TEST_SIZE, TEST_SIZE));
    assert_eq!((split.train.len(), split.test.len()), (1437, 360));
    assert_eq!(split.train.images.len(), 1437 * PIXELS);
    let (train, test) = (split.train.class_counts(), split.test.class_counts());
    let total: Vec<usize> = train.iter().zip(&test).map(|(a, b)| a + b).collect();
    assert_eq!(total, CLASS_COUNTS);
    assert!(test.iter().all(|&c| c >= 25), "every class is in the test split: {test:?}");
    assert!(split.train.images.iter().all(|p| (0.0..=1.0).contains(p)));
    // Loading again gives the same split, image for image.
    let again = digits::load().unwrap();
    assert_eq!((again.train, again.test), (split.train, split.test));
}

#[test]
fn the_shuffle_is_value_stable() {
    // SplitMix64 is written out in the crate, so these never change with a dependency.
    assert_eq!(shuffled(10, 2024), shuffled(10, 2024));
    let mut sorted = shuffled(LEN, digits::SPLIT_SEED);
    sorted.sort_unstable();
    assert_eq!(sorted, (0..LEN).collect::<Vec<_>>());
    assert_ne!(shuffled(LEN, 1), shuffled(LEN, 2));
}

#[test]
fn images_upscale_by_nearest_neighbour_with_a_border() {
    let mut pixels = [0u8; 64];
    pixels[0] = 16; // row 0, col 0
    pixels[8 * 7 + 7] = 8; // row 7, col 7
    let x = digits::to_lenet_input(&pixels);
    assert_eq!(x.len(), 28 * 28);
    let at = |r: usize, c: usize| x[r * 28 + c];
    for (r, c) in [(2, 2), (2, 4), (4, 4)] {
        assert_eq!(at(r, c), 1.0, "({r}, {c}) is in pixel (0, 0)'s 3x3 block");
    }
    assert_eq!(at(5, 5), 0.0);
    for (r, c) in [(23, 23), (25, 25)] {
        assert_eq!(at(r, c), 0.5, "({r}, {c}) is in pixel (7, 7)'s block");
    }
    // The 2-pixel border is zero.
    for i in 0..28 {
        for (r, c) in [(0, i), (1, i), (26, i), (27, i), (i, 0), (i, 1), (i, 26), (i, 27)] {
            assert_eq!(at(r, c), 0.0);
        }
    }
    assert_eq!(x.iter().filter(|&&v| v > 0.0).count(), 18);
}

#[test]
fn malformed_csv_is_an_error() {
    let row = |pixel: &str, label: &str| format!("{}{pixel},{label}\n", "0,".repeat(63));
    assert_eq!(digits::parse_csv(row("16", "9").as_bytes()).unwrap().labels, vec![9]);
    let short = "1,2,3\n";
    assert!(digits::parse_csv(short.as_bytes()).unwrap_err().to_string().contains("65 values"));
    assert!(digits::parse_csv(row("17", "1").as_bytes()).unwrap_err().to_string().contains("above 16"));
    assert!(digits::parse_csv(row("1", "x").as_bytes()).unwrap_err().to_string().contains("line 1"));
    assert!(digits::load_from(b"not gzip").is_err());
}
