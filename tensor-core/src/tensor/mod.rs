//! The `Tensor` handle: a cheap `Arc` to either concrete data or a symbolic value in the graph
//! being traced, plus its autograd metadata and in-place version counter.

pub(crate) mod context;
mod convert;
mod create;
mod device;
mod display;
pub(crate) mod grad_mode;
pub(crate) mod grad_node;
mod symbol;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::storage::Storage;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};
pub(crate) use symbol::Symbol;
pub use symbol::ValueId;

pub(crate) use create::seeded_rng;
#[cfg_attr(not(feature = "cuda"), allow(unused_imports))]
pub(crate) use device::{any_on_device, on_device_error};
pub(crate) use display::{capture_printed, PRINT_MARK};

/// An n-dimensional array of one dtype. Cloning is cheap (a reference count); clones are
/// handles to the same tensor, so an in-place op through one is seen through all.
///
/// ```
/// use tensor_core::prelude::*;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
/// let y = (&x * 2.0 + 1.0).sum()?;
/// assert_eq!(y.item::<f32>()?, 24.0);
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorInner>);

pub(crate) struct TensorInner {
    pub(crate) id: u64,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    pub(crate) value: RwLock<Value>,
    pub(crate) version: AtomicU64,
    /// The trace that was active when this tensor was created (0: none). A concrete tensor
    /// made inside a trace is a constant of that trace; one made outside is a capture.
    pub(crate) origin_trace: u64,
    pub(crate) requires_grad: AtomicBool,
    pub(crate) grad: Mutex<GradSlot>,
}

/// What a tensor holds: data, or a reference to a value of the graph being traced.
#[derive(Clone)]
pub(crate) enum Value {
    Concrete(Storage),
    Symbolic(Symbol),
    /// Data in a GPU's memory (feature `cuda`).
    Device(crate::cuda::DeviceStorage),
}

