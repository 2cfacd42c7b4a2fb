//! The cache-hit path of a `#[graph_fn]` (key, lookup, run) allocates nothing but its output
//! tensors: no key, no list of outputs, no temporaries (the memory plan reuses dying buffers
//! and a fused chunk's registers live in per-thread scratch). Counted by an allocator that
//! counts per thread, with kernels kept on the calling thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use tensor_core::prelude::*;

struct CountingPerThread;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for CountingPerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: CountingPerThread = CountingPerThread;

/// The allocations this thread makes while `f` runs; `f`'s result is dropped after counting.
fn allocations<R>(f: impl FnOnce() -> R) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    let result = f();
    let made = ALLOCATIONS.with(Cell::get) - before;
    drop(result);
    made
}

#[graph_fn]
fn plus_one(x: &Tensor) -> Result<Tensor> {
    x.add(1.0)
}

/// W2's expression: one fused program over a large tensor, with three temporaries eagerly.
#[graph_fn]
fn fused(x: &Tensor) -> Result<Tensor> {
    x.mul(1.5)?.add(0.5)?.tanh()?.mul(&x.sigmoid()?)?.sub(&x.mul(0.5)?)
}

#[graph_fn]
fn three_outputs(x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    Ok((x.exp()?, x.mul(2.0)?, x.neg()?))
}

#[test]
fn a_cache_hit_allocates_only_its_outputs() {
    tensor_core::set_num_threads(1); // kernels on this thread, where the counter counts
    let small = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
    let large = Tensor::rand(&[1 << 20], DType::F32, 7);
    let one_tensor = allocations(|| Tensor::zeros(&[1 << 20], DType::F32));
    assert!(one_tensor >= 1);

    // The first call traces (and allocates freely); the next ones hit the cache.
    for _ in 0..2 {
        plus_one(&small).unwrap();
        fused(&large).unwrap();
        three_outputs(&small).unwrap();
    }
    assert_eq!(allocations(|| plus_one(&small).unwrap()), one_tensor, "x + 1 on f32[1]");
    assert_eq!(allocations(|| fused(&large).unwrap()), one_tensor, "the fused program on f32[1M]");
    assert_eq!(allocations(|| three_outputs(&small).unwrap()), 3 * one_tensor, "three outputs");

    // The eager run of the same expression allocates its temporaries too: the count above is
    // the graph's doing, not an allocator that never counts.
    tensor_core::run_functions_eagerly(true);
    let eager = allocations(|| fused(&large).unwrap());
    tensor_core::run_functions_eagerly(false);
    assert!(eager > one_tensor, "eager made {eager} allocations");
}
