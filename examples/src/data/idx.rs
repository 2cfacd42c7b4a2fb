//! MNIST's IDX format (<http://yann.lecun.com/exdb/mnist/>), raw or gzipped.
//!
//! An IDX file is a 4-byte magic number — two zero bytes, a type code (`0x08` = unsigned
//! bytes, the only type MNIST uses and the only one read here) and the number of dims — then
//! each dim as a big-endian u32, then the data, row-major. A gzipped file is recognised by
//! gzip's magic bytes `1f 8b`, whatever its name.
//!
//! [`load_mnist`] reads the four MNIST files from a directory: images `[n, 28, 28]` become
//! LeNet-5 inputs as they are, with pixels scaled from 0..255 to `[0, 1]`.

use super::{gunzip, DataError, Dataset, Split, CLASSES, SIDE};
use std::path::{Path, PathBuf};

type Result<T> = std::result::Result<T, DataError>;

/// The four files of MNIST, as its site names them; each may also be gzipped, ending in `.gz`.
pub const MNIST_FILES: [&str; 4] = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"];

/// The type code of unsigned bytes.
pub const TYPE_U8: u8 = 0x08;

/// The first two bytes of every gzip stream.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// An IDX array of unsigned bytes: its dims and its data, row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// Parses IDX bytes, gzipped (detected by gzip's magic bytes) or raw; `what` names the data
/// in errors (a file name).
pub fn decode(bytes: &[u8], what: &str) -> Result<IdxArray> {
    if bytes.starts_with(&GZIP_MAGIC) {
        parse(&gunzip(bytes, what)?, what)
    } else {
        parse(bytes, what)
    }
}

/// Parses raw (not compressed) IDX bytes of type u8.
pub fn parse(bytes: &[u8], what: &str) -> Result<IdxArray> {
    let bad = |problem: String| DataError::format(what, problem);
    let Some(&[zero0, zero1, kind, rank]) = bytes.first_chunk::<4>() else {
        return Err(bad(format!("{} bytes, too short for an IDX header (4 bytes of magic number)", bytes.len())));
    };
    if (zero0, zero1) != (0, 0) {
        return Err(bad(format!("bad magic number {:02x} {:02x} {kind:02x} {rank:02x}: an IDX file starts with two zero bytes", zero0, zero1)));
    }
    if kind != TYPE_U8 {
        return Err(bad(format!("type code 0x{kind:02x} is not supported; only unsigned bytes (0x08), as in MNIST")));
    }
    let header = 4 + 4 * rank as usize;
    let Some(dim_bytes) = bytes.get(4..header) else {
        return Err(bad(format!("truncated header: {rank} dims need {header} bytes, the file has {}", bytes.len())));
    };
    let dims: Vec<usize> = dim_bytes.chunks_exact(4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize).collect();
    let len = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or_else(|| bad(format!("dims {dims:?} overflow")))?;
    let data = &bytes[header..];
    if data.len() != len {
        let state = if data.len() < len { "truncated" } else { "too long" };
        return Err(bad(format!("{state}: dims {dims:?} need {len} bytes of data after the header, found {}", data.len())));
    }
    Ok(IdxArray { dims, data: data.to_vec() })
}

/// Reads and parses an IDX file, raw or gzipped.
pub fn read(path: &Path) -> Result<IdxArray> {
    let bytes = std::fs::read(path).map_err(|source| DataError::Io { path: path.display().to_string(), source })?;
    decode(&bytes, &path.display().to_string())
}

/// Images (`[n, 28, 28]`) and labels (`[n]`, each below 10) as a [`Dataset`], pixels scaled
/// to `[0, 1]`.
pub fn to_dataset(images: &IdxArray, labels: &IdxArray, what: &str) -> Result<Dataset> {
    let bad = |problem: String| DataError::format(what, problem);
    let [n, SIDE, SIDE] = images.dims[..] else {
        return Err(bad(format!("images must have dims [n, {SIDE}, {SIDE}], found {:?}", images.dims)));
    };
    if labels.dims != [n] {
        return Err(bad(format!("labels must have dims [{n}] (one per image), found {:?}", labels.dims)));
    }
    if let Some(l) = labels.data.iter().find(|&&l| l as usize >= CLASSES) {
        return Err(bad(format!("label {l} is not a digit")));
    }
    let images = images.data.iter().map(|&p| f32::from(p) / 255.0).collect();
    Ok(Dataset { images, labels: labels.data.iter().map(|&l| i64::from(l)).collect() })
}

/// MNIST from a directory holding `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`,
/// `t10k-images-idx3-ubyte` and `t10k-labels-idx1-ubyte`, each raw or with `.gz`.
pub fn load_mnist(dir: &Path) -> Result<Split> {
    let set = |prefix: &str| -> Result<Dataset> {
        let images = read(&find(dir, &format!("{prefix}-images-idx3-ubyte"))?)?;
        let labels = read(&find(dir, &format!("{prefix}-labels-idx1-ubyte"))?)?;
        to_dataset(&images, &labels, &format!("{}/{prefix}-*", dir.display()))
    };
    Ok(Split { name: format!("MNIST ({})", dir.display()), train: set("train")?, test: set("t10k")? })
}

/// `dir/name`, or `dir/name.gz`, whichever exists.
fn find(dir: &Path, name: &str) -> Result<PathBuf> {
    [name.to_string(), format!("{name}.gz")]
        .into_iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .ok_or_else(|| DataError::Missing { dir: dir.display().to_string(), file: name.to_string() })
}

/// Encodes an IDX array of unsigned bytes (the inverse of [`parse`]), for tests and tools.
pub fn encode(array: &IdxArray) -> Vec<u8> {
    let mut out = vec![0, 0, TYPE_U8, array.dims.len() as u8];
    for &d in &array.dims {
        out.extend_from_slice(&(d as u32).to_be_bytes());
    }
    out.extend_from_slice(&array.data);
    out
}
