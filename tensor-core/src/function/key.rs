//! Signatures: a call's arguments flattened into a key of typed 64-bit words (tensor dtype,
//! shape and requires_grad; Rust scalars and strings by value) plus the tensor leaves. The
//! words are self-describing, so when a call retraces, the reason ("arg x: shape [2] -> [3]")
//! is decoded from the old and new keys — the cache-hit path builds no strings.

use crate::dtype::DType;
use crate::shape::{Shape, UNKNOWN};
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};

/// The words of a key (inline up to 24).
pub(crate) type KeyWords = SmallVec<[u64; 24]>;

const TAG_SHIFT: u32 = 56;
const TAG_ARG: u64 = 1;
const TAG_TENSOR: u64 = 2;
const TAG_INT: u64 = 3;
const TAG_UINT: u64 = 4;
const TAG_F32: u64 = 5;
const TAG_F64: u64 = 6;
const TAG_BOOL: u64 = 7;
const TAG_CHAR: u64 = 8;
const TAG_STR: u64 = 9;
const TAG_HASH: u64 = 10;
const TAG_LEN: u64 = 11;
const TAG_VARIANT: u64 = 12;
const TAG_ALIAS: u64 = 13;
const TAG_TYPE: u64 = 14;
const TAG_INSTANTIATION: u64 = 15;

fn tagged(tag: u64, payload: u64) -> u64 {
    (tag << TAG_SHIFT) | (payload & ((1 << TAG_SHIFT) - 1))
}

fn tag_of(w: u64) -> u64 {
    w >> TAG_SHIFT
}

fn dtype_code(d: DType) -> u64 {
    DType::ALL.iter().position(|&x| x == d).expect("listed") as u64
}

/// Collects a call's signature words and tensor leaves. `GraphArg` implementations call its
/// methods; the order of calls is the structure of the argument.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::{Flattener, GraphArg};
/// let mut f = Flattener::new();
/// (Tensor::zeros(&[2], DType::F32), 3i32).flatten(&mut f);
/// assert!(!f.is_empty());
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Default)]
pub struct Flattener {
    words: KeyWords,
    leaves: SmallVec<[Tensor; 8]>,
    /// Word positions of tensor dims (so relaxed signatures can ignore them).
    dims: SmallVec<[u16; 16]>,
    /// For each leaf, the argument it belongs to.
    leaf_args: SmallVec<[u16; 8]>,
    /// For each leaf, the position of its first word.
    leaf_pos: SmallVec<[u16; 8]>,
    /// Field scopes, for readable names (`batch.x`, `arg batch.step: 1 -> 2`); not part of
    /// the key.
    fields: Fields,
    /// The type names keyed by hash (for readable retrace reasons; not part of the key).
    type_names: SmallVec<[(u64, &'static str); 2]>,
    args: u16,
}

impl Flattener {
    /// An empty flattener.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// assert!(Flattener::new().is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn new() -> Flattener {
        Flattener::default()
    }

    /// Starts the next argument.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg(); // the first argument starts here
    /// f.int(1);
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn arg(&mut self) {
        self.words.push(tagged(TAG_ARG, 0));
        self.args += 1;
    }

    /// A tensor leaf: keyed by dtype, shape and whether it requires grad.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.tensor(&Tensor::zeros(&[2, 3], DType::F32)); // keyed by f32, [2, 3], no grad
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn tensor(&mut self, t: &Tensor) {
        let shape = &t.0.shape;
        let header = dtype_code(t.0.dtype) | (t.requires_grad_raw() as u64) << 3 | (shape.rank() as u64) << 4;
        self.leaf_pos.push(self.words.len() as u16);
        self.words.push(tagged(TAG_TENSOR, header));
        for &d in shape.dims() {
            self.dims.push(self.words.len() as u16);
            self.words.push(d as u64);
        }
        self.leaves.push(t.clone());
        self.leaf_args.push(self.args.saturating_sub(1));
    }

    /// Starts a field called `name`: what is flattened until [`end_field`](Self::end_field)
    /// belongs to it (for names like `batch.x` in graphs and retrace reasons).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.field("x"); // retrace reasons will name `batch.x`
    /// f.tensor(&Tensor::zeros(&[2], DType::F32));
    /// f.end_field();
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn field(&mut self, name: &'static str) {
        self.fields.push((self.words.len() as u16, Some(name)));
    }

    /// Ends the innermost field.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.field("lr");
    /// f.f32(0.1);
    /// f.end_field();
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn end_field(&mut self) {
        self.fields.push((self.words.len() as u16, None));
    }

    /// A signed integer, by value.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.int(-3);
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn int(&mut self, v: i64) {
        self.words.extend([tagged(TAG_INT, 0), v as u64]);
    }

    /// An unsigned integer, by value.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.uint(7);
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn uint(&mut self, v: u64) {
        self.words.extend([tagged(TAG_UINT, 0), v]);
    }

    /// An f32, by its bits.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.f32(0.5); // 0.0 and -0.0 are different keys
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn f32(&mut self, v: f32) {
        self.words.push(tagged(TAG_F32, v.to_bits() as u64));
    }

    /// An f64, by its bits.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.f64(1e-3);
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn f64(&mut self, v: f64) {
        self.words.extend([tagged(TAG_F64, 0), v.to_bits()]);
    }

    /// A bool.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.bool(true);
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn bool(&mut self, v: bool) {
        self.words.push(tagged(TAG_BOOL, v as u64));
    }

    /// A char.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.char('x');
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn char(&mut self, v: char) {
        self.words.push(tagged(TAG_CHAR, v as u64));
    }

    /// A string, by value (its bytes, packed).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.str("relu");
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn str(&mut self, s: &str) {
        self.words.push(tagged(TAG_STR, s.len() as u64));
        for chunk in s.as_bytes().chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.words.push(u64::from_le_bytes(b));
        }
    }

