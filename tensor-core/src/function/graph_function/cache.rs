//! The trace cache: a `DashMap` from key to a slot holding a once-cell of the entry, so
//! concurrent first calls of a signature trace it once; the relaxed traces
//! (`reduce_retracing`) that serve keys other than their own; and least-recently-used
//! eviction beyond the capacity.

use super::super::concrete::ConcreteFunction;
use super::super::key::{CacheKey, Signature};
use super::history::Removal;
use super::{GraphFunction, State};
use crate::shape::Shape;
use dashmap::DashMap;
use once_cell::sync::OnceCell;
use std::any::Any;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A cached concrete function and what rebuilds its outputs.
pub(super) struct Entry {
    pub(super) function: ConcreteFunction,
    pub(super) structure: Box<dyn Any + Send + Sync>,
    /// The signature it serves (`x: f32[?, 784]`: unknown dims shown as `?`).
    pub(super) signature: String,
}

/// Where one key's entry is (or is being) traced.
pub(super) struct CacheSlot {
    pub(super) cell: OnceCell<Arc<Entry>>,
    /// The number of the call that last used it (for LRU eviction).
    last_used: AtomicU64,
}

/// What a relaxed trace serves besides its own key: calls whose key without dims is
/// `erased` — without dims and ranks when `shapes` has an unknown rank — and whose shapes
/// `shapes` (with unknown dims or ranks) admit.
pub(super) struct Relaxation {
    pub(super) erased: CacheKey,
    pub(super) shapes: Vec<Shape>,
}

impl Relaxation {
    fn across_ranks(&self) -> bool {
        self.shapes.iter().any(Shape::is_unknown_rank)
    }

    fn admits(&self, erased: &CacheKey, rank_erased: &CacheKey, shapes: &[Shape]) -> bool {
        let key = if self.across_ranks() { rank_erased } else { erased };
        self.erased == *key && self.shapes.iter().zip(shapes).all(|(a, b)| a.admits(b))
    }
}

/// Why a call with signature `sig` fails a guard of `entry` (`None`: it passes them all, or
/// there are none — the common case, one branch on the hit path).
fn guard_failure(entry: &Entry, sig: &Signature) -> Option<String> {
    entry.function.dim_guards()?;
    let dim = |slot: usize, axis: usize| sig.slot_leaves().nth(slot).and_then(|(_, t)| t.0.shape.dims().get(axis).copied());
    entry.function.failed_guard(&dim)
}

/// A relaxed trace and the slot holding it (evicting the slot drops the relaxed trace too).
struct Relaxed {
    relaxation: Relaxation,
    slot: Arc<CacheSlot>,
}

/// One function's cached traces.
pub(super) struct Cache {
    map: DashMap<CacheKey, Arc<CacheSlot>>,
    relaxed: Mutex<Vec<Relaxed>>,
    capacity: AtomicUsize,
}

impl Cache {
    pub(super) fn new(capacity: usize) -> Cache {
        Cache { map: DashMap::new(), relaxed: Mutex::new(Vec::new()), capacity: AtomicUsize::new(capacity.max(1)) }
    }

    fn relaxed(&self) -> std::sync::MutexGuard<'_, Vec<Relaxed>> {
        self.relaxed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The traced entry for `key`, marked as used by call `call_no` — unless the call fails
    /// one of its guards (then `failed` says which, if it says nothing yet).
    pub(super) fn get(&self, key: &CacheKey, sig: &Signature, call_no: u64, failed: &mut Option<String>) -> Option<Arc<Entry>> {
        let slot = self.map.get(key)?;
        let entry = slot.cell.get()?;
        if let Some(why) = guard_failure(entry, sig) {
            failed.get_or_insert(why);
            return None;
        }
        slot.last_used.store(call_no, Ordering::Relaxed);
        Some(entry.clone())
    }

