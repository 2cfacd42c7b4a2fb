//! The MNIST IDX loader on small files the tests write: raw and gzipped, and the mistakes a
//! file can have (each a clear `Err`, never a panic).

use examples::data::idx::{self, IdxArray};
use examples::data::DataError;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;
use std::path::PathBuf;

/// A fresh directory under the system's temp dir, unique to this test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tensor-core-idx-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// `n` images of 28x28 whose pixel `i` of image `k` is `(i + k) % 256`, and labels `k % 10`.
fn mnist_like(n: usize) -> (IdxArray, IdxArray) {
    let data = (0..n * 784).map(|i| ((i % 784 + i / 784) % 256) as u8).collect();
    let images = IdxArray { dims: vec![n, 28, 28], data };
    let labels = IdxArray { dims: vec![n], data: (0..n).map(|k| (k % 10) as u8).collect() };
    (images, labels)
}

/// Writes the four MNIST files (train: `n_train` images, test: `n_test`) into `dir`.
fn write_mnist(dir: &std::path::Path, n_train: usize, n_test: usize, gzipped: bool) {
    for (prefix, n) in [("train", n_train), ("t10k", n_test)] {
        let (images, labels) = mnist_like(n);
        for (kind, array) in [("images-idx3", images), ("labels-idx1", labels)] {
            let raw = idx::encode(&array);
            let (name, bytes) = match gzipped {
                true => (format!("{prefix}-{kind}-ubyte.gz"), gzip(&raw)),
                false => (format!("{prefix}-{kind}-ubyte"), raw),
            };
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
}

fn format_error(result: Result<IdxArray, DataError>) -> String {
    match result {
        Err(e @ DataError::Format { .. }) => e.to_string(),
        Err(e) => panic!("expected a format error, got {e}"),
        Ok(a) => panic!("expected an error, parsed dims {:?}", a.dims),
    }
}

#[test]
fn header_and_data_parse_big_endian() {
    // magic 00 00 08 02, dims 2 and 3 as big-endian u32s, then 6 bytes.
    let bytes = [0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6];
    let a = idx::parse(&bytes, "tiny").unwrap();
    assert_eq!(a, IdxArray { dims: vec![2, 3], data: vec![1, 2, 3, 4, 5, 6] });
    assert_eq!(idx::encode(&a), bytes);
    // A dim above 255 needs more than the last byte.
    let big = IdxArray { dims: vec![300], data: vec![7; 300] };
    assert_eq!(&idx::encode(&big)[4..8], &[0, 0, 1, 44]);
    assert_eq!(idx::parse(&idx::encode(&big), "big").unwrap(), big);
}

#[test]
fn gzip_is_detected_by_its_magic_bytes() {
    let (images, _) = mnist_like(3);
    let raw = idx::encode(&images);
    assert_eq!(idx::decode(&raw, "raw").unwrap(), images);
    assert_eq!(idx::decode(&gzip(&raw), "gz").unwrap(), images);
}

#[test]
fn mnist_directory_raw_and_gzipped() {
    for gzipped in [false, true] {
        let dir = temp_dir(if gzipped { "gz" } else { "raw" });
        write_mnist(&dir, 12, 5, gzipped);
        let split = idx::load_mnist(&dir).unwrap();
        assert_eq!((split.train.len(), split.test.len()), (12, 5));
        assert_eq!(split.train.images.len(), 12 * 784);
        assert_eq!(split.train.labels[..11], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0]);
        // Pixels scale from 0..255 to [0, 1]: image 1 starts at 1, image 0 has 255 at 255.
        assert_eq!(split.train.image(0)[0], 0.0);
        assert_eq!(split.train.image(0)[255], 1.0);
        assert_eq!(split.train.image(1)[0], 1.0 / 255.0);
        assert_eq!(split.test.image(4)[47], 51.0 / 255.0); // (47 + 4) = 51 = 0.2 * 255
        let (x, y) = split.test.tensors().unwrap();
        assert_eq!((x.dims().to_vec(), y.dims().to_vec()), (vec![5, 1, 28, 28], vec![5]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn bad_magic_is_an_error() {
    let mut bytes = idx::encode(&IdxArray { dims: vec![2], data: vec![1, 2] });
    bytes[0] = 0x12;
    let message = format_error(idx::parse(&bytes, "bad.idx"));
    assert!(message.contains("bad.idx") && message.contains("magic"), "{message}");
    // Text is not IDX either.
    assert!(format_error(idx::decode(b"hello, world", "text")).contains("magic"));
}

#[test]
fn unsupported_type_is_an_error() {
    let bytes = [0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0]; // 0x0D = f32
    let message = format_error(idx::parse(&bytes, "floats"));
    assert!(message.contains("0x0d") && message.contains("unsigned bytes"), "{message}");
}

#[test]
fn truncated_files_are_errors() {
    let full = idx::encode(&IdxArray { dims: vec![4, 4], data: vec![9; 16] });
    let short_data = format_error(idx::parse(&full[..full.len() - 1], "cut.idx"));
    assert!(short_data.contains("truncated") && short_data.contains("16") && short_data.contains("15"), "{short_data}");
    let short_header = format_error(idx::parse(&full[..6], "cut.idx"));
    assert!(short_header.contains("truncated header"), "{short_header}");
    assert!(format_error(idx::parse(&full[..2], "cut.idx")).contains("too short"));
    assert!(format_error(idx::parse(&[], "empty.idx")).contains("too short"));
    let long = [full.as_slice(), &[0]].concat();
    assert!(format_error(idx::parse(&long, "long.idx")).contains("too long"));
    // A gzip stream cut short is a gzip error naming the file.
    let gz = gzip(&full);
    match idx::decode(&gz[..gz.len() / 2], "cut.gz") {
        Err(e @ DataError::Gzip { .. }) => assert!(e.to_string().contains("cut.gz"), "{e}"),
        other => panic!("expected a gzip error, got {other:?}"),
    }
}

#[test]
fn mismatched_files_are_errors() {
    let dir = temp_dir("mismatch");
    write_mnist(&dir, 4, 2, false);
    // Labels for 3 images next to 4 images.
    std::fs::write(dir.join("train-labels-idx1-ubyte"), idx::encode(&IdxArray { dims: vec![3], data: vec![0, 1, 2] })).unwrap();
    let message = idx::load_mnist(&dir).unwrap_err().to_string();
    assert!(message.contains("labels must have dims [4]"), "{message}");
    // A label that is not a digit.
    std::fs::write(dir.join("train-labels-idx1-ubyte"), idx::encode(&IdxArray { dims: vec![4], data: vec![0, 1, 2, 10] })).unwrap();
    let message = idx::load_mnist(&dir).unwrap_err().to_string();
    assert!(message.contains("label 10"), "{message}");
    // Images that are not 28x28.
    std::fs::write(dir.join("train-images-idx3-ubyte"), idx::encode(&IdxArray { dims: vec![4, 8, 8], data: vec![0; 256] })).unwrap();
    let message = idx::load_mnist(&dir).unwrap_err().to_string();
    assert!(message.contains("[n, 28, 28]"), "{message}");
    // A missing file.
    write_mnist(&dir, 4, 2, false);
    std::fs::remove_file(dir.join("t10k-images-idx3-ubyte")).unwrap();
    match idx::load_mnist(&dir) {
        Err(e @ DataError::Missing { .. }) => assert!(e.to_string().contains("t10k-images-idx3-ubyte"), "{e}"),
        other => panic!("expected a missing-file error, got {:?}", other.map(|s| s.name)),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
