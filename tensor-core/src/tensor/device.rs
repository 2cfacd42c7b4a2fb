//! Where a tensor lives, and moving it: `device`, `to_device`, `to_cpu`.

use super::{Tensor, Value};
use crate::device::Device;
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once any tensor has been put on a GPU: until then, dispatch skips asking where
/// inputs live (the CPU-only hot path stays as it was).
static ANY_ON_DEVICE: AtomicBool = AtomicBool::new(false);

/// True once some tensor of this process has lived on a GPU.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn any_on_device() -> bool {
    ANY_ON_DEVICE.load(Ordering::Relaxed)
}

/// The error for reading a GPU tensor's values as host data.
pub(crate) fn on_device_error(op: &'static str, device: Device) -> Error {
    Error::Device { op, reason: format!("the tensor's data is on {device}; call .to_cpu() first to read it on the host") }
}

impl Tensor {
    /// The device this tensor's data lives on.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// assert_eq!(Tensor::scalar(1.0f32).device(), Device::Cpu);
    /// ```
    pub fn device(&self) -> Device {
        match &*self.read_value() {
            Value::Device(d) => d.device,
            Value::Concrete(_) | Value::Symbolic(_) => Device::Cpu,
        }
    }

    /// A copy of this tensor on `device` (the tensor itself when it is there already). A
    /// leaf that requires grad gives a leaf that requires grad: moving a model's parameters
    /// (`model.to(device)` in PyTorch) keeps them trainable. Without the `cuda` feature, or
    /// without a GPU and its driver, moving to a GPU is an `Err` that says which.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::ones(&[2], DType::F32);
    /// assert!(x.to_device(Device::Cpu)?.same_as(&x));
    /// # #[cfg(not(feature = "cuda"))]
    /// assert!(x.to_device(Device::Cuda(0)).is_err()); // no GPU in this build
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        if self.device() == device {
            return Ok(self.clone());
        }
        if self.is_symbolic() {
            return Err(Error::Device {
                op: "to_device",
                reason: "a tensor cannot change device inside a traced graph function yet; move the arguments before the call".into(),
            });
        }
        let value = match (&*self.read_value(), device) {
            (Value::Device(d), Device::Cpu) => Value::Concrete(crate::cuda::download(d)?),
            (Value::Device(d), gpu) => Value::Device(crate::cuda::upload(&crate::cuda::download(d)?, gpu)?),
            (Value::Concrete(s), gpu) => Value::Device(crate::cuda::upload(s, gpu)?),
            (Value::Symbolic(_), _) => unreachable!("checked above"),
        };
        if device.is_cuda() {
            ANY_ON_DEVICE.store(true, Ordering::Relaxed);
        }
        let moved = Tensor::from_value(value, self.0.dtype, self.0.shape.clone());
        if self.requires_grad() && self.is_leaf() {
            return moved.requires_grad_(true);
        }
        Ok(moved)
    }

    /// Moves this tensor's data (and its `.grad`) to `device` in place: every handle of the
    /// tensor, a model's layer included, then sees it there. This is how a model built on
    /// the CPU goes to a GPU (PyTorch's `model.to(device)`): move each of its parameters,
    /// then make the optimizer. Only a leaf moves in place (an op's result would leave its
    /// gradient's history behind); anything else is an `Err` that says to use
    /// [`to_device`](Self::to_device), and nothing changes.
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let w = Tensor::ones(&[2], DType::F32).requires_grad_(true)?;
    /// let layer_view = w.clone();
    /// w.to_device_(Device::Cpu)?; // already there: nothing to do
    /// assert!(layer_view.requires_grad() && layer_view.device() == Device::Cpu);
    /// assert!(w.mul(2.0)?.to_device_(Device::Cpu).is_err()); // not a leaf
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_device_(&self, device: Device) -> Result<()> {
        if !self.is_leaf() {
            return Err(Error::invalid(
                "to_device_",
                "self",
                "only a leaf tensor (a parameter, an input) moves in place; use .to_device(device) for an op's result",
            ));
        }
        if self.device() == device {
            return Ok(());
        }
        let moved = self.to_device(device)?;
        let grad = self.grad().map(|g| g.to_device(device)).transpose()?;
        let value = moved.read_value().clone();
        self.set_value(value);
        if grad.is_some() {
            self.set_grad_raw(grad);
        }
        Ok(())
    }

    /// A copy of this tensor in host memory (`to_device(Device::Cpu)`).
    ///
    /// ```
    /// use tensor_core::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    /// assert_eq!(x.to_cpu()?.to_vec::<f32>()?, vec![1.0, 2.0]);
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn to_cpu(&self) -> Result<Tensor> {
        self.to_device(Device::Cpu)
    }
}

impl Device {
    /// Waits for every kernel queued on this device to finish (for timing; reading a
    /// tensor's values waits by itself). A no-op on the CPU.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// Device::Cpu.synchronize()?;
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn synchronize(self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            gpu => crate::cuda::synchronize(gpu),
        }
    }

    /// The GPU time of the work `f` queues on this device, in microseconds, by CUDA events
    /// recorded around it (what PyTorch's `torch.cuda.Event(enable_timing=True)` measures):
    /// for the benchmarks. An `Err` on the CPU. Not part of the public API.
    #[doc(hidden)]
    pub fn time_on_gpu(self, mut f: impl FnMut()) -> Result<f64> {
        crate::cuda::time_on_gpu(self, &mut f)
    }

    /// The device's name: the GPU's as its driver reports it (`NVIDIA H100 80GB HBM3`).
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert_eq!(Device::Cpu.name()?, "cpu");
    /// # Ok::<(), tensor_core::Error>(())
    /// ```
    pub fn name(self) -> Result<String> {
        match self {
            Device::Cpu => Ok("cpu".into()),
            gpu => crate::cuda::gpu_name(gpu),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    /// Without a GPU (and, in the default build, without the feature) moving a tensor there is
    /// an `Err` that says which, and the tensor stays as it was.
    #[test]
    fn moving_to_a_gpu_that_is_not_there_is_an_err_that_says_why() {
        let x = Tensor::ones(&[2], DType::F32);
        let err = match x.to_device(Device::Cuda(0)) {
            Err(e) => e.to_string(),
            // A machine with a GPU and its driver: nothing to check here (the device script
            // checks that machine).
            Ok(_) => return,
        };
        let expected = if cfg!(feature = "cuda") { "no CUDA driver" } else { "`cuda` feature" };
        assert!(err.contains("cuda:0") && err.contains(expected), "{err}");
        assert_eq!((x.device(), x.to_vec::<f32>().unwrap()), (Device::Cpu, vec![1.0, 1.0]));
        assert!(Device::Cuda(0).synchronize().is_err() && Device::Cuda(0).name().is_err());
    }
}
