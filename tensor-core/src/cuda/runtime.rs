//! The driver side of the GPU backend: one context, stream and cuBLAS handle per GPU,
//! opened on first use; kernels compiled by NVRTC once and cached in memory and on disk
//! (keyed by the source's hash); transfers; launches. CUDA is loaded when first used, so a
//! machine without it gets an `Err` from the first GPU call, never a panic.

use super::arena::{self, Allocation};
use super::arena_plan::{ArenaPlan, Event};
use super::buffer::Buffer;
use super::source::{KernelSource, SegmentTable, TcIndex, REDUCE_THREADS};
use super::DeviceStorage;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::storage::{Array, Storage};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};
use ndarray::IxDyn;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

// SAFETY: `TcIndex` is `#[repr(C)]` plain data, the twin of the kernels' `struct TcIndex`.
unsafe impl DeviceRepr for TcIndex {}
// SAFETY: `SegmentTable` is `#[repr(C)]` plain data, the twin of the kernels' `struct TcTable`.
unsafe impl DeviceRepr for SegmentTable {}

/// One GPU, opened.
struct Gpu {
    device: Device,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: Option<CudaBlas>,
    /// The streams (each with its cuBLAS handle) a graph call is captured on, made on first
    /// use: streams of their own, so that other threads' work on `stream` never joins a
    /// capture. Lane 0 starts and ends the capture; the others record branches beside it.
    capture: std::sync::OnceLock<Vec<(Arc<CudaStream>, Option<CudaBlas>)>>,
    kernels: Mutex<HashMap<String, CudaFunction>>,
    arch: &'static str,
    sms: u32,
}

static GPUS: Mutex<Vec<(usize, Arc<Gpu>)>> = Mutex::new(Vec::new());

fn device_error(op: &'static str, device: Device, what: impl std::fmt::Display) -> Error {
    Error::Device { op, reason: format!("{device}: {what}") }
}

fn driver_error(op: &'static str, device: Device) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| {
        let text = format!("{e:?}");
        let hint = if text.contains("OUT_OF_MEMORY") { " (the GPU is out of memory: free tensors or use smaller batches)" } else { "" };
        device_error(op, device, format!("the CUDA driver failed: {text}{hint}"))
    }
}

/// The GPU of `device`, opened on first use.
fn gpu(op: &'static str, device: Device) -> Result<Arc<Gpu>> {
    let Device::Cuda(n) = device else {
        return Err(device_error(op, device, "not a GPU"));
    };
    let mut open = GPUS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, g)) = open.iter().find(|(k, _)| *k == n) {
        return Ok(g.clone());
    }
    let g = Arc::new(open_gpu(op, device, n)?);
    open.push((n, g.clone()));
    Ok(g)
}

fn open_gpu(op: &'static str, device: Device, n: usize) -> Result<Gpu> {
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(device_error(
            op,
            device,
            "no CUDA driver on this machine (libcuda.so was not found); GPU tensors need an NVIDIA GPU and its driver",
        ));
    }
    let count = CudaContext::device_count().map_err(driver_error(op, device))?;
    if n >= count.max(0) as usize {
        return Err(device_error(op, device, format!("this machine has {count} CUDA device(s)")));
    }
    let ctx = CudaContext::new(n).map_err(driver_error(op, device))?;
    // One stream per GPU: no cross-stream events are needed.
    // SAFETY: no other stream of this context exists yet.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().map_err(driver_error(op, device))?;
    keep_freed_memory(&ctx);
    // SAFETY: only tries to load the library.
    let blas = if unsafe { cudarc::cublas::sys::is_culib_present() } { CudaBlas::new(stream.clone()).ok() } else { None };
    let (major, minor) = ctx.compute_capability().map_err(driver_error(op, device))?;
    let sms = ctx.attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(driver_error(op, device))?;
    let arch: &'static str = Box::leak(format!("compute_{major}{minor}").into_boxed_str());
    Ok(Gpu { device, ctx, stream, blas, capture: std::sync::OnceLock::new(), kernels: Mutex::new(HashMap::new()), arch, sms: sms.max(1) as u32 })
}

/// Lets the device's memory pool keep what is freed for the next allocation, as PyTorch's
/// caching allocator does; by default the pool returns it to the driver at every
/// synchronization, and each call of a graph then maps its buffers anew.
fn keep_freed_memory(ctx: &CudaContext) {
    use cudarc::driver::sys;
    let mut pool = std::mem::MaybeUninit::<sys::CUmemoryPool>::uninit();
    let mut threshold: u64 = u64::MAX;
    // SAFETY: `pool` is written by the driver before it is read; the attribute takes a u64.
    // A failure leaves the default behaviour, which is slower, not wrong.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(pool.as_mut_ptr(), ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS {
            let _ = sys::cuMemPoolSetAttribute(
                pool.assume_init(),
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                &mut threshold as *mut u64 as *mut std::ffi::c_void,
            );
        }
    }
}

