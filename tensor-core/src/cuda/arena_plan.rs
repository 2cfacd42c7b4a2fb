//! Where each buffer of a captured graph call lives in its one device arena: an offset per
//! allocation, planned from the allocations and frees a first recording of the call made.
//!
//! A capture records its work on several streams (lanes). A buffer freed while a lane
//! records was last used on that lane (`compile::gpu` frees a value at its last use only when
//! one lane made and read it; the others are freed at the end, after every lane has joined),
//! so the stream's own order puts every later kernel of that lane after every use of it. A
//! freed range is therefore reused only by a later allocation *on the lane that freed it*;
//! lanes never share free space. The plan is a greedy best fit over that rule, with every
//! offset aligned for any dtype and for vectorized access.
//!
//! Pure data: built without the `cuda` feature too, and tested as data.

/// Every offset, and the arena's size, is a multiple of this (the driver's own allocation
/// alignment, which the vectorized kernels' 16-byte accesses and cuBLAS rely on).
pub(crate) const ALIGN: usize = 256;

/// One event of a recorded call, in the order the host made them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The next allocation (numbered from 0 in order): `bytes`, made while recording on `lane`.
    Alloc { bytes: usize, lane: usize },
    /// Allocation `alloc` was freed while recording on `lane`.
    Free { alloc: usize, lane: usize },
}

/// The arena's size and each allocation's offset in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ArenaPlan {
    pub offsets: Vec<usize>,
    pub bytes: Vec<usize>,
    pub size: usize,
}

impl ArenaPlan {
    /// Places every allocation of `events` (see the module's comment for the rule).
    pub(crate) fn new(events: &[Event]) -> ArenaPlan {
        let mut free: Vec<Vec<Range>> = Vec::new();
        let mut plan = ArenaPlan { offsets: Vec::new(), bytes: Vec::new(), size: 0 };
        for &e in events {
            match e {
                Event::Alloc { bytes, lane } => {
                    let need = bytes.max(1).next_multiple_of(ALIGN);
                    if free.len() <= lane {
                        free.resize_with(lane + 1, Vec::new);
                    }
                    let at = take(&mut free[lane], need, &mut plan.size);
                    plan.offsets.push(at);
                    plan.bytes.push(need);
                }
                Event::Free { alloc, lane } => {
                    let Some(&start) = plan.offsets.get(alloc) else { continue };
                    if free.len() <= lane {
                        free.resize_with(lane + 1, Vec::new);
                    }
                    give_back(&mut free[lane], Range { start, len: plan.bytes[alloc] });
                }
            }
        }
        plan
    }

