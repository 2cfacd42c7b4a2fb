//! Weights in a kernel's own form kept between calls, so inference does not remake them on
//! every call: Winograd's transformed weights (`U` is 4x the weights; at batch 1 its
//! transform costs about what the products save) and `conv_blocked`'s panels (packing
//! ResNet's 512-channel weights costs 60% of the convolution).
//!
//! An entry is keyed by the weights' buffer (its address and length, the dtype, the geometry's
//! channels and the algorithm) and **holds a clone of the weights' `ArcArray`**. That is what
//! makes it sound: while the entry lives the buffer cannot be freed, so its address cannot
//! be reused by other data, and any write to it (an in-place op, an optimizer step) finds the
//! buffer shared and copies it first (copy on write, see `storage`), so the written weights
//! have a new address and miss. A hit therefore always has the bits the transform was made
//! from.
//!
//! Holding a clone has a cost: an in-place update of cached weights copies them. So weights
//! are cached only when seen a second time unchanged (inference calls them again and again;
//! a training step's fresh weights mostly are not), and the first sighting only records the
//! key. The cache holds at most [`BUDGET_BYTES`] of transforms and weights, least recently
//! used out first. Cached or not, the transform is the same function of the same bits, so
//! the output does not depend on the cache.

use crate::math::Float;
use crate::storage::Array;
use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Bytes of weights in their forms (and the weights they hold) kept at most: ResNet-18's 3x3
/// layers take 176 MB of f32 Winograd transforms, those that batch 1 runs through Winograd
/// 38 MB.
const BUDGET_BYTES: usize = 256 << 20;

/// Keys seen once, remembered at most (a key is only a gate: a stale one costs one insert).
const SEEN_KEYS: usize = 1024;

/// Which form of the weights, with what it depends on beyond the weights' shape.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Form {
    /// Winograd's transform for output tiles of `m x m` (`a * a * outs * channels` values,
    /// `a = m + 2`).
    Winograd { m: usize },
    /// `conv_blocked`'s panels of output channels (as many values as the weights).
    Panels,
}

/// What identifies a form: the weights' buffer and what the form depends on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Key {
    dtype: TypeId,
    address: usize,
    len: usize,
    outs: usize,
    channels: usize,
    form: Form,
}

struct Entry {
    key: Key,
    /// The weights the transform was made from (keeps their buffer alive and shared).
    _weights: Box<dyn Any + Send + Sync>,
    /// The transform, an `Arc<Vec<T>>`.
    transform: Arc<dyn Any + Send + Sync>,
    bytes: usize,
    last_use: u64,
}

#[derive(Default)]
struct Cache {
    entries: Vec<Entry>,
    seen: VecDeque<Key>,
    bytes: usize,
    clock: u64,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache { entries: Vec::new(), seen: VecDeque::new(), bytes: 0, clock: 0 });

impl Key {
    fn of<T: Float>(weights: &[T], outs: usize, channels: usize, form: Form) -> Key {
        Key { dtype: TypeId::of::<T>(), address: weights.as_ptr() as usize, len: weights.len(), outs, channels, form }
    }
}

/// Form `form` of `w` when the cache holds it, without recording a sighting.
pub(super) fn hit<T: Float>(w: &Array<T>, outs: usize, channels: usize, form: Form) -> Option<Arc<Vec<T>>> {
    let key = Key::of(w.as_slice()?, outs, channels, form);
    let u = CACHE.lock().unwrap_or_else(|e| e.into_inner()).hit(key)?;
    Some(u.downcast::<Vec<T>>().expect("the key includes the dtype"))
}

/// Form `form` (`len` values) of `w` (`[outs, channels, kh, kw]`, standard layout), from the
/// cache, or made by `transform` and cached when `w` was seen before; `None` on a first
/// sighting (the caller makes it in its scratch) or when `w` is not in standard layout.
pub(super) fn cached<T: Float>(
    w: &Array<T>,
    outs: usize,
    channels: usize,
    (form, len): (Form, usize),
    transform: impl FnOnce(&[T], &mut [T]),
) -> Option<Arc<Vec<T>>> {
    let weights = w.as_slice()?;
    let key = Key::of(weights, outs, channels, form);
    {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(u) = cache.hit(key) {
            return Some(u.downcast::<Vec<T>>().expect("the key includes the dtype"));
        }
        if !cache.seen_before(key) {
            return None;
        }
    }
    // Made outside the lock (other convolutions go on meanwhile); two threads making the same
    // transform at once both insert it, the second replacing the first.
    let mut u = vec![T::zero(); len];
    transform(weights, &mut u);
    let u = Arc::new(u);
    let bytes = (u.len() + weights.len()) * std::mem::size_of::<T>();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.insert(Entry { key, _weights: Box::new(w.clone()), transform: u.clone(), bytes, last_use: 0 });
    Some(u)
}

impl Cache {
    fn hit(&mut self, key: Key) -> Option<Arc<dyn Any + Send + Sync>> {
        self.clock += 1;
        let clock = self.clock;
        let e = self.entries.iter_mut().find(|e| e.key == key)?;
        e.last_use = clock;
        Some(e.transform.clone())
    }

    /// True when `key` was recorded before (and forgets it); else records it.
    fn seen_before(&mut self, key: Key) -> bool {
        if let Some(i) = self.seen.iter().position(|&k| k == key) {
            self.seen.remove(i);
            return true;
        }
        if self.seen.len() == SEEN_KEYS {
            self.seen.pop_front();
        }
        self.seen.push_back(key);
        false
    }

    fn insert(&mut self, mut entry: Entry) {
        self.remove(entry.key);
        if entry.bytes > BUDGET_BYTES {
            return;
        }
        while self.bytes + entry.bytes > BUDGET_BYTES {
            let oldest = self.entries.iter().min_by_key(|e| e.last_use).expect("over budget, so not empty").key;
            self.remove(oldest);
        }
        self.clock += 1;
        entry.last_use = self.clock;
        self.bytes += entry.bytes;
        self.entries.push(entry);
    }

    fn remove(&mut self, key: Key) {
        if let Some(i) = self.entries.iter().position(|e| e.key == key) {
            self.bytes -= self.entries.swap_remove(i).bytes;
        }
    }
}