    /// A relaxed trace that serves a call with this signature (and whose guards it passes).
    pub(super) fn get_relaxed(&self, sig: &Signature, call_no: u64, failed: &mut Option<String>) -> Option<Arc<Entry>> {
        let relaxed = self.relaxed();
        if relaxed.is_empty() {
            return None;
        }
        let (erased, rank_erased, shapes) = (sig.erased(), sig.rank_erased(), sig.shapes());
        let mut passes = |e: &Arc<Entry>| match guard_failure(e, sig) {
            Some(why) => {
                failed.get_or_insert(why);
                false
            }
            None => true,
        };
        let (slot, entry) = relaxed
            .iter()
            .filter(|r| r.relaxation.admits(&erased, &rank_erased, &shapes))
            .find_map(|r| r.slot.cell.get().filter(|e| passes(e)).map(|e| (&r.slot, e)))?;
        slot.last_used.store(call_no, Ordering::Relaxed);
        Some(entry.clone())
    }

    /// The slot for `key`, made empty if there is none.
    pub(super) fn slot(&self, key: &CacheKey, call_no: u64) -> Arc<CacheSlot> {
        let new = || Arc::new(CacheSlot { cell: OnceCell::new(), last_used: AtomicU64::new(call_no) });
        self.map.entry(key.clone()).or_insert_with(new).clone()
    }

    /// Lists a relaxed trace held by `slot`.
    pub(super) fn add_relaxed(&self, relaxation: Relaxation, slot: Arc<CacheSlot>) {
        self.relaxed().push(Relaxed { relaxation, slot });
    }

    pub(super) fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    pub(super) fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity.max(1), Ordering::Relaxed);
    }

    /// Drops least recently used entries beyond the capacity; returns their keys.
    pub(super) fn evict(&self) -> Vec<CacheKey> {
        let mut evicted = Vec::new();
        while self.map.len() > self.capacity() {
            let oldest =
                self.map.iter().filter(|s| s.cell.get().is_some()).min_by_key(|s| s.last_used.load(Ordering::Relaxed)).map(|s| s.key().clone());
            let Some((key, slot)) = oldest.and_then(|k| self.map.remove(&k)) else { break };
            self.relaxed().retain(|r| !Arc::ptr_eq(&r.slot, &slot));
            evicted.push(key);
        }
        evicted
    }

    /// Drops every traced entry (traces in progress stay); returns their keys.
    pub(super) fn clear(&self) -> Vec<CacheKey> {
        let keys: Vec<CacheKey> = self.map.iter().filter(|slot| slot.cell.get().is_some()).map(|slot| slot.key().clone()).collect();
        let removed = keys.into_iter().filter(|key| self.map.remove_if(key, |_, slot| slot.cell.get().is_some()).is_some()).collect();
        self.relaxed().clear();
        removed
    }

    /// The traced entries, in the order they were traced (a relaxed trace once).
    pub(super) fn entries(&self) -> Vec<Arc<Entry>> {
        let mut entries: Vec<Arc<Entry>> = self.map.iter().filter_map(|slot| slot.cell.get().cloned()).collect();
        entries.sort_by_key(|e| e.function.serial());
        entries.dedup_by_key(|e| e.function.serial());
        entries
    }

    /// Removes `slot` from `key` if it is still empty (its trace failed or panicked).
    fn remove_if_empty(&self, key: &CacheKey, slot: &Arc<CacheSlot>) {
        if slot.cell.get().is_none() {
            self.map.remove_if(key, |_, s| Arc::ptr_eq(s, slot) && s.cell.get().is_none());
        }
    }
}

impl GraphFunction {
    /// Evicts the least recently used entries beyond the capacity, noting why in the history.
    pub(super) fn evict(&self, state: &State) {
        let evicted = state.cache.evict();
        if !evicted.is_empty() {
            Self::history(state).note_removed(evicted, Removal::Evicted { capacity: state.cache.capacity() });
        }
    }
}

/// Removes a cache slot whose trace failed or panicked when dropped, so no half-made entry
/// stays.
pub(super) struct SlotGuard<'a> {
    cache: &'a Cache,
    key: &'a CacheKey,
    slot: &'a Arc<CacheSlot>,
}

impl<'a> SlotGuard<'a> {
    pub(super) fn new(cache: &'a Cache, key: &'a CacheKey, slot: &'a Arc<CacheSlot>) -> SlotGuard<'a> {
        SlotGuard { cache, key, slot }
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.cache.remove_if_empty(self.key, self.slot);
    }
}