/// The autograd state of one tensor.
#[derive(Default)]
pub(crate) struct GradSlot {
    pub(crate) grad: Option<Tensor>,
    pub(crate) grad_fn: Option<Arc<grad_node::GradNode>>,
    /// Which output of `grad_fn` this tensor is.
    pub(crate) output_nr: usize,
    pub(crate) retains_grad: bool,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Tensor {
    pub(crate) fn from_value(value: Value, dtype: DType, shape: Shape) -> Tensor {
        Tensor(Arc::new(TensorInner {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            dtype,
            shape,
            value: RwLock::new(value),
            version: AtomicU64::new(0),
            origin_trace: context::current_trace(),
            requires_grad: AtomicBool::new(false),
            grad: Mutex::new(GradSlot::default()),
        }))
    }

    /// A concrete tensor owning `storage`.
    pub(crate) fn from_storage(storage: Storage) -> Tensor {
        let (dtype, shape) = (storage.dtype(), storage.shape());
        Tensor::from_value(Value::Concrete(storage), dtype, shape)
    }

    /// A unique id of this tensor (shared by its clones).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2], DType::F32);
    /// assert_eq!(x.id(), x.clone().id());
    /// assert_ne!(x.id(), Tensor::zeros(&[2], DType::F32).id());
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The element type.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Tensor::scalar(1.5f64).dtype(), DType::F64);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The shape, as numbers. In a trace with relaxed dims a `Shape` cannot hold a symbol,
    /// so each symbolic dim is specialized: the call's value, with a guard on it (as
    /// `usize::from(dim)`); read [`Tensor::dims`] to keep the symbols.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2, 3], DType::F32);
    /// assert_eq!(x.shape().dims(), &[2, 3]);
    /// assert_eq!(x.shape().to_string(), "[2, 3]");
    ///
    /// #[graph_fn(reduce_retracing)]
    /// fn rows(x: &Tensor) -> Result<Tensor> {
    ///     let shape = x.shape(); // never `?`: the call's dims, guarded
    ///     x.mul(shape.dims()[0] as f32)
    /// }
    /// rows(&Tensor::ones(&[2], DType::F32))?;
    /// assert_eq!(rows(&Tensor::ones(&[3], DType::F32))?.to_vec::<f32>()?, vec![3.0; 3]);
    /// let f = tensor_core::function::lookup("rows").unwrap();
    /// assert_eq!(f.concrete_functions()[1].guards(), ["n0 == 3"]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn shape(&self) -> Shape {
        let raw = self.raw_shape();
        match raw.is_known() {
            true => raw,
            false => Shape::new(&self.dims()),
        }
    }

    /// The shape as traced, unknown dims as the crate's marker: what code inside the crate
    /// reads (it handles unknown dims itself and must not record guards).
    pub(crate) fn raw_shape(&self) -> Shape {
        match context::stand_in(self) {
            Some(p) => p.0.shape.clone(),
            None => self.0.shape.clone(),
        }
    }

    /// The dims. In a trace with relaxed dims, a relaxed dim is a symbol: indexing gives a
    /// [`Dim`](crate::dim::Dim) whose comparisons record guards, and reading the dims as
    /// `&[usize]` specializes them (see [`crate::dim`]).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Tensor::zeros(&[4, 1], DType::Bool).dims(), vec![4, 1]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn dims(&self) -> crate::dim::Dims {
        let shape = self.raw_shape();
        if shape.is_known() {
            return crate::dim::Dims::known(shape.dims());
        }
        self.symbolic_dims(&shape)
    }

    /// Dim `axis` (see [`Tensor::dims`]); panics when `axis` is out of range.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let n = Tensor::zeros(&[4, 1], DType::F32).dim(0);
    /// assert!(n == 4);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn dim(&self, axis: usize) -> crate::dim::Dim {
        self.dims()[axis]
    }

    /// The dims as a vector, sentinels included: what code inside the crate reads (it
    /// handles unknown dims itself and must not record guards).
    pub(crate) fn raw_dims(&self) -> Vec<usize> {
        self.raw_shape().dims().to_vec()
    }

    /// The dims of a traced value with unknown dims: symbols where the trace can name them.
    fn symbolic_dims(&self, shape: &Shape) -> crate::dim::Dims {
        use crate::dim::{table, Dim, Dims};
        let sym = context::stand_in(self).and_then(|p| p.symbol()).or_else(|| self.symbol());
        let Some(sym) = sym else { return Dims::known(shape.dims()) };
        if shape.is_unknown_rank() {
            let hint = table::read_rank(sym.trace, sym.value, "dims").unwrap_or_default();
            return Dims::known(hint.dims());
        }
        let dims = shape
            .dims()
            .iter()
            .enumerate()
            .map(|(axis, &d)| match d < crate::shape::UNKNOWN_RANK {
                true => Dim::from(d),
                // No value at the traced call: the trace is refused when it ends.
                false => table::read(sym.trace, sym.value, axis, "dims").unwrap_or(Dim::from(1)),
            })
            .collect();
        Dims::from_dims(dims)
    }

    /// The number of dims.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Tensor::zeros(&[4, 1, 2], DType::F32).rank(), 3);
    /// assert_eq!(Tensor::scalar(1i32).rank(), 0);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn rank(&self) -> usize {
        self.0.shape.rank()
    }

    /// The number of elements.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Tensor::zeros(&[4, 3], DType::F32).numel(), 12);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn numel(&self) -> usize {
        self.0.shape.numel()
    }

    /// True when this handle holds a value of a graph being traced rather than data.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// use tensor_core::function::ConcreteFunction;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// assert!(!x.is_symbolic());
    /// ConcreteFunction::trace("f", &[("x", &x)], || {
    ///     assert!(x.is_symbolic()); // inside the trace, the argument stands for the graph's input
    ///     Ok(vec![x.mul(2.0)?])
    /// })?;
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn is_symbolic(&self) -> bool {
        context::stand_in(self).is_some() || matches!(*self.read_value(), Value::Symbolic(_))
    }

    /// How many in-place ops have changed this tensor.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2], DType::F32);
    /// x.add_(1.0)?;
    /// assert_eq!(x.version(), 1);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn version(&self) -> u64 {
        self.0.version.load(Ordering::Acquire)
    }

    /// True when both handles are the same tensor.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::zeros(&[2], DType::F32);
    /// assert!(x.same_as(&x.clone()));
    /// assert!(!x.same_as(&x.detach()));
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn same_as(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub(crate) fn read_value(&self) -> RwLockReadGuard<'_, Value> {
        self.0.value.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn grad_slot(&self) -> MutexGuard<'_, GradSlot> {
        self.0.grad.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The data of a concrete tensor; an `Err` naming `op` for a symbolic one.
    pub(crate) fn storage(&self, op: &'static str) -> Result<Storage> {
        match &*self.read_value() {
            Value::Concrete(s) => Ok(s.clone()),
            Value::Symbolic(sym) => Err(sym.value_error(op)),
            Value::Device(d) => Err(device::on_device_error(op, d.device)),
        }
    }

    /// The data for reading its values as Rust values: an `Err` while tracing for any tensor
    /// whose value would only be known when the graph runs.
    pub(crate) fn host_storage(&self, op: &'static str) -> Result<Storage> {
        if !context::is_known_now(self) && self.symbol().is_none() {
            // A tensor from outside the function: its value is read when the graph runs.
            let name =
                context::stand_in(self).and_then(|p| p.symbol()).map_or_else(|| "a tensor from outside the function".to_string(), |s| s.name());
            return Err(Error::SymbolicValue { op, name });
        }
        self.storage(op)
    }

    /// Replaces the value after an in-place op and bumps the version counter.
    pub(crate) fn set_value(&self, value: Value) {
        *self.0.value.write().unwrap_or_else(|e| e.into_inner()) = value;
        self.0.version.fetch_add(1, Ordering::AcqRel);
    }

    /// The tensor that stands for this one in the code running now: while a function is
    /// traced, the graph value of an argument or capture it uses; otherwise itself.
    pub(crate) fn stand_in(&self) -> Tensor {
        context::stand_in(self).unwrap_or_else(|| self.clone())
    }

    /// The symbolic value this handle holds, if any.
    pub(crate) fn symbol(&self) -> Option<Symbol> {
        match &*self.read_value() {
            Value::Symbolic(s) => Some(s.clone()),
            Value::Concrete(_) | Value::Device(_) => None,
        }
    }
}

// Tensors are shared across threads by design (the trace cache, captured parameters).
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tensor>();
};