    /// The bytes the allocations would take without reuse (for the device checks' report).
    pub(crate) fn unshared_bytes(&self) -> usize {
        self.bytes.iter().sum()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    start: usize,
    len: usize,
}

impl Range {
    fn end(&self) -> usize {
        self.start + self.len
    }
}

/// An offset for `need` bytes: the smallest free range of the lane that holds them, else its
/// free range at the arena's top grown, else new space at the top.
fn take(free: &mut Vec<Range>, need: usize, top: &mut usize) -> usize {
    let best = free.iter().enumerate().filter(|(_, r)| r.len >= need).min_by_key(|(_, r)| (r.len, r.start)).map(|(i, _)| i);
    if let Some(i) = best {
        let at = free[i].start;
        free[i].start += need;
        free[i].len -= need;
        if free[i].len == 0 {
            free.remove(i);
        }
        return at;
    }
    if let Some(i) = free.iter().position(|r| r.end() == *top) {
        let at = free.remove(i).start;
        *top = at + need;
        return at;
    }
    let at = *top;
    *top += need;
    at
}

/// Returns `r` to the lane's free list (kept sorted by start), merged with its neighbours.
fn give_back(free: &mut Vec<Range>, mut r: Range) {
    let i = free.partition_point(|f| f.start < r.start);
    if i < free.len() && r.end() == free[i].start {
        r.len += free.remove(i).len;
    }
    if i > 0 && free[i - 1].end() == r.start {
        free[i - 1].len += r.len;
    } else {
        free.insert(i, r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Event::{Alloc, Free};

    const K: usize = ALIGN;

    #[test]
    fn a_freed_buffer_is_reused_by_a_later_one_on_its_lane() {
        let plan = ArenaPlan::new(&[
            Alloc { bytes: 4 * K, lane: 0 },
            Alloc { bytes: 2 * K, lane: 0 },
            Free { alloc: 0, lane: 0 },
            Alloc { bytes: 3 * K, lane: 0 },
            Alloc { bytes: K, lane: 0 },
        ]);
        // The 3K buffer and then the K one fill the freed 4K range at 0.
        assert_eq!(plan.offsets, vec![0, 4 * K, 0, 3 * K]);
        assert_eq!(plan.size, 6 * K);
        assert_eq!(plan.unshared_bytes(), 10 * K);
    }

    #[test]
    fn sizes_are_rounded_up_to_the_alignment() {
        let plan = ArenaPlan::new(&[Alloc { bytes: 1, lane: 0 }, Alloc { bytes: 0, lane: 0 }, Alloc { bytes: K + 1, lane: 0 }]);
        assert_eq!(plan.offsets, vec![0, K, 2 * K]);
        assert_eq!(plan.size, 4 * K);
    }

    #[test]
    fn another_lane_never_reuses_what_a_lane_freed() {
        let plan = ArenaPlan::new(&[
            Alloc { bytes: 2 * K, lane: 1 },
            Free { alloc: 0, lane: 1 },
            Alloc { bytes: 2 * K, lane: 2 },
            Alloc { bytes: K, lane: 1 },
        ]);
        assert_eq!(plan.offsets, vec![0, 2 * K, 0]);
        assert_eq!(plan.size, 4 * K);
    }

    #[test]
    fn a_buffer_freed_on_another_lane_than_it_was_made_belongs_to_the_freeing_lane() {
        // Made on lane 1, freed (after the lanes joined) on lane 0: lane 0 may reuse it.
        let plan =
            ArenaPlan::new(&[Alloc { bytes: K, lane: 1 }, Free { alloc: 0, lane: 0 }, Alloc { bytes: K, lane: 1 }, Alloc { bytes: K, lane: 0 }]);
        assert_eq!(plan.offsets, vec![0, K, 0]);
    }

    #[test]
    fn neighbouring_free_ranges_merge_and_the_top_range_grows() {
        let plan = ArenaPlan::new(&[
            Alloc { bytes: K, lane: 0 },
            Alloc { bytes: K, lane: 0 },
            Alloc { bytes: K, lane: 0 },
            Free { alloc: 0, lane: 0 },
            Free { alloc: 1, lane: 0 },
            // 2K fits the merged range at 0.
            Alloc { bytes: 2 * K, lane: 0 },
            Free { alloc: 2, lane: 0 },
            // Nothing free holds 3K: the free range at the top (2K..3K) grows to 2K..5K.
            Alloc { bytes: 3 * K, lane: 0 },
        ]);
        assert_eq!(plan.offsets, vec![0, K, 2 * K, 0, 2 * K]);
        assert_eq!(plan.size, 5 * K);
    }

    #[test]
    fn a_never_freed_buffer_is_never_shared() {
        let plan = ArenaPlan::new(&[Alloc { bytes: K, lane: 0 }, Alloc { bytes: K, lane: 0 }]);
        assert_eq!(plan.offsets, vec![0, K]);
    }

    /// Random recordings over 3 lanes: two allocations share bytes only when the first was
    /// freed before the second was made, and every allocation is aligned and inside the arena.
    #[test]
    fn no_two_live_buffers_overlap_in_random_recordings() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n) as usize
        };
        let mut reused = 0;
        for _ in 0..200 {
            let mut events = Vec::new();
            let mut live: Vec<usize> = Vec::new();
            let mut made = 0;
            for _ in 0..60 {
                if !live.is_empty() && next(3) == 0 {
                    let alloc = live.swap_remove(next(live.len() as u64));
                    events.push(Free { alloc, lane: next(3) });
                } else {
                    events.push(Alloc { bytes: 1 + next(5 * K as u64), lane: next(3) });
                    live.push(made);
                    made += 1;
                }
            }
            let plan = ArenaPlan::new(&events);
            let made_at: Vec<usize> = events.iter().enumerate().filter(|(_, e)| matches!(e, Alloc { .. })).map(|(i, _)| i).collect();
            let freed_at = |a: usize| events.iter().position(|e| matches!(e, Free { alloc, .. } if *alloc == a));
            for a in 0..made {
                let ra = plan.offsets[a]..plan.offsets[a] + plan.bytes[a];
                assert_eq!(plan.offsets[a] % ALIGN, 0);
                assert!(ra.end <= plan.size);
                for (b, &b_at) in made_at.iter().enumerate().skip(a + 1) {
                    let rb = plan.offsets[b]..plan.offsets[b] + plan.bytes[b];
                    if ra.start < rb.end && rb.start < ra.end {
                        assert!(freed_at(a).is_some_and(|f| f < b_at), "allocations {a} and {b} overlap while both are live: {events:?}");
                        reused += 1;
                    }
                }
            }
        }
        // The recordings do free and reuse (the check above is not vacuous).
        assert!(reused > 100, "{reused}");
    }
}
