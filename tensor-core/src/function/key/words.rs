//! The encoding of key words: each word carries a tag in its top byte saying what it is (an
//! argument's start, a tensor header, a scalar's value, a length, ...), so a key can be read
//! back without the types that wrote it.

use crate::device::Device;
use crate::dtype::DType;
use smallvec::SmallVec;

/// The words of a key (inline up to 24).
pub(crate) type KeyWords = SmallVec<[u64; 24]>;

const TAG_SHIFT: u32 = 56;
/// The bits below the tag.
pub(super) const PAYLOAD_MASK: u64 = (1 << TAG_SHIFT) - 1;

/// What a word is. The payload (the low 56 bits) and the words that follow depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub(super) enum Tag {
    /// An argument starts.
    Arg = 1,
    /// A tensor: dtype, requires_grad and rank in the payload; one word per dim follows.
    Tensor = 2,
    /// A signed integer: the value follows.
    Int = 3,
    /// An unsigned integer: the value follows.
    Uint = 4,
    /// An f32: its bits in the payload.
    F32 = 5,
    /// An f64: its bits follow.
    F64 = 6,
    /// A bool in the payload.
    Bool = 7,
    /// A char in the payload.
    Char = 8,
    /// A string: its length in the payload; its bytes follow, eight to a word.
    Str = 9,
    /// A value keyed by its hash alone (`Flattener::hashed`): the hash follows.
    Hash = 10,
    /// A collection's length in the payload.
    Len = 11,
    /// An enum variant's index in the payload.
    Variant = 12,
    /// Two leaves that are one tensor: (leaf << 24 | earlier leaf) in the payload.
    Alias = 13,
    /// A type name: its hash follows.
    Type = 14,
    /// A generic function's instantiation: the hash of its name follows.
    Instantiation = 15,
    /// A static value kept in the key (compared by `Eq`): its index among the key's static
    /// values in the payload; its hash follows.
    Static = 16,
    /// A tensor held by a `#[graph_arg(skip)]` field, by identity: its id follows. The body
    /// reads such a tensor as a capture, bound when it was traced.
    Identity = 17,
}

impl Tag {
    const ALL: [Tag; 17] = [
        Tag::Arg,
        Tag::Tensor,
        Tag::Int,
        Tag::Uint,
        Tag::F32,
        Tag::F64,
        Tag::Bool,
        Tag::Char,
        Tag::Str,
        Tag::Hash,
        Tag::Len,
        Tag::Variant,
        Tag::Alias,
        Tag::Type,
        Tag::Instantiation,
        Tag::Static,
        Tag::Identity,
    ];

    /// The tag of a word (`None` for a word that is not a tagged one: a dim or a value).
    pub(super) fn of(word: u64) -> Option<Tag> {
        let code = word >> TAG_SHIFT;
        Tag::ALL.iter().copied().find(|&t| t as u64 == code)
    }
}

/// A tagged word.
pub(super) fn tagged(tag: Tag, payload: u64) -> u64 {
    ((tag as u64) << TAG_SHIFT) | (payload & PAYLOAD_MASK)
}

/// A dtype as a 3-bit code (its position in `DType::ALL`).
pub(super) fn dtype_code(d: DType) -> u64 {
    DType::ALL.iter().position(|&x| x == d).expect("listed") as u64
}

/// The payload of a tensor header: dtype in bits 0-2, requires_grad in bit 3, rank above.
pub(super) fn tensor_header(dtype: DType, requires_grad: bool, rank: usize) -> u64 {
    dtype_code(dtype) | (requires_grad as u64) << 3 | (rank as u64) << 4
}

/// A tensor header's dtype, requires_grad and rank.
pub(super) fn read_tensor_header(payload: u64) -> (DType, bool, usize) {
    (DType::ALL[(payload & 7) as usize], payload & 8 != 0, ((payload & RANK_BITS) >> 4) as usize)
}

/// Where a header keeps the rank (bits 4-19).
const RANK_BITS: u64 = 0xFFFF << 4;
/// Where a header keeps the device (bits 32-55: 0 for the CPU, n + 1 for GPU n), so a body
/// traces once per device.
pub(super) const DEVICE_BITS: u64 = 0xFF_FFFF << 32;

/// A device as header bits.
pub(super) fn device_bits(device: Device) -> u64 {
    match device {
        Device::Cpu => 0,
        Device::Cuda(n) => ((n as u64 + 1) << 32) & DEVICE_BITS,
    }
}

/// The device a header's bits name.
pub(super) fn read_device(payload: u64) -> Device {
    match (payload & DEVICE_BITS) >> 32 {
        0 => Device::Cpu,
        n => Device::Cuda(n as usize - 1),
    }
}

/// The rank a tensor header carries for a shape of unknown rank (in the keys that describe
/// relaxed traces only; no dim words follow it).
pub(super) const UNKNOWN_RANK_CODE: usize = 0xFFFF;

/// A tensor header word without its rank: equal for tensors that differ only in rank.
pub(super) fn without_rank(word: u64) -> u64 {
    word & !RANK_BITS
}

/// A 64-bit hash of `v` (the same within a process).
pub(super) fn hash_of<T: std::hash::Hash + ?Sized>(v: &T) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_keeps_the_device_apart_from_the_rank() {
        for device in [Device::Cpu, Device::Cuda(0), Device::Cuda(7)] {
            let h = tensor_header(DType::F32, true, UNKNOWN_RANK_CODE) | device_bits(device);
            assert_eq!(read_device(h), device);
            assert_eq!(read_tensor_header(h), (DType::F32, true, UNKNOWN_RANK_CODE));
            let (a, b) = (tagged(Tag::Tensor, h), tagged(Tag::Tensor, tensor_header(DType::F32, true, 2) | device_bits(device)));
            assert_eq!(without_rank(a), without_rank(b));
            assert_eq!(read_device(without_rank(a) & PAYLOAD_MASK), device);
        }
        // The same tensor on another device is another key word, relaxed or not.
        let on = |d| tagged(Tag::Tensor, tensor_header(DType::F32, false, 1) | device_bits(d));
        assert_ne!(without_rank(on(Device::Cpu)), without_rank(on(Device::Cuda(0))));
        assert_ne!(on(Device::Cuda(0)), on(Device::Cuda(1)));
    }

    #[test]
    fn tags_and_headers_round_trip() {
        for tag in Tag::ALL {
            assert_eq!(Tag::of(tagged(tag, 12345)), Some(tag));
            assert_eq!(tagged(tag, 12345) & PAYLOAD_MASK, 12345);
        }
        assert_eq!(Tag::of(7), None, "a plain value word has no tag");
        for dtype in DType::ALL {
            assert_eq!(read_tensor_header(tensor_header(dtype, true, 3)), (dtype, true, 3));
            let (a, b) = (tagged(Tag::Tensor, tensor_header(dtype, true, 1)), tagged(Tag::Tensor, tensor_header(dtype, true, 4)));
            assert_eq!(without_rank(a), without_rank(b));
            assert_eq!(Tag::of(without_rank(a)), Some(Tag::Tensor));
            assert_eq!(read_tensor_header(without_rank(a) & PAYLOAD_MASK).0, dtype);
        }
    }
}
