//! Without the `cuda` feature: every way onto a GPU is an `Err` that says how to get one.

use super::DeviceStorage;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::storage::Storage;

fn not_built(device: Device) -> Error {
    Error::Device {
        op: "to_device",
        reason: format!(
            "{device}: this build of tensor-core has no GPU support; build with the `cuda` feature (cargo build --features tensor-core/cuda)"
        ),
    }
}

/// Never succeeds: there is no GPU backend in this build.
pub(crate) fn upload(_: &Storage, device: Device) -> Result<DeviceStorage> {
    Err(not_built(device))
}

/// Unreachable in practice (no `DeviceStorage` exists without the feature).
pub(crate) fn download(d: &DeviceStorage) -> Result<Storage> {
    match d.never {}
}

/// Never succeeds: there is no GPU backend in this build.
pub(crate) fn synchronize(device: Device) -> Result<()> {
    Err(not_built(device))
}

/// Never succeeds: there is no GPU backend in this build.
pub(crate) fn gpu_name(device: Device) -> Result<String> {
    Err(not_built(device))
}

/// Never succeeds: there is no GPU backend in this build.
pub(crate) fn time_on_gpu(device: Device, _: &mut dyn FnMut()) -> Result<f64> {
    Err(not_built(device))
}