    /// A value keyed by its hash (fields marked `#[graph_arg(static)]`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// #[derive(Hash)]
    /// enum Activation { Relu, Tanh }
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.hashed(&Activation::Tanh);
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn hashed<T: Hash + ?Sized>(&mut self, v: &T) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        v.hash(&mut h);
        self.words.extend([tagged(TAG_HASH, 0), h.finish()]);
    }

    /// The length of a collection that follows.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.len(2); // a Vec of two tensors follows
    /// f.tensor(&Tensor::zeros(&[1], DType::F32));
    /// f.tensor(&Tensor::zeros(&[1], DType::F32));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn len(&mut self, n: usize) {
        self.words.push(tagged(TAG_LEN, n as u64));
    }

    /// True when nothing was added.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// assert!(f.is_empty());
    /// f.arg();
    /// f.bool(false);
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// An enum variant (or `Option`'s `Some` = 1 / `None` = 0) that follows.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.variant(1); // `Some`, then the value
    /// f.int(4);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn variant(&mut self, index: u32) {
        self.words.push(tagged(TAG_VARIANT, index as u64));
    }

    /// A type name (for generic functions, whose statics all instantiations share).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.type_name(std::any::type_name::<f32>());
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn type_name(&mut self, name: &'static str) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut h);
        let hash = h.finish();
        self.words.extend([tagged(TAG_TYPE, 0), hash]);
        self.type_names.push((hash, name));
    }

    /// The instantiation of a generic function or a method (its generic arguments, including
    /// an impl's or trait's, which no argument type need show), named by a type inside it.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.instantiation(std::any::type_name::<Vec<f64>>());
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn instantiation(&mut self, name: &'static str) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut h);
        let hash = h.finish();
        self.words.extend([tagged(TAG_INSTANTIATION, 0), hash]);
        self.type_names.push((hash, name));
    }

    /// Finishes: leaves that are the same tensor as an earlier leaf are marked, since a graph
    /// traced with two names for one tensor reads it once.
    pub(crate) fn finish(mut self) -> Signature {
        let n = self.leaves.len();
        let mut repeated: SmallVec<[bool; 8]> = SmallVec::from_elem(false, n);
        for i in 1..n {
            if let Some(j) = (0..i).find(|&j| self.leaves[j].same_as(&self.leaves[i])) {
                self.words.push(tagged(TAG_ALIAS, ((i as u64) << 24) | j as u64));
                repeated[i] = true;
            }
        }
        Signature {
            words: self.words,
            leaves: self.leaves,
            dims: self.dims,
            leaf_args: self.leaf_args,
            leaf_pos: self.leaf_pos,
            fields: self.fields,
            type_names: self.type_names,
            repeated,
        }
    }
}