/// The GPU's name, as the driver reports it (`NVIDIA H100 80GB HBM3`).
pub(crate) fn gpu_name(device: Device) -> Result<String> {
    let g = gpu("gpu_name", device)?;
    g.ctx.name().map_err(driver_error("gpu_name", device))
}

/// Waits until every kernel queued on `device` has finished (for timing).
pub(crate) fn synchronize(device: Device) -> Result<()> {
    let g = gpu("synchronize", device)?;
    g.stream.synchronize().map_err(driver_error("synchronize", device))
}

/// The GPU time of what `f` queues on `device`'s stream, in microseconds: between two CUDA
/// events recorded before and after it (waits for the second).
pub(crate) fn time_on_gpu(device: Device, f: &mut dyn FnMut()) -> Result<f64> {
    let g = gpu("time_on_gpu", device)?;
    let timed = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let start = g.stream.record_event(timed).map_err(driver_error("time_on_gpu", device))?;
    f();
    let end = g.stream.record_event(timed).map_err(driver_error("time_on_gpu", device))?;
    let ms = start.elapsed_ms(&end).map_err(driver_error("time_on_gpu", device))?;
    Ok(ms as f64 * 1000.0)
}

// ------------------------------------------------------------------------------ kernels

/// Where compiled kernels are kept between runs: `TENSOR_CORE_CUDA_CACHE`, else
/// `$XDG_CACHE_HOME/tensor-core/cuda`, else `~/.cache/tensor-core/cuda`.
fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("TENSOR_CORE_CUDA_CACHE") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("tensor-core").join("cuda"))
}

/// The options every kernel is compiled with: no contraction into FMAs (each step rounds as
/// the CPU's does), IEEE division and square root, no flushing of subnormals.
pub(crate) fn compile_options(arch: &'static str) -> CompileOptions {
    CompileOptions { fmad: Some(false), prec_div: Some(true), prec_sqrt: Some(true), ftz: Some(false), arch: Some(arch), ..Default::default() }
}

/// PTX for `src`: from the disk cache, else from NVRTC (and then into the cache).
pub(crate) fn compile(src: &KernelSource, arch: &'static str) -> Result<String> {
    let code = src.code();
    let file = cache_dir().map(|d| d.join(format!("{}-{:016x}-{arch}.ptx", src.name, super::source::fnv1a(&code))));
    if let Some(ptx) = file.as_ref().and_then(|f| std::fs::read_to_string(f).ok()) {
        return Ok(ptx);
    }
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::Device {
            op: "compile",
            reason: format!("kernel {}: NVRTC (libnvrtc.so) was not found; install CUDA's NVRTC (or `pip install nvidia-cuda-nvrtc`) and put its lib folder on LD_LIBRARY_PATH", src.name),
        });
    }
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(&code, compile_options(arch)).map_err(|e| compile_error(&src.name, e))?;
    let text = ptx.to_src();
    if let Some(f) = file {
        // A cache that cannot be written only costs a compile next time.
        let _ = f.parent().map(std::fs::create_dir_all);
        let _ = std::fs::write(&f, &text);
    }
    Ok(text)
}

fn compile_error(name: &str, e: CompileError) -> Error {
    let log = match &e {
        CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
        other => format!("{other:?}"),
    };
    Error::Device { op: "compile", reason: format!("NVRTC could not compile kernel {name}:\n{log}") }
}

