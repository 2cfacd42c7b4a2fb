//! Reading a key back: its words decoded into each argument's parts (a tensor's type, a
//! scalar's value, a length, ...), each labeled with its field path. Only the miss path
//! (retrace reasons, signature text) decodes.

use super::cache_key::{field_path_text, variant_name, KeyRef};
use super::statics::StaticValue;
use super::words::{read_device, read_tensor_header, Tag, PAYLOAD_MASK, UNKNOWN_RANK_CODE};
use crate::dtype::DType;
use crate::shape::Shape;

/// One decoded part of an argument's signature.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Part {
    Tensor {
        dtype: DType,
        shape: Shape,
        requires_grad: bool,
        device: crate::device::Device,
    },
    /// The hash of a type name (generic functions and methods).
    Type(u64),
    Value(String),
    /// A static value, compared by `Eq`.
    Static(StaticValue),
    Structure(String),
    /// The id of a tensor a `#[graph_arg(skip)]` field holds.
    Identity(u64),
}

impl Part {
    pub(super) fn type_hash(&self) -> Option<u64> {
        match self {
            Part::Type(h) => Some(*h),
            _ => None,
        }
    }

    /// True for the parts a signature's text shows: not type names, not the identities of
    /// skipped fields' tensors.
    pub(super) fn is_shown(&self) -> bool {
        !matches!(self, Part::Type(_) | Part::Identity(_))
    }
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Part::Tensor { dtype, shape, requires_grad, device } => {
                let on = if device.is_cuda() { format!(" on {device}") } else { String::new() };
                write!(f, "{dtype}{shape}{}{on}", if *requires_grad { " requires_grad" } else { "" })
            }
            Part::Value(v) | Part::Structure(v) => f.write_str(v),
            Part::Static(v) => write!(f, "{v}"),
            Part::Type(h) => write!(f, "type #{h:016x}"),
            Part::Identity(id) => write!(f, "tensor #{id}"),
        }
    }
}

/// A part with the field path it is under (`""`, `"x"`, `"inner.w"`).
pub(super) type Labeled = (String, Part);

/// Key words decoded: each argument's parts, the instantiation's hash if keyed, and which
/// tensor leaves are the same tensor as an earlier one (leaf, earlier leaf).
pub(crate) struct Decoded {
    pub(super) args: Vec<Vec<Labeled>>,
    pub(super) instantiation: Option<u64>,
    pub(super) aliases: Vec<(usize, usize)>,
    /// The argument of each tensor leaf, in order.
    leaf_args: Vec<usize>,
}

impl Decoded {
    /// `x is y` for each tensor leaf that is the same tensor as an earlier one.
    pub(super) fn alias_text(&self, names: &[&str]) -> String {
        let leaf = |i: usize| {
            let arg = self.leaf_args.get(i).copied().unwrap_or(usize::MAX);
            let name = names.get(arg).copied().unwrap_or("(extra)");
            let within = self.leaf_args[..i].iter().filter(|&&a| a == arg).count();
            match self.leaf_args.iter().filter(|&&a| a == arg).count() {
                1 => name.to_string(),
                _ => format!("{name}[{within}]"),
            }
        };
        let text: Vec<String> = self.aliases.iter().map(|&(i, j)| format!("{} is {}", leaf(i), leaf(j))).collect();
        match text.is_empty() {
            true => "no tensor passed twice".to_string(),
            false => text.join(", "),
        }
    }
}

/// Decodes key words into each argument's parts.
pub(crate) fn decode(key: KeyRef) -> Decoded {
    let words = key.words;
    let mut d = Decoded { args: Vec::new(), instantiation: None, aliases: Vec::new(), leaf_args: Vec::new() };
    let mut i = 0;
    while i < words.len() {
        let (start, tag, payload) = (i, Tag::of(words[i]), words[i] & PAYLOAD_MASK);
        i += 1;
        let part = match tag {
            Some(Tag::Arg) => {
                d.args.push(Vec::new());
                continue;
            }
            Some(Tag::Instantiation) => {
                d.instantiation = Some(words[i]);
                i += 1;
                continue;
            }
            Some(Tag::Alias) => {
                d.aliases.push(((payload >> 24) as usize, (payload & 0xFF_FFFF) as usize));
                continue;
            }
            Some(Tag::Tensor) => {
                let (dtype, requires_grad, rank) = read_tensor_header(payload);
                let shape = if rank == UNKNOWN_RANK_CODE {
                    Shape::unknown_rank()
                } else {
                    i += rank;
                    Shape::from(words[i - rank..i].iter().map(|&d| d as usize).collect::<Vec<_>>())
                };
                d.leaf_args.push(d.args.len().saturating_sub(1));
                Part::Tensor { dtype, shape, requires_grad, device: read_device(payload) }
            }
            Some(Tag::Variant) => match variant_name(key.fields, start) {
                Some(name) => Part::Structure(name.to_string()),
                None => Part::Structure(format!("variant {payload}")),
            },
            Some(tag) => {
                let (part, used) = scalar_part(tag, payload, &words[i..], key.statics);
                i += used;
                part
            }
            None => Part::Structure("?".into()),
        };
        let labeled = (field_path_text(key.fields, start), part);
        match d.args.last_mut() {
            Some(a) => a.push(labeled),
            None => d.args.push(vec![labeled]),
        }
    }
    d
}

/// A part that is not a tensor, from its tag, payload and the words after it; with how many
/// of those words it used.
fn scalar_part(tag: Tag, payload: u64, rest: &[u64], statics: &[StaticValue]) -> (Part, usize) {
    let next = rest.first().copied().unwrap_or(0);
    match tag {
        Tag::Int => (Part::Value((next as i64).to_string()), 1),
        Tag::Uint => (Part::Value(next.to_string()), 1),
        Tag::F64 => (Part::Value(format!("{:?}", f64::from_bits(next))), 1),
        Tag::Type => (Part::Type(next), 1),
        Tag::Hash => (Part::Value(format!("value #{next:016x}")), 1),
        Tag::Identity => (Part::Identity(next), 1),
        Tag::Static => match statics.get(payload as usize) {
            Some(v) => (Part::Static(v.clone()), 1),
            None => (Part::Value(format!("value #{next:016x}")), 1),
        },
        Tag::F32 => (Part::Value(format!("{:?}", f32::from_bits(payload as u32))), 0),
        Tag::Bool => (Part::Value((payload != 0).to_string()), 0),
        Tag::Char => (Part::Value(format!("{:?}", char::from_u32(payload as u32).unwrap_or('?'))), 0),
        Tag::Str => {
            let len = payload as usize;
            let n = len.div_ceil(8);
            let bytes: Vec<u8> = rest[..n].iter().flat_map(|w| w.to_le_bytes()).take(len).collect();
            (Part::Value(format!("{:?}", String::from_utf8_lossy(&bytes))), n)
        }
        Tag::Len => (Part::Structure(format!("length {payload}")), 0),
        Tag::Arg | Tag::Variant | Tag::Tensor | Tag::Alias | Tag::Instantiation => (Part::Structure("?".into()), 0),
    }
}
