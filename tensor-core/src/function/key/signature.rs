//! `Signature`: a call's flattened arguments — its key and tensor leaves — and the keys
//! derived from it (without dims, with other shapes) and names for its leaves.

use super::cache_key::{field_path, field_path_text, CacheKey, Fields, Label};
use super::words::{read_tensor_header, tagged, tensor_header, without_rank, KeyWords, Tag, DEVICE_BITS, PAYLOAD_MASK, UNKNOWN_RANK_CODE};
use crate::shape::Shape;
use crate::tensor::Tensor;
use smallvec::SmallVec;

/// A call's flattened arguments.
pub struct Signature {
    pub(crate) key: CacheKey,
    pub(crate) leaves: SmallVec<[Tensor; 8]>,
    /// Word positions of tensor dims (so relaxed signatures can ignore them).
    pub(super) dims: SmallVec<[u16; 16]>,
    /// For each leaf, the argument it belongs to.
    pub(crate) leaf_args: SmallVec<[u16; 8]>,
    /// For each leaf, the position of its first word.
    pub(super) leaf_pos: SmallVec<[u16; 8]>,
    /// Field scopes, for readable names (`batch.x`, `arg batch.step: 1 -> 2`); not part of
    /// the key.
    pub(crate) fields: Fields,
    /// The type names keyed by hash (for readable retrace reasons; not part of the key).
    pub(crate) type_names: SmallVec<[(u64, &'static str); 2]>,
    /// Leaves that are the same tensor as an earlier leaf (one slot serves both).
    pub(super) repeated: SmallVec<[bool; 8]>,
    /// `#[graph_arg(skip)]` fields (argument, label path) holding parameters that no leaf
    /// is: an error of the call or the state dict, see `hidden_fields`.
    pub(super) hidden: Vec<(u16, String)>,
}

impl Signature {
    /// The key with its field names, for reading it back.
    #[cfg(test)]
    pub(crate) fn key_ref(&self) -> super::cache_key::KeyRef<'_> {
        super::cache_key::KeyRef::new(&self.key, &self.fields)
    }

    /// The key without tensor dims: equal for calls that differ only in dims.
    pub(crate) fn erased(&self) -> CacheKey {
        let mut skip = self.dims.iter().peekable();
        let mut words = KeyWords::new();
        for (i, &w) in self.key.words.iter().enumerate() {
            if skip.peek().is_some_and(|&&d| d as usize == i) {
                skip.next();
            } else {
                words.push(w);
            }
        }
        self.key.with_words(words)
    }

    /// The key without tensor dims and ranks: equal for calls that differ only in shapes.
    pub(crate) fn rank_erased(&self) -> CacheKey {
        let mut key = self.erased();
        let mut removed = 0;
        let mut dims = self.dims.iter().peekable();
        for &pos in &self.leaf_pos {
            // Headers move left by the dims erased before them.
            while dims.next_if(|&&d| d < pos).is_some() {
                removed += 1;
            }
            let at = pos as usize - removed;
            key.words[at] = without_rank(key.words[at]);
        }
        key
    }

    /// The key without the dims of the leaves of arguments in `args` (those a fixed input
    /// signature covers).
    pub(crate) fn erased_for_args(&self, args: &[usize]) -> CacheKey {
        let mut erase: SmallVec<[bool; 32]> = SmallVec::from_elem(false, self.key.words.len());
        let mut dims = self.dims.iter();
        for (leaf, t) in self.leaves.iter().enumerate() {
            let covered = args.contains(&(self.leaf_args[leaf] as usize));
            for _ in 0..t.0.shape.rank() {
                let pos = *dims.next().expect("one position per dim") as usize;
                erase[pos] = covered;
            }
        }
        let words = self.key.words.iter().zip(&erase).filter(|&(_, &e)| !e).map(|(&w, _)| w).collect();
        self.key.with_words(words)
    }

    /// The key with the leaves' shapes replaced by `shapes` (the shapes a trace used, with
    /// unknown dims or ranks), for describing what a concrete function serves.
    pub(crate) fn with_shapes(&self, shapes: &[Shape]) -> CacheKey {
        let old = &self.key.words;
        let mut words = KeyWords::new();
        let mut i = 0;
        for (&pos, shape) in self.leaf_pos.iter().zip(shapes) {
            let pos = pos as usize;
            words.extend_from_slice(&old[i..pos]);
            let (dtype, requires_grad, rank) = read_tensor_header(old[pos] & PAYLOAD_MASK);
            let device = old[pos] & DEVICE_BITS;
            if shape.is_unknown_rank() {
                words.push(tagged(Tag::Tensor, tensor_header(dtype, requires_grad, UNKNOWN_RANK_CODE) | device));
            } else {
                words.push(tagged(Tag::Tensor, tensor_header(dtype, requires_grad, shape.rank()) | device));
                words.extend(shape.dims().iter().map(|&d| d as u64));
            }
            i = pos + 1 + rank;
        }
        words.extend_from_slice(&old[i..]);
        self.key.with_words(words)
    }

    /// A name per leaf: the argument's name and label path (`batch.x`, `layers.0.weight`),
    /// with an index when several leaves would share it (`x_0`, `x_1`).
    pub(crate) fn leaf_names(&self, arg_names: &[&str]) -> Vec<String> {
        let base: Vec<String> = self
            .leaf_args
            .iter()
            .zip(&self.leaf_pos)
            .map(|(&a, &pos)| {
                let name = arg_names.get(a as usize).copied().unwrap_or("arg");
                let path = field_path(&self.fields, pos as usize);
                std::iter::once(name.to_string()).chain(path.iter().map(Label::to_string)).collect::<Vec<_>>().join(".")
            })
            .collect();
        dedup_names(base)
    }

    /// A name per leaf of a value flattened on its own (no argument): its label path
    /// (`fc1.weight`, `layers.0.bias`), with an index when several leaves would share it.
    pub(crate) fn leaf_paths(&self) -> Vec<String> {
        let base = self.leaf_pos.iter().map(|&pos| field_path_text(&self.fields, pos as usize)).collect();
        dedup_names(base)
    }

    /// The `#[graph_arg(skip)]` fields that hold tensors requiring grad which no leaf is (so
    /// they would be left out), named as leaves are: with the argument's name when
    /// `arg_names` are given (`self.body`), else by label path (`body`).
    pub(crate) fn hidden_fields(&self, arg_names: Option<&[&str]>) -> Vec<String> {
        let name = |&(arg, ref path): &(u16, String)| match arg_names.and_then(|names| names.get(arg as usize)) {
            Some(arg) if path.is_empty() => arg.to_string(),
            Some(arg) => format!("{arg}.{path}"),
            None => path.clone(),
        };
        self.hidden.iter().map(name).collect()
    }

    /// The leaves that get a slot: each tensor once, in first-seen order.
    pub(crate) fn slot_leaves(&self) -> impl Iterator<Item = (usize, &Tensor)> {
        self.leaves.iter().enumerate().filter(|(i, _)| !self.repeated[*i])
    }

    /// The leaves' shapes.
    pub(crate) fn shapes(&self) -> Vec<Shape> {
        self.leaves.iter().map(|t| t.0.shape.clone()).collect()
    }
}

/// The names, with `_k` appended to each of several equal ones (`x_0`, `x_1`).
fn dedup_names(base: Vec<String>) -> Vec<String> {
    base.iter()
        .enumerate()
        .map(|(i, name)| match base.iter().filter(|n| *n == name).count() {
            1 => name.clone(),
            _ => format!("{name}_{}", base[..i].iter().filter(|n| *n == name).count()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::flattener::Flattener;
    use super::*;
    use crate::dtype::DType;

    fn sig(f: impl FnOnce(&mut Flattener)) -> Signature {
        let mut fl = Flattener::new();
        f(&mut fl);
        fl.finish()
    }

    #[test]
    fn erased_keys_ignore_dims_only() {
        let a = sig(|f| f.tensor(&Tensor::zeros(&[2, 5], DType::F32)));
        let b = sig(|f| f.tensor(&Tensor::zeros(&[7, 5], DType::F32)));
        let c = sig(|f| f.tensor(&Tensor::zeros(&[7], DType::F32)));
        assert_ne!(a.key.words, b.key.words);
        assert!(a.erased() == b.erased());
        assert!(a.erased() != c.erased());
        assert!(a.with_shapes(&b.shapes()) == b.key);
        assert!(a.rank_erased() == c.rank_erased() && a.erased() != c.erased());
        let mixed = sig(|f| {
            f.tensor(&Tensor::zeros(&[2, 5], DType::F32));
            f.int(3);
            f.tensor(&Tensor::zeros(&[], DType::F32));
        });
        let other = sig(|f| {
            f.tensor(&Tensor::zeros(&[4], DType::F32));
            f.int(3);
            f.tensor(&Tensor::zeros(&[1, 1, 1], DType::F32));
        });
        assert!(mixed.rank_erased() == other.rank_erased());
        let f64s = sig(|f| f.tensor(&Tensor::zeros(&[2], DType::F64)));
        assert!(c.rank_erased() != f64s.rank_erased(), "the dtype stays in the key");
    }

    #[test]
    fn keys_with_unknown_ranks_read_back_as_such() {
        let s = sig(|f| {
            f.tensor(&Tensor::zeros(&[2, 5], DType::F32));
            f.tensor(&Tensor::zeros(&[3], DType::I64));
        });
        let key = s.with_shapes(&[Shape::unknown_rank(), Shape::new(&[crate::shape::UNKNOWN])]);
        let text = super::super::describe::describe(&["x", "y"], super::super::cache_key::KeyRef::new(&key, &s.fields));
        assert_eq!(text, "x: (f32[*], i64[?])");
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
        assert_ne!(same.key.words, different.key.words);
        assert_eq!(same.slot_leaves().count(), 1, "one slot serves both names");
    }

    #[test]
    fn static_values_are_part_of_the_key() {
        let a = sig(|f| f.static_value(&String::from("relu")));
        let b = sig(|f| f.static_value(&String::from("tanh")));
        assert!(a.key != b.key && a.erased() != b.erased());
        assert!(a.key == sig(|f| f.static_value(&String::from("relu"))).key);
    }
}