thread_local! {
    /// The lane this thread records on while it captures a graph call (its launches and
    /// allocations go to that capture stream); none when it does not capture.
    static CAPTURING: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    /// The events that order a capture's lanes, kept until the capture ends.
    static LANE_EVENTS: std::cell::RefCell<Vec<cudarc::driver::CudaEvent>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The lane this thread records on, while it captures.
pub(super) fn capturing_lane() -> Option<usize> {
    CAPTURING.with(|c| c.get())
}

/// How many streams a capture may record on (`compile::lanes` spreads a call over them).
pub(crate) const CAPTURE_LANES: usize = 4;

impl Gpu {
    /// Where this thread's work goes: its lane's stream while it captures, else the GPU's.
    fn stream(&self) -> &Arc<CudaStream> {
        match CAPTURING.with(|c| c.get()) {
            Some(lane) => &self.lanes()[lane].0,
            None => &self.stream,
        }
    }

    fn blas(&self) -> Option<&CudaBlas> {
        match CAPTURING.with(|c| c.get()) {
            Some(lane) => self.lanes()[lane].1.as_ref(),
            None => self.blas.as_ref(),
        }
    }

    fn lanes(&self) -> &[(Arc<CudaStream>, Option<CudaBlas>)] {
        self.capture.get().expect("made before a capture starts")
    }

    /// `lane` waits for what `other` has recorded so far.
    fn lane_waits(&self, lane: usize, other: usize) -> Result<()> {
        let lanes = self.lanes();
        let event = lanes[other].0.record_event(None).map_err(driver_error("capture", self.device))?;
        lanes[lane].0.wait(&event).map_err(driver_error("capture", self.device))?;
        LANE_EVENTS.with(|e| e.borrow_mut().push(event));
        Ok(())
    }

    fn function(&self, src: &KernelSource) -> Result<CudaFunction> {
        let mut kernels = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = kernels.get(&src.name) {
            return Ok(f.clone());
        }
        let ptx = compile(src, self.arch)?;
        let module = self.ctx.load_module(Ptx::from_src(ptx)).map_err(driver_error("load kernel", self.device))?;
        let f = module.load_function(&src.name).map_err(driver_error("load kernel", self.device))?;
        kernels.insert(src.name.clone(), f.clone());
        Ok(f)
    }

    /// A buffer of `bytes` bytes, uninitialized (at least one byte: the driver refuses
    /// empty allocations). While this thread captures, the arena's mode (`arena.rs`) may
    /// place it in the call's arena or record it.
    fn alloc(&self, op: &'static str, bytes: usize) -> Result<Buffer> {
        let capturing = CAPTURING.with(|c| c.get());
        let recorded = match capturing.map(|lane| arena::allocate(bytes, lane)) {
            Some(Allocation::Placed(b)) => return Ok(b),
            Some(Allocation::Recorded(n)) => Some(n),
            Some(Allocation::Plain) | None => None,
        };
        // SAFETY: every kernel writes all of its outputs before anything reads them.
        let slice = unsafe { self.stream().alloc::<u8>(bytes.max(1)) }.map_err(driver_error(op, self.device))?;
        Ok(Buffer::own(slice, capturing.is_some(), recorded))
    }

    fn storage(&self, buffer: Buffer, dtype: DType, shape: Shape) -> DeviceStorage {
        DeviceStorage { dtype, shape, device: self.device, buffer: Arc::new(buffer) }
    }

    /// The device address of `d`'s data, for work on this thread's stream.
    fn ptr(&self, d: &DeviceStorage) -> u64 {
        d.buffer.address(self.stream())
    }

    fn grid(&self, blocks: usize) -> u32 {
        blocks.clamp(1, self.sms as usize * 32) as u32
    }
}

// ------------------------------------------------------------------------------ transfers

/// Copies host data to `device`, in row-major order.
pub(crate) fn upload(s: &Storage, device: Device) -> Result<DeviceStorage> {
    let g = gpu("to_device", device)?;
    refuse_while_capturing("to_device", device)?;
    let s = s.to_standard_layout();
    let bytes: &[u8] = crate::with_array!(&s, a => {
        // SAFETY: a standard-layout array's elements are `len` consecutive values of plain
        // data (f32, f64, i32, i64, or bool: one byte, 0 or 1).
        unsafe { std::slice::from_raw_parts(a.as_ptr() as *const u8, std::mem::size_of_val(a.as_slice().expect("standard layout"))) }
    });
    // Never while capturing (refused above), so the memory is the buffer's own.
    // SAFETY: written whole by the copy below before anything reads it.
    let mut slice = unsafe { g.stream.alloc::<u8>(bytes.len().max(1)) }.map_err(driver_error("to_device", device))?;
    if !bytes.is_empty() {
        g.stream.memcpy_htod(bytes, &mut slice.slice_mut(0..bytes.len())).map_err(driver_error("to_device", device))?;
    }
    Ok(g.storage(Buffer::own(slice, false, None), s.dtype(), s.shape()))
}

/// Copies device data back to the host.
pub(crate) fn download(d: &DeviceStorage) -> Result<Storage> {
    let g = gpu("to_cpu", d.device)?;
    refuse_while_capturing("to_cpu", d.device)?;
    Ok(match d.dtype {
        DType::F32 => Storage::F32(read_back::<f32>(&g, d)?),
        DType::F64 => Storage::F64(read_back::<f64>(&g, d)?),
        DType::I32 => Storage::I32(read_back::<i32>(&g, d)?),
        DType::I64 => Storage::I64(read_back::<i64>(&g, d)?),
        DType::Bool => Storage::Bool(read_back::<bool>(&g, d)?),
    })
}

fn read_back<T: Clone + Default>(g: &Gpu, d: &DeviceStorage) -> Result<Array<T>> {
    let n = d.shape.numel();
    let mut v = vec![T::default(); n];
    let bytes = n * std::mem::size_of::<T>();
    if bytes > 0 {
        // SAFETY: `v` holds `n` plain values; the device wrote valid bit patterns of this
        // dtype (bools as 0 or 1).
        let dst = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, bytes) };
        // SAFETY: `dst` is `bytes` bytes of host memory; the buffer holds at least as many.
        unsafe { cudarc::driver::sys::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr().cast(), g.ptr(d), bytes, g.stream.cu_stream()) }
            .result()
            .map_err(driver_error("to_cpu", d.device))?;
        g.stream.synchronize().map_err(driver_error("to_cpu", d.device))?;
    }
    Ok(Array::from_shape_vec(IxDyn(d.shape.dims()), v).expect("length matches dims"))
}

