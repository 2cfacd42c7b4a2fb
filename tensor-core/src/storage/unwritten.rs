//! A buffer a kernel is about to fill, taken from the allocator without being set first.
//!
//! A convolution writes every element of its output, and a fused program every element of
//! its outputs, so zeroing those buffers first is a pass over memory for nothing: for
//! MobileNetV2 at batch 1 it was 5% of the time, in `memset`. The elements are
//! `MaybeUninit` until the writer says it is done (`assume_written`, unsafe: the writer's
//! promise that it covered every element). Debug builds fill float buffers with NaN first,
//! so a kernel that skips an element shows up in the tests, not as a stale value.

use super::{Array, Storage};
use crate::dtype::DType;
use ndarray::IxDyn;
use std::mem::MaybeUninit;

/// A buffer of one dtype being written, possibly from several threads, each to its own part.
pub enum Unwritten {
    /// f32 elements.
    F32(Vec<MaybeUninit<f32>>),
    /// f64 elements.
    F64(Vec<MaybeUninit<f64>>),
    /// i32 elements.
    I32(Vec<MaybeUninit<i32>>),
    /// i64 elements.
    I64(Vec<MaybeUninit<i64>>),
    /// bool elements.
    Bool(Vec<MaybeUninit<bool>>),
}

// SAFETY: writers write disjoint parts through `ptr_at`, and read back only what they wrote.
unsafe impl Sync for Unwritten {}

impl Unwritten {
    /// `n` elements of `dtype`, not yet written.
    pub fn new(dtype: DType, n: usize) -> Unwritten {
        match dtype {
            DType::F32 => Unwritten::F32(uninit(n, f32::NAN)),
            DType::F64 => Unwritten::F64(uninit(n, f64::NAN)),
            DType::I32 => Unwritten::I32(uninit(n, 0)),
            DType::I64 => Unwritten::I64(uninit(n, 0)),
            DType::Bool => Unwritten::Bool(uninit(n, false)),
        }
    }

