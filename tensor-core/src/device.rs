//! Where a tensor's data lives: the CPU's memory or one NVIDIA GPU's.

use std::fmt;

/// A tensor's device. Ops run where their inputs live; inputs on two different devices are an
/// `Err` naming both (a 0-d CPU tensor, a scalar, goes along with GPU operands, as in
/// PyTorch).
///
/// ```
/// use tensor_core::prelude::*;
/// let x = Tensor::ones(&[2], DType::F32);
/// assert_eq!(x.device(), Device::Cpu);
/// assert_eq!(Device::Cuda(0).to_string(), "cuda:0");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// The host's memory, where the CPU kernels run (the default).
    #[default]
    Cpu,
    /// The NVIDIA GPU of this ordinal (feature `cuda`).
    Cuda(usize),
}

impl Device {
    /// True for a GPU.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// assert!(Device::Cuda(1).is_cuda() && !Device::Cpu.is_cuda());
    /// ```
    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}
