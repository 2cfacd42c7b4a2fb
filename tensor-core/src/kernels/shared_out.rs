//! An output buffer that parallel tasks write disjoint elements of, where those elements
//! interleave (a block's rows of every channel, a tile's positions) so the buffer cannot be
//! split into `&mut` slices: the convolutions' row blocks, Winograd's output tiles and the
//! pointwise convolution's blocks of positions. `parallel::for_each_chunk` uses it too, to
//! hand each task its part through a non-generic closure.

/// The start of an output buffer, shared by tasks that each write their own elements of it.
#[derive(Clone, Copy)]
pub(super) struct SharedOut<T>(*mut T);

// SAFETY: every user has each task write only its own elements, inside the buffer, and keeps
// the buffer alive (and otherwise untouched) until the tasks are done; each says how at its
// writes.
unsafe impl<T: Send> Send for SharedOut<T> {}
unsafe impl<T: Send> Sync for SharedOut<T> {}

impl<T> SharedOut<T> {
    /// Shares `out` with the tasks.
    pub(super) fn new(out: &mut [T]) -> Self {
        SharedOut(out.as_mut_ptr())
    }

    /// Shares the buffer that starts at `out`.
    pub(super) fn from_ptr(out: *mut T) -> Self {
        SharedOut(out)
    }

    /// The buffer from element `offset` on, shared the same way (a task's part of it).
    pub(super) fn skip(&self, offset: usize) -> Self {
        SharedOut(self.0.wrapping_add(offset))
    }

    /// The element at `offset` (a method, so closures capture the whole `SharedOut`).
    pub(super) fn at(&self, offset: usize) -> *mut T {
        self.0.wrapping_add(offset)
    }
}
