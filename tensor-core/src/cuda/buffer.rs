//! A GPU buffer: memory of its own from the device's pool, or a range of a captured call's
//! arena (`arena.rs`). Kernels and cuBLAS see only its device address, so either serves.

use super::arena;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use std::mem::ManuallyDrop;
use std::sync::Arc;

pub(crate) struct Buffer {
    memory: Memory,
    /// Its number in the allocations a capture is recording (`arena.rs`), so that its free
    /// is recorded too.
    recorded: Option<usize>,
    /// Made while capturing, from the driver's pool: the memory belongs to the captured
    /// graph, which frees it; dropped after the capture ended, it must not be freed again.
    of_graph: bool,
}

enum Memory {
    Own(ManuallyDrop<CudaSlice<u8>>),
    /// `len` bytes at `offset` in an arena, which lives while any of its ranges does.
    InArena {
        arena: Arc<CudaSlice<u8>>,
        offset: usize,
        len: usize,
    },
}

impl Buffer {
    /// Memory of its own; `capturing` when it was made while this thread captures.
    pub(crate) fn own(slice: CudaSlice<u8>, capturing: bool, recorded: Option<usize>) -> Buffer {
        Buffer { memory: Memory::Own(ManuallyDrop::new(slice)), recorded, of_graph: capturing }
    }

    pub(crate) fn in_arena(arena: Arc<CudaSlice<u8>>, offset: usize, len: usize) -> Buffer {
        debug_assert!(offset + len <= arena.len(), "a range inside the arena");
        Buffer { memory: Memory::InArena { arena, offset, len }, recorded: None, of_graph: false }
    }

    /// Its size in bytes.
    pub(crate) fn len(&self) -> usize {
        match &self.memory {
            Memory::Own(s) => s.len(),
            Memory::InArena { len, .. } => *len,
        }
    }

    /// Its device address, for work on `stream` (the context orders nothing itself: event
    /// tracking is off, and the lanes of a capture are ordered by `compile::gpu`).
    pub(crate) fn address(&self, stream: &CudaStream) -> u64 {
        match &self.memory {
            Memory::Own(s) => s.device_ptr(stream).0,
            Memory::InArena { arena, offset, .. } => arena.device_ptr(stream).0 + *offset as u64,
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(n) = self.recorded {
            arena::record_free(n);
        }
        let capturing = super::runtime::capturing_lane().is_some();
        if let Memory::Own(slice) = &mut self.memory
            && (capturing || !self.of_graph)
        {
            // SAFETY: dropped once, here; a free while capturing becomes a step of the
            // graph, as its allocation did. Graph memory outside its capture is left alone.
            unsafe { ManuallyDrop::drop(slice) };
        }
    }
}
