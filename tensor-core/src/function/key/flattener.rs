//! `Flattener`: what `GraphArg` implementations write a call's arguments into — key words
//! (see `words.rs`), static values, tensor leaves, and the field names that label them.

use super::cache_key::{field_path_text, CacheKey, Fields, Label};
use super::settings::Settings;
use super::signature::Signature;
use super::statics::{StaticValue, Statics};
use super::words::{device_bits, hash_of, tagged, tensor_header, KeyWords, Tag};
use crate::function::GraphArg;
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::fmt::Debug;
use std::hash::Hash;

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
    /// The values of static fields, kept for `Eq` (their hashes are in `words`).
    statics: Statics,
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
    /// The tensors that require grad in `#[graph_arg(skip)]` fields, with the field's
    /// argument and label path: parameters left out unless a flattened part holds them too
    /// (see `finish`).
    skipped: Vec<(u16, String, Tensor)>,
    /// The ids of every tensor in `#[graph_arg(skip)]` fields (nested ones included), which
    /// the key holds (see `skipped_field`).
    skipped_ids: SmallVec<[u64; 4]>,
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
        self.words.push(tagged(Tag::Arg, 0));
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
        // Until a tensor has been on a GPU, every one is on the CPU: no need to ask.
        let device = if crate::tensor::any_on_device() { device_bits(t.device()) } else { 0 };
        let header = tensor_header(t.0.dtype, t.requires_grad_raw(), shape.rank()) | device;
        self.leaf_pos.push(self.words.len() as u16);
        self.words.push(tagged(Tag::Tensor, header));
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
        self.fields.push((self.words.len() as u16, Some(Label::Field(name))));
    }

    /// Starts element `index` of a collection: what is flattened until
    /// [`end_field`](Self::end_field) belongs to it (names like `layers.0.weight`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.len(1);
    /// f.element(0); // the leaf below is named `xs.0` for an argument `xs`
    /// f.tensor(&Tensor::zeros(&[2], DType::F32));
    /// f.end_field();
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn element(&mut self, index: usize) {
        self.fields.push((self.words.len() as u16, Some(Label::Index(index as u32))));
    }

    /// Ends the innermost field or element.
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
        self.words.extend([tagged(Tag::Int, 0), v as u64]);
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
        self.words.extend([tagged(Tag::Uint, 0), v]);
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
        self.words.push(tagged(Tag::F32, v.to_bits() as u64));
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
        self.words.extend([tagged(Tag::F64, 0), v.to_bits()]);
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
        self.words.push(tagged(Tag::Bool, v as u64));
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
        self.words.push(tagged(Tag::Char, v as u64));
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
        self.words.push(tagged(Tag::Str, s.len() as u64));
        for chunk in s.as_bytes().chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.words.push(u64::from_le_bytes(b));
        }
    }

    /// A value keyed by value (how `#[graph_arg(static)]` fields are keyed): a clone of it is
    /// kept in the key and compared with `Eq`, so two different values never share a trace,
    /// even when their hashes collide. Signatures and retrace reasons show its `Debug` text.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// #[derive(Clone, Debug, Hash, PartialEq, Eq)]
    /// enum Activation { Relu, Tanh }
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.static_value(&Activation::Tanh);
    /// assert!(!f.is_empty());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn static_value<T: Hash + Eq + Clone + Debug + Send + Sync + 'static>(&mut self, v: &T) {
        self.words.extend([tagged(Tag::Static, self.statics.len() as u64), hash_of(v)]);
        self.statics.push(StaticValue::new(v.clone()));
    }

    /// A value keyed by its 64-bit hash alone: two values whose hashes collide share a
    /// trace, and retrace reasons show only the hash. Prefer
    /// [`static_value`](Self::static_value), which keys by value.
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
        self.words.extend([tagged(Tag::Hash, 0), hash_of(v)]);
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
        self.words.push(tagged(Tag::Len, n as u64));
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

    /// An enum variant (or `Option`'s `Some` = 1 / `None` = 0) that follows, keyed by its
    /// index; signatures and retrace reasons show it as `variant 1`. Prefer
    /// [`variant_named`](Self::variant_named), which they show by name.
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
        self.words.push(tagged(Tag::Variant, index as u64));
    }

    /// An enum variant that follows, keyed by its index (as [`variant`](Self::variant)) and
    /// named `name` in signatures and retrace reasons (`arg layer: Relu -> Tanh`, `bias:
    /// Some`); `#[derive(GraphArg)]` on an enum and `Option` call this. The name is not part
    /// of the key.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::Flattener;
    /// let mut f = Flattener::new();
    /// f.arg();
    /// f.variant_named(1, "Some");
    /// f.int(4);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn variant_named(&mut self, index: u32, name: &'static str) {
        self.fields.push((self.words.len() as u16, Some(Label::Variant(name))));
        self.variant(index);
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
        let hash = hash_of(name);
        self.words.extend([tagged(Tag::Type, 0), hash]);
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
        let hash = hash_of(name);
        self.words.extend([tagged(Tag::Instantiation, 0), hash]);
        self.type_names.push((hash, name));
    }

    /// Notes the tensors of a `#[graph_arg(skip)]` field called `name`: one that requires
    /// grad and that no flattened part holds is a parameter the signature and the state dict
    /// would silently leave out, which `finish` reports (`Signature::hidden`).
    pub(crate) fn skipped_field<T: GraphArg + ?Sized>(&mut self, name: &'static str, value: &T) {
        let mut inner = Flattener::new();
        value.flatten(&mut inner);
        // The body reads these tensors as captures, bound to the tensors it was traced with:
        // a call whose field holds others (another model's optimizer) must trace again, as a
        // TensorFlow method's trace is per object and torch.compile guards on the ids.
        let ids: SmallVec<[u64; 4]> = inner.leaves.iter().map(Tensor::id).chain(inner.skipped_ids.iter().copied()).collect();
        self.field(name);
        for &id in &ids {
            self.words.push(tagged(Tag::Identity, 0));
            self.words.push(id);
        }
        self.end_field();
        self.skipped_ids.extend(ids);
        let inner_skipped = inner.skipped.into_iter().map(|(_, _, t)| t);
        let mut params = inner.leaves.into_iter().chain(inner_skipped).filter(Tensor::requires_grad).peekable();
        if params.peek().is_none() {
            return;
        }
        // Named only when there is something to report: the cache-hit path builds no strings.
        let mut path = field_path_text(&self.fields, self.words.len());
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(name);
        let arg = self.args.saturating_sub(1);
        self.skipped.extend(params.map(|t| (arg, path.clone(), t)));
    }

    /// Finishes: leaves that are the same tensor as an earlier leaf are marked, since a graph
    /// traced with two names for one tensor reads it once; the key takes this thread's
    /// settings (grad mode), which a trace reads as it reads the arguments.
    pub(crate) fn finish(mut self) -> Signature {
        let n = self.leaves.len();
        let mut repeated: SmallVec<[bool; 8]> = SmallVec::from_elem(false, n);
        for i in 1..n {
            if let Some(j) = (0..i).find(|&j| self.leaves[j].same_as(&self.leaves[i])) {
                self.words.push(tagged(Tag::Alias, ((i as u64) << 24) | j as u64));
                repeated[i] = true;
            }
        }
        let hidden = hidden_parameters(self.skipped, &self.leaves);
        Signature {
            hidden,
            key: CacheKey { words: self.words, statics: self.statics, settings: Settings::current() },
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

/// The skipped fields (argument, path) holding a tensor that requires grad which no leaf is,
/// each once, in order.
fn hidden_parameters(skipped: Vec<(u16, String, Tensor)>, leaves: &[Tensor]) -> Vec<(u16, String)> {
    let mut hidden: Vec<(u16, String)> = Vec::new();
    for (arg, path, t) in skipped {
        let held = leaves.iter().any(|l| l.same_as(&t));
        if !held && !hidden.iter().any(|(a, p)| *a == arg && *p == path) {
            hidden.push((arg, path));
        }
    }
    hidden
}
