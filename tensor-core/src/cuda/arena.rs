//! One device arena per captured graph call. A capture runs twice: the first records every
//! allocation and free its steps make (with the lane each is made on), `arena_plan.rs`
//! places them in one buffer, and the second capture takes each allocation's range of that
//! buffer in the same order. The captured graph then allocates nothing: every value, and
//! every op's scratch, sits at a planned offset of one allocation, reused between values
//! whose lifetimes do not overlap. `TENSOR_CORE_CUDA_ARENA=0` turns it off (the graph's own
//! memory nodes then hold the values, as the driver's pool places them).
//!
//! The mode is per thread, like the capture itself.

use super::arena_plan::{ArenaPlan, Event};
use super::buffer::Buffer;
use cudarc::driver::CudaSlice;
use std::cell::RefCell;
use std::sync::Arc;

enum Mode {
    Off,
    /// The events so far, and how many of them are allocations.
    Recording(Vec<Event>, usize),
    Placing {
        arena: Arc<CudaSlice<u8>>,
        plan: ArenaPlan,
        next: usize,
        mismatch: Option<String>,
    },
}

thread_local! {
    static MODE: RefCell<Mode> = const { RefCell::new(Mode::Off) };
}

/// From now on this thread's allocations while it captures are recorded.
pub(crate) fn start_recording() {
    MODE.with(|m| *m.borrow_mut() = Mode::Recording(Vec::new(), 0));
}

/// From now on this thread's allocations while it captures are ranges of `arena`, in the
/// order `plan` was made from.
pub(crate) fn start_placing(arena: Arc<CudaSlice<u8>>, plan: ArenaPlan) {
    MODE.with(|m| *m.borrow_mut() = Mode::Placing { arena, plan, next: 0, mismatch: None });
}

/// Ends this thread's mode: what was recorded (empty when it was placing), or, when it was
/// placing, why the capture did not ask for exactly the planned allocations (the capture
/// that placed them must not be used).
pub(crate) fn finish() -> Result<Vec<Event>, String> {
    match MODE.with(|m| std::mem::replace(&mut *m.borrow_mut(), Mode::Off)) {
        Mode::Off => Ok(Vec::new()),
        Mode::Recording(events, _) => Ok(events),
        Mode::Placing { mismatch: Some(why), .. } => Err(why),
        Mode::Placing { plan, next, .. } if next != plan.offsets.len() => {
            Err(format!("the capture made {next} allocations, the plan has {}", plan.offsets.len()))
        }
        Mode::Placing { .. } => Ok(Vec::new()),
    }
}

/// What a capture's allocation of `bytes` on `lane` is, in this thread's mode: `Placed` (a
/// range of the arena), `Recorded(n)` (allocate it, as the `n`th of the recording), or
/// `Plain` (allocate it, unrecorded).
pub(crate) enum Allocation {
    Placed(Buffer),
    Recorded(usize),
    Plain,
}

pub(crate) fn allocate(bytes: usize, lane: usize) -> Allocation {
    MODE.with(|m| match &mut *m.borrow_mut() {
        Mode::Off => Allocation::Plain,
        Mode::Recording(events, made) => {
            events.push(Event::Alloc { bytes, lane });
            *made += 1;
            Allocation::Recorded(*made - 1)
        }
        Mode::Placing { arena, plan, next, mismatch } => {
            let k = *next;
            *next += 1;
            match slot(plan, k, bytes) {
                Some(offset) if mismatch.is_none() => Allocation::Placed(Buffer::in_arena(arena.clone(), offset, bytes.max(1))),
                _ => {
                    // Not the recorded sequence: allocate plainly, and refuse the capture at its end.
                    mismatch.get_or_insert_with(|| format!("allocation {k} of {bytes} bytes was not in the plan"));
                    Allocation::Plain
                }
            }
        }
    })
}

/// The offset of the plan's allocation `k` if it has room for `bytes`.
fn slot(plan: &ArenaPlan, k: usize, bytes: usize) -> Option<usize> {
    match (plan.offsets.get(k), plan.bytes.get(k)) {
        (Some(&offset), Some(&room)) if room >= bytes.max(1) => Some(offset),
        _ => None,
    }
}

/// Allocation `n` of the recording was freed, while this thread records on its current lane.
pub(crate) fn record_free(n: usize) {
    let Some(lane) = super::runtime::capturing_lane() else { return };
    MODE.with(|m| {
        if let Ok(mut mode) = m.try_borrow_mut()
            && let Mode::Recording(events, _) = &mut *mode
        {
            events.push(Event::Free { alloc: n, lane });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::arena_plan::ALIGN;

    #[test]
    fn recording_numbers_the_allocations_in_order() {
        start_recording();
        let made: Vec<usize> = [(100, 0), (50, 2), (0, 0)]
            .into_iter()
            .map(|(bytes, lane)| match allocate(bytes, lane) {
                Allocation::Recorded(n) => n,
                _ => usize::MAX,
            })
            .collect();
        assert_eq!(made, vec![0, 1, 2]);
        // Not capturing: a free is not part of any capture's recording.
        record_free(0);
        let events = finish().expect("a recording");
        assert_eq!(events, vec![Event::Alloc { bytes: 100, lane: 0 }, Event::Alloc { bytes: 50, lane: 2 }, Event::Alloc { bytes: 0, lane: 0 }]);
        // Finished: allocations are plain again, and a second finish has nothing.
        assert!(matches!(allocate(8, 0), Allocation::Plain));
        assert_eq!(finish(), Ok(vec![]));
    }

    #[test]
    fn a_placed_allocation_must_fit_its_planned_slot() {
        let plan = ArenaPlan::new(&[Event::Alloc { bytes: 300, lane: 0 }, Event::Alloc { bytes: 8, lane: 0 }]);
        assert_eq!(slot(&plan, 0, 300), Some(0));
        assert_eq!(slot(&plan, 0, 2 * ALIGN), Some(0));
        assert_eq!(slot(&plan, 0, 2 * ALIGN + 1), None);
        assert_eq!(slot(&plan, 1, 0), Some(2 * ALIGN));
        assert_eq!(slot(&plan, 2, 8), None);
    }
}