    /// The buffer of `s`, to be written over, when `s` holds it alone, in standard layout,
    /// with `n` elements from its start; else `Err` with what still owns that memory (the
    /// array, or its whole buffer when it was a part of a larger one).
    pub fn reclaim(s: Storage, n: usize) -> Result<Unwritten, Storage> {
        match s {
            Storage::F32(a) => reclaim_vec(a, n).map(Unwritten::F32).map_err(Storage::F32),
            Storage::F64(a) => reclaim_vec(a, n).map(Unwritten::F64).map_err(Storage::F64),
            Storage::I32(a) => reclaim_vec(a, n).map(Unwritten::I32).map_err(Storage::I32),
            Storage::I64(a) => reclaim_vec(a, n).map(Unwritten::I64).map_err(Storage::I64),
            Storage::Bool(a) => reclaim_vec(a, n).map(Unwritten::Bool).map_err(Storage::Bool),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Unwritten::F32(_) => DType::F32,
            Unwritten::F64(_) => DType::F64,
            Unwritten::I32(_) => DType::I32,
            Unwritten::I64(_) => DType::I64,
            Unwritten::Bool(_) => DType::Bool,
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        match self {
            Unwritten::F32(v) => v.len(),
            Unwritten::F64(v) => v.len(),
            Unwritten::I32(v) => v.len(),
            Unwritten::I64(v) => v.len(),
            Unwritten::Bool(v) => v.len(),
        }
    }

    /// The address of element `start`, for writing (disjoint parts from several threads).
    pub fn ptr_at(&self, start: usize) -> *mut u8 {
        assert!(start <= self.len(), "element {start} of a buffer of {}", self.len());
        macro_rules! at {
            ($v:expr) => {
                // SAFETY: `start` is within the buffer or one past its end.
                unsafe { $v.as_ptr().add(start) as *mut u8 }
            };
        }
        match self {
            Unwritten::F32(v) => at!(v),
            Unwritten::F64(v) => at!(v),
            Unwritten::I32(v) => at!(v),
            Unwritten::I64(v) => at!(v),
            Unwritten::Bool(v) => at!(v),
        }
    }

    /// The written buffer as a storage of shape `dims`.
    ///
    /// # Safety
    /// Every element must have been written.
    pub unsafe fn assume_written(self, dims: &[usize]) -> Storage {
        unsafe {
            match self {
                Unwritten::F32(v) => Storage::F32(assume_init(v, dims)),
                Unwritten::F64(v) => Storage::F64(assume_init(v, dims)),
                Unwritten::I32(v) => Storage::I32(assume_init(v, dims)),
                Unwritten::I64(v) => Storage::I64(assume_init(v, dims)),
                Unwritten::Bool(v) => Storage::Bool(assume_init(v, dims)),
            }
        }
    }
}

/// `n` unwritten elements; in debug builds each is `debug_fill` (a NaN for floats).
fn uninit<T: Copy>(n: usize, debug_fill: T) -> Vec<MaybeUninit<T>> {
    if cfg!(debug_assertions) {
        return vec![MaybeUninit::new(debug_fill); n];
    }
    let mut v = Vec::with_capacity(n);
    // SAFETY: MaybeUninit needs no initialization.
    unsafe { v.set_len(n) };
    v
}

fn reclaim_vec<T>(a: Array<T>, n: usize) -> Result<Vec<MaybeUninit<T>>, Array<T>> {
    if !a.is_standard_layout() {
        return Err(a);
    }
    let owned = a.try_into_owned_nocopy()?;
    let (v, offset) = owned.into_raw_vec_and_offset();
    if offset.unwrap_or(0) != 0 || v.len() != n {
        let len = v.len();
        return Err(Array::from_shape_vec(IxDyn(&[len]), v).expect("a 1-d array of the whole buffer"));
    }
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: same allocation, element type wrapped in MaybeUninit (same layout).
    Ok(unsafe { Vec::from_raw_parts(v.as_mut_ptr() as *mut MaybeUninit<T>, v.len(), v.capacity()) })
}

/// # Safety
/// Every element must have been written.
unsafe fn assume_init<T>(v: Vec<MaybeUninit<T>>, dims: &[usize]) -> Array<T> {
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: same allocation, every element written (the caller's promise).
    let v = unsafe { Vec::from_raw_parts(v.as_mut_ptr() as *mut T, v.len(), v.capacity()) };
    Array::from_shape_vec(IxDyn(dims), v).expect("length matches dims")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_written_whole_becomes_a_storage_of_its_values() {
        let buf = Unwritten::new(DType::F32, 6);
        assert_eq!((buf.dtype(), buf.len()), (DType::F32, 6));
        for i in 0..6 {
            // SAFETY: element i of an f32 buffer of 6.
            unsafe { *(buf.ptr_at(i) as *mut f32) = i as f32 * 1.5 };
        }
        // SAFETY: all six written above.
        let s = unsafe { buf.assume_written(&[2, 3]) };
        assert_eq!(s.array::<f32>().unwrap().iter().copied().collect::<Vec<_>>(), [0.0, 1.5, 3.0, 4.5, 6.0, 7.5]);
        assert_eq!(s.shape().dims(), [2, 3]);
    }

    #[test]
    fn only_a_whole_buffer_held_alone_is_reclaimed() {
        let whole = Storage::F64(Array::from_shape_vec(IxDyn(&[4]), vec![1.0, 2.0, 3.0, 4.0]).unwrap());
        let held = whole.clone();
        let Err(whole) = Unwritten::reclaim(whole, 4) else { panic!("another holder reads it") };
        drop(held);
        let Ok(buf) = Unwritten::reclaim(whole, 4) else { panic!("held alone now") };
        assert_eq!((buf.dtype(), buf.len()), (DType::F64, 4));
        let wrong_len = Storage::F32(Array::from_shape_vec(IxDyn(&[3]), vec![0.0; 3]).unwrap());
        assert!(Unwritten::reclaim(wrong_len, 4).is_err());
    }

    #[test]
    #[cfg(debug_assertions)]
    fn debug_builds_fill_float_buffers_with_nan() {
        let buf = Unwritten::new(DType::F64, 3);
        // SAFETY: debug builds fill it (this test is built only there).
        let s = unsafe { buf.assume_written(&[3]) };
        assert!(s.array::<f64>().unwrap().iter().all(|v| v.is_nan()));
    }
}
