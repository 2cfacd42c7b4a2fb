//! Per-thread scratch buffers for kernels that need a work area per task (im2col columns,
//! Winograd's transformed tiles, a GEMM's packed panels): kept between calls, so a call neither allocates nor
//! page-faults fresh memory in (a freshly mapped buffer of a few MB costs about as much to
//! fault in as a small convolution takes).

use crate::math::Float;
use std::cell::RefCell;

thread_local! {
    /// The thread's buffers, as u64 words (aligned for f32 and f64), one per [`Slot`].
    static WORDS: [RefCell<Vec<u64>>; 4] = const { [RefCell::new(Vec::new()), RefCell::new(Vec::new()), RefCell::new(Vec::new()), RefCell::new(Vec::new())] };
}

/// Which of the thread's buffers: a task's, one a call holds while its tasks (some on the
/// same thread) use theirs, a GEMM's packed panels (`sgemm`), which a task holding its own
/// buffer may call, or what a call's tasks make together and then all read (Winograd's
/// transformed input), which a call holding its `Call` buffer may need besides.
#[derive(Clone, Copy)]
pub(crate) enum Slot {
    Task = 0,
    Call = 1,
    Pack = 2,
    Shared = 3,
}

/// Runs `f` on `len` values of this thread's scratch (uninitialized from the caller's view:
/// whatever the last user left), or on a fresh buffer should this thread's be in use (a
/// kernel that, waiting for its own parallel work, runs another kernel's task).
pub(crate) fn with_scratch<T: Float, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    with_slot(Slot::Task, len, f)
}

/// [`with_scratch`] on the buffer `slot`.
pub(crate) fn with_slot<T: Float, R>(slot: Slot, len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    let run = |words: &mut Vec<u64>| {
        let need = (len * std::mem::size_of::<T>()).div_ceil(8);
        if words.len() < need {
            words.resize(need, 0);
        }
        // SAFETY: T is f32 or f64 (Float), for which every bit pattern is a value; the words
        // hold at least `len` of them and u64 alignment suits both.
        f(unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut T, len) })
    };
    WORDS.with(|w| match w[slot as usize].try_borrow_mut() {
        Ok(mut w) => run(&mut w),
        Err(_) => run(&mut Vec::new()),
    })
}
