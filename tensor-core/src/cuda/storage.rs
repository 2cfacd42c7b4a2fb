//! A tensor's data in a GPU's memory: one contiguous buffer (memory of its own, or a range of
//! a captured call's arena), in row-major order, with its dtype and shape. Cloning shares the
//! buffer (ops never write into an input), so a value saved for backward never changes under
//! its holder, as on the CPU.

use crate::device::Device;
use crate::dtype::DType;
use crate::shape::Shape;

/// Device data behind a tensor (feature `cuda`; without it, no value of this type exists).
#[derive(Clone)]
pub(crate) struct DeviceStorage {
    pub dtype: DType,
    pub shape: Shape,
    pub device: Device,
    #[cfg(feature = "cuda")]
    pub(crate) buffer: std::sync::Arc<super::buffer::Buffer>,
    #[cfg(not(feature = "cuda"))]
    pub(crate) never: std::convert::Infallible,
}

// Without the feature nothing makes one, so nothing calls these.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl DeviceStorage {
    /// The same buffer seen with another shape of as many elements (a reshape is free).
    pub(crate) fn with_shape(&self, shape: Shape) -> DeviceStorage {
        DeviceStorage { shape, ..self.clone() }
    }

    /// Bytes per element.
    pub(crate) fn elem_size(&self) -> usize {
        self.dtype.size_of()
    }
}

impl std::fmt::Debug for DeviceStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceStorage({} {}{})", self.device, self.dtype, self.shape)
    }
}