/// Key words and the field scopes that name their parts.
#[derive(Clone, Copy)]
pub(crate) struct KeyRef<'a> {
    pub(crate) words: &'a [u64],
    pub(crate) fields: &'a [(u16, Option<&'static str>)],
}

/// Field scopes: (word position, `Some(name)` entering a field or `None` leaving one).
pub(crate) type Fields = SmallVec<[(u16, Option<&'static str>); 16]>;

/// The fields enclosing the word at `pos`, outermost first.
fn field_path(fields: &[(u16, Option<&'static str>)], pos: usize) -> Vec<&'static str> {
    let mut path = Vec::new();
    for &(at, event) in fields.iter().take_while(|(at, _)| *at as usize <= pos) {
        let _ = at;
        match event {
            Some(name) => path.push(name),
            None => drop(path.pop()),
        }
    }
    path
}

/// A call's flattened arguments.
pub struct Signature {
    pub(crate) words: KeyWords,
    pub(crate) leaves: SmallVec<[Tensor; 8]>,
    dims: SmallVec<[u16; 16]>,
    pub(crate) leaf_args: SmallVec<[u16; 8]>,
    leaf_pos: SmallVec<[u16; 8]>,
    pub(crate) fields: Fields,
    pub(crate) type_names: SmallVec<[(u64, &'static str); 2]>,
    /// Leaves that are the same tensor as an earlier leaf (one slot serves both).
    repeated: SmallVec<[bool; 8]>,
}

impl Signature {
    /// The words without tensor dims: equal for calls that differ only in dims.
    pub(crate) fn erased(&self) -> KeyWords {
        let mut skip = self.dims.iter().peekable();
        let mut out = KeyWords::new();
        for (i, &w) in self.words.iter().enumerate() {
            if skip.peek().is_some_and(|&&d| d as usize == i) {
                skip.next();
            } else {
                out.push(w);
            }
        }
        out
    }

    /// The words without the dims of the leaves of arguments in `args` (those a fixed input
    /// signature covers).
    pub(crate) fn erased_for_args(&self, args: &[usize]) -> KeyWords {
        let mut erase: SmallVec<[bool; 32]> = SmallVec::from_elem(false, self.words.len());
        let mut dims = self.dims.iter();
        for (leaf, t) in self.leaves.iter().enumerate() {
            let covered = args.contains(&(self.leaf_args[leaf] as usize));
            for _ in 0..t.0.shape.rank() {
                let pos = *dims.next().expect("one position per dim") as usize;
                erase[pos] = covered;
            }
        }
        self.words.iter().zip(&erase).filter(|&(_, &e)| !e).map(|(&w, _)| w).collect()
    }

    /// A name per leaf: the argument's name and field path (`batch.x`), with an index when
    /// several leaves would share it (`xs_0`, `xs_1`).
    pub(crate) fn leaf_names(&self, arg_names: &[&str]) -> Vec<String> {
        let base: Vec<String> = self
            .leaf_args
            .iter()
            .zip(&self.leaf_pos)
            .map(|(&a, &pos)| {
                let name = arg_names.get(a as usize).copied().unwrap_or("arg");
                std::iter::once(name).chain(field_path(&self.fields, pos as usize)).collect::<Vec<_>>().join(".")
            })
            .collect();
        base.iter()
            .enumerate()
            .map(|(i, name)| match base.iter().filter(|n| *n == name).count() {
                1 => name.clone(),
                _ => format!("{name}_{}", base[..i].iter().filter(|n| *n == name).count()),
            })
            .collect()
    }

    /// The leaves that get a slot: each tensor once, in first-seen order.
    pub(crate) fn slot_leaves(&self) -> impl Iterator<Item = (usize, &Tensor)> {
        self.leaves.iter().enumerate().filter(|(i, _)| !self.repeated[*i])
    }

    /// The key words with their field names.
    #[cfg(test)]
    pub(crate) fn key(&self) -> KeyRef<'_> {
        KeyRef { words: &self.words, fields: &self.fields }
    }

    /// The leaves' shapes.
    pub(crate) fn shapes(&self) -> Vec<Shape> {
        self.leaves.iter().map(|t| t.0.shape.clone()).collect()
    }

    /// The words with the leaves' dims replaced by `shapes` (the shapes a trace used, with
    /// unknown dims), for describing what a concrete function serves.
    pub(crate) fn words_with_shapes(&self, shapes: &[Shape]) -> KeyWords {
        let mut words = self.words.clone();
        let dims = shapes.iter().flat_map(|s| s.dims().iter().copied());
        for (&pos, d) in self.dims.iter().zip(dims) {
            words[pos as usize] = d as u64;
        }
        words
    }
}

/// One decoded part of an argument's signature.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Part {
    Tensor {
        dtype: DType,
        shape: Shape,
        requires_grad: bool,
    },
    /// The hash of a type name (generic functions and methods).
    Type(u64),
    Value(String),
    Structure(String),
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Part::Tensor { dtype, shape, requires_grad } => write!(f, "{dtype}{shape}{}", if *requires_grad { " requires_grad" } else { "" }),
            Part::Value(v) | Part::Structure(v) => f.write_str(v),
            Part::Type(h) => write!(f, "type #{h:016x}"),
        }
    }
}

/// Key words decoded: each argument's parts, the instantiation's hash if keyed, and which
/// tensor leaves are the same tensor as an earlier one (leaf, earlier leaf).
pub(crate) struct Decoded {
    /// Each argument's parts, with the field path each is under (`""`, `"x"`, `"inner.w"`).
    args: Vec<Vec<(String, Part)>>,
    instantiation: Option<u64>,
    aliases: Vec<(usize, usize)>,
    /// The argument of each tensor leaf, in order.
    leaf_args: Vec<usize>,
}

impl Decoded {
    /// `x is y` for each tensor leaf that is the same tensor as an earlier one.
    fn alias_text(&self, names: &[&str]) -> String {
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
    let mut args: Vec<Vec<(String, Part)>> = Vec::new();
    let mut instantiation = None;
    let mut aliases = Vec::new();
    let mut leaf_args = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let (w, payload) = (words[i], words[i] & ((1 << TAG_SHIFT) - 1));
        let start = i;
        i += 1;
        let part = match tag_of(w) {
            TAG_ARG => {
                args.push(Vec::new());
                continue;
            }
            TAG_TENSOR => {
                let rank = (payload >> 4) as usize;
                let shape = Shape::from(words[i..i + rank].iter().map(|&d| d as usize).collect::<Vec<_>>());
                i += rank;
                leaf_args.push(args.len().saturating_sub(1));
                Part::Tensor { dtype: DType::ALL[(payload & 7) as usize], shape, requires_grad: payload & 8 != 0 }
            }
            TAG_INT | TAG_UINT | TAG_F64 | TAG_HASH | TAG_TYPE => {
                let v = words[i];
                i += 1;
                match tag_of(w) {
                    TAG_INT => Part::Value((v as i64).to_string()),
                    TAG_UINT => Part::Value(v.to_string()),
                    TAG_F64 => Part::Value(format!("{:?}", f64::from_bits(v))),
                    TAG_TYPE => Part::Type(v),
                    _ => Part::Value(format!("value #{v:016x}")),
                }
            }
            TAG_F32 => Part::Value(format!("{:?}", f32::from_bits(payload as u32))),
            TAG_BOOL => Part::Value((payload != 0).to_string()),
            TAG_CHAR => Part::Value(format!("{:?}", char::from_u32(payload as u32).unwrap_or('?'))),
            TAG_STR => {
                let len = payload as usize;
                let n = len.div_ceil(8);
                let bytes: Vec<u8> = words[i..i + n].iter().flat_map(|w| w.to_le_bytes()).take(len).collect();
                i += n;
                Part::Value(format!("{:?}", String::from_utf8_lossy(&bytes)))
            }
            TAG_INSTANTIATION => {
                instantiation = Some(words[i]);
                i += 1;
                continue;
            }
            TAG_LEN => Part::Structure(format!("length {payload}")),
            TAG_VARIANT => Part::Structure(format!("variant {payload}")),
            TAG_ALIAS => {
                aliases.push(((payload >> 24) as usize, (payload & 0xFF_FFFF) as usize));
                continue;
            }
            _ => Part::Structure("?".into()),
        };
        let labeled = (field_path(key.fields, start).join("."), part);
        match args.last_mut() {
            Some(a) => a.push(labeled),
            None => args.push(vec![labeled]),
        }
    }
    Decoded { args, instantiation, aliases, leaf_args }
}

/// Why a call with `new` retraced, compared with the last traced signature `old`:
/// `arg x: shape [2] -> [3]`, `arg n: 1 -> 2`, `arg x: dtype i32 -> f32`. Empty when the
/// signatures are equal (the entry had been evicted or cleared).
pub(crate) fn explain(names: &[&str], types: &[(u64, &str)], old: KeyRef, new: KeyRef) -> Vec<String> {
    let (old, new) = (decode(old), decode(new));
    let (old_inst, new_inst) = (old.instantiation, new.instantiation);
    let aliasing = (old.aliases != new.aliases).then(|| format!("aliasing ({}) -> ({})", old.alias_text(names), new.alias_text(names)));
    let (old, new) = (old.args, new.args);
    let type_name = |h: &u64| types.iter().find(|(k, _)| k == h).map_or_else(|| format!("#{h:016x}"), |(_, n)| short_type(n));
    let mut reasons = Vec::new();
    for (k, (o, n)) in old.iter().zip(&new).enumerate() {
        let name = names.get(k).copied().unwrap_or("(extra)");
        let (ot, nt) = (o.iter().find_map(|p| p.1.type_hash()), n.iter().find_map(|p| p.1.type_hash()));
        if ot != nt {
            let show = |t: Option<u64>| t.as_ref().map_or_else(|| "?".to_string(), type_name);
            reasons.push(format!("arg {name}: type {} -> {}", show(ot), show(nt)));
            continue;
        }
        let (o, n): (Vec<_>, Vec<_>) =
            (o.iter().filter(|p| p.1.type_hash().is_none()).collect(), n.iter().filter(|p| p.1.type_hash().is_none()).collect());
        if o.len() != n.len() || o.iter().zip(&n).any(|(a, b)| a.0 != b.0) {
            reasons.push(format!("arg {name}: structure ({}) -> ({})", join(&o), join(&n)));
            continue;
        }
        for ((path, po), (_, pn)) in o.iter().map(|p| (&p.0, &p.1)).zip(n.iter().map(|p| (&p.0, &p.1))) {
            if po != pn {
                let at = if path.is_empty() { name.to_string() } else { format!("{name}.{path}") };
                reasons.push(format!("arg {at}: {}", part_change(po, pn)));
            }
        }
    }
    if reasons.is_empty() {
        reasons.extend(aliasing);
    }
    if reasons.is_empty() && old_inst != new_inst {
        let full = |h: &u64| types.iter().find(|(k, _)| k == h).map_or_else(|| format!("#{h:016x}"), |(_, n)| short_type(&instantiation_name(n)));
        let show = |t: Option<u64>| t.as_ref().map_or_else(|| "?".to_string(), full);
        reasons.push(format!("instantiation {} -> {}", show(old_inst), show(new_inst)));
    }
    reasons
}

/// `step<f32>::{{closure}}::{{closure}}` as `step<f32>`.
fn instantiation_name(mut name: &str) -> String {
    while let Some(rest) = name.strip_suffix("::{{closure}}") {
        name = rest;
    }
    name.to_string()
}

/// Parts as text, each with its field path (`x: f32[2], step: 1`).
fn join(parts: &[&(String, Part)]) -> String {
    let text = |(path, part): &(String, Part)| if path.is_empty() { part.to_string() } else { format!("{path}: {part}") };
    parts.iter().map(|p| text(p)).collect::<Vec<_>>().join(", ")
}

/// `alloc::vec::Vec<tensor_core::Tensor>` as `Vec<Tensor>` (and `<a::M as a::Tr<f32>>::m`
/// as `<M as Tr<f32>>::m`).
fn short_type(full: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    for c in full.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            if word.starts_with("::") {
                out.push_str("::");
            }
            out.push_str(word.rsplit("::").next().unwrap_or(&word));
            word.clear();
            if c != ' ' || !out.is_empty() {
                out.push(c);
            }
        }
    }
    out.trim().to_string()
}

impl Part {
    fn type_hash(&self) -> Option<u64> {
        match self {
            Part::Type(h) => Some(*h),
            _ => None,
        }
    }
}

fn part_change(old: &Part, new: &Part) -> String {
    match (old, new) {
        (Part::Tensor { dtype: a, shape: sa, requires_grad: ra }, Part::Tensor { dtype: b, shape: sb, requires_grad: rb }) => {
            let mut what = Vec::new();
            if a != b {
                what.push(format!("dtype {a} -> {b}"));
            }
            if sa != sb {
                what.push(format!("shape {sa} -> {sb}"));
            }
            if ra != rb {
                what.push(format!("requires_grad {ra} -> {rb}"));
            }
            what.join(", ")
        }
        _ => format!("{old} -> {new}"),
    }
}

/// The signature text of a key: `x: f32[2, 3], lr: 0.01`.
pub(crate) fn describe(names: &[&str], key: KeyRef) -> String {
    let decoded = decode(key);
    let args = decoded
        .args
        .iter()
        .enumerate()
        .map(|(k, parts)| {
            let name = names.get(k).copied().unwrap_or("(extra)");
            let parts: Vec<_> = parts.iter().filter(|p| p.1.type_hash().is_none()).collect();
            match (parts.len(), parts.first()) {
                (1, Some((path, part))) if path.is_empty() => format!("{name}: {part}"),
                _ => format!("{name}: ({})", join(&parts)),
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    match decoded.aliases.is_empty() {
        true => args,
        false => format!("{args} ({})", decoded.alias_text(names)),
    }
}

/// The shapes a relaxed trace uses: each dim that differs between `a` and `b` is unknown.
pub(crate) fn relax(a: &[Shape], b: &[Shape]) -> Vec<Shape> {
    a.iter()
        .zip(b)
        .map(|(x, y)| Shape::from(x.dims().iter().zip(y.dims()).map(|(&p, &q)| if p == q { p } else { UNKNOWN }).collect::<Vec<_>>()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(f: impl FnOnce(&mut Flattener)) -> Signature {
        let mut fl = Flattener::new();
        f(&mut fl);
        fl.finish()
    }

    #[test]
    fn decodes_and_explains_changes() {
        let a = sig(|f| {
            f.arg();
            f.tensor(&Tensor::zeros(&[2], DType::I32));
            f.arg();
            f.int(1);
            f.arg();
            f.str("relu");
        });
        let b = sig(|f| {
            f.arg();
            f.tensor(&Tensor::zeros(&[3], DType::F32));
            f.arg();
            f.int(2);
            f.arg();
            f.str("tanh");
        });
        let reasons = explain(&["x", "n", "act"], &[], a.key(), b.key());
        assert_eq!(reasons, vec!["arg x: dtype i32 -> f32, shape [2] -> [3]", "arg n: 1 -> 2", "arg act: \"relu\" -> \"tanh\""]);
        assert_eq!(describe(&["x", "n", "act"], a.key()), "x: i32[2], n: 1, act: \"relu\"");
    }

    #[test]
    fn fields_name_leaves_and_reasons() {
        let batch = |step: i64| {
            sig(|f| {
                f.arg();
                f.field("x");
                f.tensor(&Tensor::zeros(&[2], DType::F32));
                f.end_field();
                f.field("inner");
                f.field("step");
                f.int(step);
                f.end_field();
                f.field("w");
                f.tensor(&Tensor::zeros(&[2], DType::F32));
                f.end_field();
                f.end_field();
                f.arg();
                f.tensor(&Tensor::zeros(&[1], DType::F32));
                f.tensor(&Tensor::zeros(&[1], DType::F32));
            })
        };
        let (a, b) = (batch(1), batch(2));
        assert_eq!(a.leaf_names(&["batch", "xs"]), ["batch.x", "batch.inner.w", "xs_0", "xs_1"]);
        assert_eq!(explain(&["batch", "xs"], &[], a.key(), b.key()), ["arg batch.inner.step: 1 -> 2"]);
        assert_eq!(describe(&["batch", "xs"], a.key()), "batch: (x: f32[2], inner.step: 1, inner.w: f32[2]), xs: (f32[1], f32[1])");
    }

    #[test]
    fn type_changes_are_reported_by_short_name() {
        let a = sig(|f| {
            f.arg();
            f.type_name("tensor_core::tensor::Tensor");
            f.tensor(&Tensor::zeros(&[], DType::I32));
        });
        let b = sig(|f| {
            f.arg();
            f.type_name("i32");
            f.int(1);
        });
        let types = [a.type_names[0], b.type_names[0]];
        assert_eq!(explain(&["x"], &types, a.key(), b.key()), vec!["arg x: type Tensor -> i32"]);
        assert_eq!(short_type("alloc::vec::Vec<tensor_core::tensor::Tensor>"), "Vec<Tensor>");
        assert_eq!(short_type(&instantiation_name("t::foo<i32, 4>::{{closure}}::{{closure}}")), "foo<i32, 4>");
        assert_eq!(short_type(&instantiation_name("<t::M as t::Tr<f32>>::m::{{closure}}")), "<M as Tr<f32>>::m");
    }

    #[test]
    fn erased_keys_ignore_dims_only() {
        let a = sig(|f| f.tensor(&Tensor::zeros(&[2, 5], DType::F32)));
        let b = sig(|f| f.tensor(&Tensor::zeros(&[7, 5], DType::F32)));
        let c = sig(|f| f.tensor(&Tensor::zeros(&[7], DType::F32)));
        assert_ne!(a.words, b.words);
        assert_eq!(a.erased(), b.erased());
        assert_ne!(a.erased(), c.erased());
        assert_eq!(relax(&a.shapes(), &b.shapes())[0].to_string(), "[?, 5]");
    }

    #[test]
    fn aliased_leaves_change_the_key() {
        let x = Tensor::zeros(&[2], DType::F32);
        let y = Tensor::zeros(&[2], DType::F32);
        let same = sig(|f| {
            f.tensor(&x);
            f.tensor(&x);
        });
        let different = sig(|f| {
            f.tensor(&x);
            f.tensor(&y);
        });
        assert_ne!(same.words, different.words);
    }
}