// ------------------------------------------------------------------------------ launches

/// Runs an elementwise kernel over `shape`'s elements: one output per `out_dtypes` entry.
pub(crate) fn elementwise(
    src: &KernelSource,
    index: &TcIndex,
    inputs: &[&DeviceStorage],
    out_dtypes: &[DType],
    shape: &Shape,
) -> Result<Vec<DeviceStorage>> {
    let device = inputs.first().map_or(Device::Cuda(0), |i| i.device);
    let g = gpu("elementwise", device)?;
    let n = shape.numel();
    let outs = out_dtypes.iter().map(|d| g.alloc("elementwise", n * d.size_of())).collect::<Result<Vec<_>>>()?;
    if n > 0 {
        let f = g.function(src)?;
        let n64 = n as i64;
        let pointers: SmallVec<[u64; 8]> = inputs.iter().map(|i| g.ptr(i)).chain(outs.iter().map(|o| o.address(g.stream()))).collect();
        let mut b = g.stream().launch_builder(&f);
        b.arg(&n64).arg(index);
        for p in &pointers {
            b.arg(p);
        }
        // One thread per element: occupancy hides the memory latency (the kernel's loop is
        // grid-stride only for sizes beyond the grid's limit).
        let threads = n.div_ceil(src.per_thread);
        let cfg =
            LaunchConfig { grid_dim: (threads.div_ceil(256).clamp(1, i32::MAX as usize) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the kernel reads `n` elements of each contiguous input, one of each scalar
        // input, and in-bounds offsets of strided inputs (strides from their shapes), and
        // writes `n` elements of each output, all allocated above.
        unsafe { b.launch(cfg) }.map_err(driver_error("elementwise", device))?;
    }
    Ok(outs.into_iter().zip(out_dtypes).map(|(o, &d)| g.storage(o, d, shape.clone())).collect())
}

/// One segment of [`elementwise_batched`]: a run of the program over `n` elements.
pub(crate) struct Segment<'a> {
    pub inputs: &'a [&'a DeviceStorage],
    pub shape: &'a Shape,
}

/// Runs a batched elementwise kernel ([`elementwise_batched`](super::source::elementwise_batched))
/// over every segment in one launch: each segment's outputs, one per `out_dtypes` entry.
pub(crate) fn elementwise_batched(src: &KernelSource, segments: &[Segment], out_dtypes: &[DType]) -> Result<Vec<Vec<DeviceStorage>>> {
    let device = segments.first().and_then(|s| s.inputs.first()).map_or(Device::Cuda(0), |i| i.device);
    let g = gpu("elementwise", device)?;
    let mut outs = Vec::with_capacity(segments.len());
    let mut rows: Vec<(usize, Vec<u64>)> = Vec::with_capacity(segments.len());
    for s in segments {
        let n = s.shape.numel();
        let made = out_dtypes.iter().map(|d| g.alloc("elementwise", n * d.size_of())).collect::<Result<Vec<_>>>()?;
        let mut pointers: Vec<u64> = s.inputs.iter().map(|i| address(i)).collect();
        pointers.extend(made.iter().map(|o| o.address(g.stream())));
        rows.push((n, pointers));
        outs.push(made);
    }
    let table_rows: Vec<(usize, &[u64])> = rows.iter().map(|(n, p)| (*n, p.as_slice())).collect();
    let Some((table, blocks)) = SegmentTable::new(&table_rows, 256 * src.per_thread) else {
        return Err(device_error("elementwise", device, format!("{} segments do not fit one batched launch's table", segments.len())));
    };
    if blocks > i32::MAX as usize {
        return Err(device_error("elementwise", device, format!("a batched launch of {blocks} blocks is over the grid's limit")));
    }
    if blocks > 0 {
        let f = g.function(src)?;
        let mut b = g.stream().launch_builder(&f);
        b.arg(&table);
        let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: each block works in one segment: it reads at most `n` elements of each of
        // the segment's contiguous inputs (`n` is the input's own size: only inputs of the
        // output's shape are contiguous), one of each scalar input, and writes at most `n`
        // elements of each output, allocated above for `n`.
        unsafe { b.launch(cfg) }.map_err(driver_error("elementwise", device))?;
    }
    Ok(outs
        .into_iter()
        .zip(segments)
        .map(|(made, s)| made.into_iter().zip(out_dtypes).map(|(o, &d)| g.storage(o, d, s.shape.clone())).collect())
        .collect())
}

/// Compiles (or finds) `src` and loads it on `device`, before a capture launches it.
pub(crate) fn load_kernel(device: Device, src: &KernelSource) -> Result<()> {
    gpu("load kernel", device)?.function(src).map(drop)
}

/// Runs a reduction kernel: `n_out` outputs, each over `n_red` elements; a block per output,
/// or a thread per output for a `serial` kernel.
pub(crate) fn reduce(
    src: &KernelSource,
    index: &TcIndex,
    input: &DeviceStorage,
    n_out: usize,
    n_red: usize,
    shape: &Shape,
    serial: bool,
) -> Result<DeviceStorage> {
    let g = gpu("reduce", input.device)?;
    let out = g.alloc("reduce", n_out * input.elem_size())?;
    if n_out > 0 {
        let f = g.function(src)?;
        let (no, nr) = (n_out as i64, n_red as i64);
        let (from, to) = (g.ptr(input), out.address(g.stream()));
        let mut b = g.stream().launch_builder(&f);
        b.arg(&no).arg(&nr).arg(index).arg(&from).arg(&to);
        let blocks = if serial { n_out.div_ceil(REDUCE_THREADS as usize) } else { n_out };
        let cfg = LaunchConfig { grid_dim: (g.grid(blocks), 1, 1), block_dim: (REDUCE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: offsets come from the input's own dims and strides; one write per output.
        unsafe { b.launch(cfg) }.map_err(driver_error("reduce", input.device))?;
    }
    Ok(g.storage(out, input.dtype, shape.clone()))
}

/// Runs a row kernel (softmax along the last axis): a block of [`REDUCE_THREADS`] per row of
/// `ix.dims[0]` elements, one output of `input`'s type and shape.
pub(crate) fn rows(src: &KernelSource, index: &TcIndex, input: &DeviceStorage) -> Result<DeviceStorage> {
    let g = gpu("rows", input.device)?;
    let n = input.shape.numel();
    let out = g.alloc("rows", n * input.elem_size())?;
    if n > 0 {
        let f = g.function(src)?;
        let n64 = n as i64;
        let rows = n / (index.dims[0].max(1) as usize);
        let (from, to) = (g.ptr(input), out.address(g.stream()));
        let mut b = g.stream().launch_builder(&f);
        b.arg(&n64).arg(index).arg(&from).arg(&to);
        let cfg = LaunchConfig { grid_dim: (g.grid(rows), 1, 1), block_dim: (REDUCE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: each block reads and writes whole rows of `n` contiguous elements, both
        // buffers allocated for `n`.
        unsafe { b.launch(cfg) }.map_err(driver_error("rows", input.device))?;
    }
    Ok(g.storage(out, input.dtype, input.shape.clone()))
}

/// One copy of [`copy_regions`]: `n` elements of `input`, walked by `index` with a
/// [`copy`](super::source::copy) kernel, from element `from` of the input into element `to`
/// of the output.
pub(crate) struct Region<'a> {
    pub kernel: &'a KernelSource,
    pub index: TcIndex,
    pub input: &'a DeviceStorage,
    pub from: i64,
    pub to: i64,
    pub n: usize,
}

/// A new buffer of `dtype` x `shape` on `device` (zeroed first when `zero`) with each region
/// copied into it, in order.
pub(crate) fn copy_regions(device: Device, dtype: DType, shape: &Shape, zero: bool, regions: &[Region]) -> Result<DeviceStorage> {
    let g = gpu("copy", device)?;
    let out = g.alloc("copy", shape.numel() * dtype.size_of())?;
    let to = out.address(g.stream());
    if zero {
        // SAFETY: the buffer holds `len` bytes.
        unsafe { cudarc::driver::sys::cuMemsetD8Async(to, 0, out.len(), g.stream().cu_stream()) }.result().map_err(driver_error("copy", device))?;
    }
    for r in regions.iter().filter(|r| r.n > 0) {
        let f = g.function(r.kernel)?;
        let n = r.n as i64;
        let from = g.ptr(r.input);
        let mut b = g.stream().launch_builder(&f);
        b.arg(&n).arg(&r.index).arg(&r.from).arg(&r.to).arg(&from).arg(&to);
        let cfg =
            LaunchConfig { grid_dim: (r.n.div_ceil(256).clamp(1, i32::MAX as usize) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the caller's index walks `n` in-bounds elements of the input from `from`
        // and as many in-bounds elements of the output from `to` (both from their shapes).
        unsafe { b.launch(cfg) }.map_err(driver_error("copy", device))?;
    }
    Ok(g.storage(out, dtype, shape.clone()))
}

/// A batch of row-major products `op(a) @ op(b)`: `a` is `[m, k]` (or `[k, m]` read
/// transposed), `b` is `[k, n]` (or `[n, k]`); a batch stride of 0 reuses one matrix.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmShape {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub transpose_a: bool,
    pub transpose_b: bool,
    pub stride_a: usize,
    pub stride_b: usize,
}

/// `C = op(A) @ op(B)` through cuBLAS (f32 and f64; no TF32).
pub(crate) fn gemm(a: &DeviceStorage, b: &DeviceStorage, s: GemmShape, out_shape: &Shape) -> Result<DeviceStorage> {
    let g = gpu("matmul", a.device)?;
    let Some(blas) = g.blas() else {
        return Err(device_error("matmul", a.device, "cuBLAS (libcublas.so) was not found; put CUDA's lib folder on LD_LIBRARY_PATH"));
    };
    let out = g.alloc("matmul", s.batch * s.m * s.n * a.elem_size())?;
    if s.batch * s.m * s.n > 0 {
        let pointers = (g.ptr(a), g.ptr(b), out.address(g.stream()));
        // SAFETY: the buffers hold elements of the dtype matched here, at least as many as
        // the shapes and strides of `s` address (the caller derived them from the shapes).
        unsafe {
            match a.dtype {
                DType::F32 => gemm_typed::<f32>(blas, pointers, s, 1.0, 0.0),
                DType::F64 => gemm_typed::<f64>(blas, pointers, s, 1.0, 0.0),
                other => return Err(Error::UnsupportedDType { op: "matmul", dtype: other, needs: "f32 or f64 on the GPU" }),
            }
        }
        .map_err(|e| device_error("matmul", a.device, format!("cuBLAS failed: {e:?}")))?;
    }
    Ok(g.storage(out, a.dtype, out_shape.clone()))
}

/// cuBLAS's f32 and f64 products on device addresses.
trait BlasFloat: Copy {
    /// # Safety
    /// The pointers address live device memory of `Self` as the arguments describe.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        h: cudarc::cublas::sys::cublasHandle_t,
        ta: cublasOperation_t,
        tb: cublasOperation_t,
        mnk: (i32, i32, i32),
        alpha: Self,
        a: (u64, i32, i64),
        b: (u64, i32, i64),
        beta: Self,
        c: (u64, i32, i64),
        batch: i32,
    ) -> std::result::Result<(), cudarc::cublas::result::CublasError>;
}

macro_rules! blas_float {
    ($t:ty, $one:ident, $batched:ident) => {
        impl BlasFloat for $t {
            unsafe fn gemm(
                h: cudarc::cublas::sys::cublasHandle_t,
                ta: cublasOperation_t,
                tb: cublasOperation_t,
                (m, n, k): (i32, i32, i32),
                alpha: $t,
                a: (u64, i32, i64),
                b: (u64, i32, i64),
                beta: $t,
                c: (u64, i32, i64),
                batch: i32,
            ) -> std::result::Result<(), cudarc::cublas::result::CublasError> {
                use cudarc::cublas::result as r;
                // SAFETY: as the caller promises.
                unsafe {
                    if batch == 1 {
                        r::$one(h, ta, tb, m, n, k, &alpha, a.0 as *const $t, a.1, b.0 as *const $t, b.1, &beta, c.0 as *mut $t, c.1)
                    } else {
                        r::$batched(
                            h,
                            ta,
                            tb,
                            m,
                            n,
                            k,
                            &alpha,
                            a.0 as *const $t,
                            a.1,
                            a.2,
                            b.0 as *const $t,
                            b.1,
                            b.2,
                            &beta,
                            c.0 as *mut $t,
                            c.1,
                            c.2,
                            batch,
                        )
                    }
                }
            }
        }
    };
}
blas_float!(f32, sgemm, sgemm_strided_batched);
blas_float!(f64, dgemm, dgemm_strided_batched);

/// # Safety
/// `(a, b, c)` address live device buffers of `T` large enough for `s`.
unsafe fn gemm_typed<T: BlasFloat>(
    blas: &CudaBlas,
    (a, b, c): (u64, u64, u64),
    s: GemmShape,
    one: T,
    zero: T,
) -> std::result::Result<(), cudarc::cublas::result::CublasError> {
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B comes first.
    let op = |t: bool| if t { cublasOperation_t::CUBLAS_OP_T } else { cublasOperation_t::CUBLAS_OP_N };
    let (m, n, k) = (s.m as i32, s.n as i32, s.k as i32);
    let lda = if s.transpose_b { k } else { n };
    let ldb = if s.transpose_a { m } else { k };
    // SAFETY: as the caller promises; the handle is this lane's own.
    unsafe {
        T::gemm(
            *blas.handle(),
            op(s.transpose_b),
            op(s.transpose_a),
            (n, m, k),
            one,
            (b, lda, s.stride_b as i64),
            (a, ldb, s.stride_a as i64),
            zero,
            (c, n, (s.m * s.n) as i64),
            s.batch as i32,
        )
    }
}

// ------------------------------------------------------------------------------ CUDA graphs

/// A transfer waits for the host, which a capture cannot record.
fn refuse_while_capturing(op: &'static str, device: Device) -> Result<()> {
    match CAPTURING.with(|c| c.get()) {
        Some(_) => Err(device_error(op, device, "a copy between host and GPU cannot be part of a captured CUDA graph")),
        None => Ok(()),
    }
}

/// A whole call recorded as one CUDA graph, replayed by [`replay`](Self::replay). Its
/// values live in its arena when it has one (`arena.rs`); else the memory its kernels
/// allocated belongs to the graph (freed and made again at the same addresses by each
/// launch). Either way, what a caller keeps is copied out after each launch.
pub(crate) struct CapturedGraph {
    graph: cudarc::driver::CudaGraph,
    device: Device,
    /// The arena every allocation of the capture was placed in (none: the graph's memory).
    arena: Option<Arc<cudarc::driver::CudaSlice<u8>>>,
}

// SAFETY: the graph is used only under the caller's lock (one launch at a time), as the
// driver asks of graph objects.
unsafe impl Send for CapturedGraph {}
// SAFETY: as above.
unsafe impl Sync for CapturedGraph {}

/// Where a capture's allocations come from.
pub(crate) enum CaptureMemory {
    /// The driver's pool (the graph's own memory), each allocation and free recorded: the
    /// recording an arena is planned from.
    Recorded,
    /// One arena of the plan's size, each allocation at its planned offset, in the order of
    /// the recording the plan was made from.
    Planned(ArenaPlan),
}

/// Records what `f` launches on `device` as one CUDA graph (nothing runs yet). `f` must only
/// launch kernels and products on device data: a transfer in it is an `Err`. It records on
/// lane 0 and may move to the others with [`record_on_lane`]; every lane starts after what
/// the GPU's stream has queued, and lane 0 waits for all of them before the capture ends.
/// With [`CaptureMemory::Recorded`] it returns the recording too (else it is empty); with
/// [`CaptureMemory::Planned`], an `f` whose allocations differ from the plan's is an `Err`.
pub(crate) fn capture<R>(device: Device, memory: CaptureMemory, f: impl FnOnce() -> Result<R>) -> Result<(CapturedGraph, R, Vec<Event>)> {
    use cudarc::driver::sys;
    let g = gpu("capture", device)?;
    let lanes = g.capture.get_or_init(|| {
        (0..CAPTURE_LANES)
            .map(|_| {
                let s = g.ctx.new_stream().unwrap_or_else(|_| g.stream.clone());
                let blas = if g.blas.is_some() { CudaBlas::new(s.clone()).ok() } else { None };
                (s, blas)
            })
            .collect()
    });
    let arena = match &memory {
        CaptureMemory::Recorded => None,
        // SAFETY: every range is written by the kernel that makes its value before it is read.
        CaptureMemory::Planned(plan) => Some(Arc::new(unsafe { g.stream.alloc::<u8>(plan.size.max(1)) }.map_err(driver_error("capture", device))?)),
    };
    let origin = &lanes[0].0;
    // What the GPU's stream has queued (the arena's allocation among it) comes first.
    origin.join(&g.stream).map_err(driver_error("capture", device))?;
    origin.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).map_err(driver_error("capture", device))?;
    CAPTURING.with(|c| c.set(Some(0)));
    match (memory, &arena) {
        (CaptureMemory::Planned(plan), Some(a)) => arena::start_placing(a.clone(), plan),
        _ => arena::start_recording(),
    }
    // Each lane joins the capture by waiting for its start (a stream that records without
    // waiting for a capturing one would run its work now, outside the graph).
    let forked = (1..lanes.len()).try_for_each(|k| g.lane_waits(k, 0));
    let result = forked.and_then(|()| f());
    let recorded = arena::finish();
    // Always joined and ended, so every stream leaves capture mode whatever `f` did.
    let joined = (1..lanes.len()).try_for_each(|k| g.lane_waits(0, k));
    let ended = origin.end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
    // Cleared after the end, so that what `f` made and dropped while capturing was freed in
    // the graph, and what the ended capture still holds is not freed outside it.
    CAPTURING.with(|c| c.set(None));
    LANE_EVENTS.with(|e| e.borrow_mut().clear());
    let r = result?;
    joined?;
    let events = recorded.map_err(|why| device_error("capture", device, format!("the arena's plan does not fit the call: {why}")))?;
    match ended.map_err(driver_error("capture", device))? {
        Some(graph) => Ok((CapturedGraph { graph, device, arena }, r, events)),
        None => Err(device_error("capture", device, "the capture recorded nothing")),
    }
}

/// While capturing: what this thread records next goes to `lane`, after what each lane of
/// `waits` has recorded so far.
pub(crate) fn record_on_lane(device: Device, lane: usize, waits: &[usize]) -> Result<()> {
    let g = gpu("capture", device)?;
    if CAPTURING.with(|c| c.get()).is_none() || lane >= g.lanes().len() {
        return Err(device_error("capture", device, format!("lane {lane} of a capture that is not running")));
    }
    waits.iter().try_for_each(|&p| g.lane_waits(lane, p))?;
    CAPTURING.with(|c| c.set(Some(lane)));
    Ok(())
}

/// While capturing: every lane but `lane` waits for what `lane` has recorded so far.
pub(crate) fn lanes_wait_for(device: Device, lane: usize) -> Result<()> {
    let g = gpu("capture", device)?;
    (0..g.lanes().len()).filter(|&k| k != lane).try_for_each(|k| g.lane_waits(k, lane))
}

impl CapturedGraph {
    /// The size of its arena in bytes (0: it has none).
    pub(crate) fn arena_bytes(&self) -> usize {
        self.arena.as_ref().map_or(0, |a| a.len())
    }

    /// Launches the graph on the GPU's stream (after what is queued there).
    pub(crate) fn replay(&self) -> Result<()> {
        let g = gpu("replay", self.device)?;
        // SAFETY: the graph exec lives as long as `self`; the stream is the GPU's own.
        unsafe { cudarc::driver::sys::cuGraphLaunch(self.graph.cu_graph_exec(), g.stream.cu_stream()) }
            .result()
            .map_err(driver_error("replay", self.device))
    }
}

/// The device address of `d`'s data (stable for static buffers and graph allocations).
pub(crate) fn address(d: &DeviceStorage) -> u64 {
    let g = gpu("address", d.device).expect("data on a GPU that is open");
    g.ptr(d)
}

/// Copies `dst`'s size in bytes from device address `src` into `dst`, on the GPU's stream
/// (the capture stream while this thread captures: then the copy is a step of the graph).
pub(crate) fn copy_from(dst: &DeviceStorage, src: u64) -> Result<()> {
    let g = gpu("copy", dst.device)?;
    let bytes = dst.shape.numel() * dst.elem_size();
    if bytes > 0 {
        // SAFETY: both ranges are live device allocations of at least `bytes` bytes.
        unsafe { cudarc::driver::sys::cuMemcpyDtoDAsync_v2(address(dst), src, bytes, g.stream().cu_stream()) }
            .result()
            .map_err(driver_error("copy", dst.device))?;
    }
    Ok(())
}

/// A new buffer on `device` for `dtype` x `shape`, uninitialized.
pub(crate) fn empty(device: Device, dtype: DType, shape: &Shape) -> Result<DeviceStorage> {
    let g = gpu("empty", device)?;
    let buffer = g.alloc("empty", shape.numel() * dtype.size_of())?;
    Ok(g.storage(buffer, dtype, shape.clone()))
}
