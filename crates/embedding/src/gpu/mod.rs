//! The forward pass on an NVIDIA GPU, with the CPU's bits.
//!
//! Every vector this crate computes is defined by its operation order (`bert::gemm`, `bert::ops`): each linear
//! output one fused multiply-add chain over k ascending from its bias, row sums in 16 partials added in a fixed
//! tree, its own exp and erf from add, multiply, fma, divide and compare. A GPU rounds those operations as IEEE
//! says when told to, so kernels that keep the order (`kernels.cu`) give the same bits: a fixture embedded on a
//! GPU is the one the CPU embeds, and a bundle made on either verifies on the other.
//!
//! [`Device`] is where a model runs. [`DeviceRequest::Cuda`] loads the CUDA driver and NVRTC at run time (a
//! binary built without CUDA runs everywhere; what is missing is an error, never a panic) and compiles the
//! kernels for the GPU it finds. [`DeviceRequest::Emulated`] runs the same kernel source, compiled as host C++,
//! under a launch emulator on the CPU: slow, and how the kernels are held to the CPU path without a GPU.

mod backend;
mod check;
mod cuda;
mod emulator;
mod forward;

use std::sync::Arc;

pub use check::{KernelCheck, check_kernels};
pub use cuda::NVRTC_VAR;
pub use emulator::EMULATED_MEMORY_VAR;
pub use forward::{GEMM_VAR, PROFILE_VAR};

pub(crate) use backend::{Backend, DeviceError};
pub(crate) use forward::GpuModel;

/// The kernels' source (compiled by NVRTC at run time, and into the emulator by build.rs).
pub(crate) const KERNELS_SOURCE: &str = include_str!("kernels.cu");

/// Where a forward pass is asked to run. The vectors are the same bits on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceRequest {
    /// An NVIDIA GPU when one is usable, else the CPU.
    Auto,
    /// The CPU.
    Cpu,
    /// An NVIDIA GPU, through the CUDA driver and NVRTC; an error naming what is missing when none is usable.
    Cuda,
    /// The GPU kernels on the CPU, under the launch emulator: slow; for checking the kernels without a GPU.
    Emulated,
}

impl DeviceRequest {
    /// The request's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            DeviceRequest::Auto => "auto",
            DeviceRequest::Cpu => "cpu",
            DeviceRequest::Cuda => "cuda",
            DeviceRequest::Emulated => "emulated",
        }
    }
}

/// The device a forward pass runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Device {
    /// The CPU, with these kernels.
    Cpu(crate::Kernels),
    /// An NVIDIA GPU: its name, architecture, driver and compiler.
    Cuda(String),
    /// The GPU kernels under the launch emulator.
    Emulated,
}

impl Device {
    /// `cpu`, `cuda` or `emulated`.
    pub fn kind(&self) -> &'static str {
        match self {
            Device::Cpu(_) => "cpu",
            Device::Cuda(_) => "cuda",
            Device::Emulated => "emulated",
        }
    }

    /// What ran, for people and for records: the CPU's kernels, or the GPU's name, architecture, driver and
    /// compiler.
    pub fn describe(&self) -> String {
        match self {
            Device::Cpu(kernels) => format!("cpu ({kernels:?} kernels)"),
            Device::Cuda(description) => format!("cuda: {description}"),
            Device::Emulated => "emulated (the GPU kernels on the CPU, under the launch emulator)".to_owned(),
        }
    }
}

/// The device `request` finds (without loading a model), and, when `auto` finds no usable GPU, why: where a
/// model would run.
///
/// # Errors
/// As [`SentenceBert::use_device`](crate::SentenceBert::use_device).
pub fn find(request: DeviceRequest) -> crate::Result<(Device, Option<String>)> {
    let (opened, no_gpu) = open(request)?;
    Ok((opened.map_or_else(|| Device::Cpu(crate::Kernels::best()), |o| o.device), no_gpu))
}

/// A device to run the GPU forward pass on, opened.
pub(crate) struct Opened {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) device: Device,
}

/// Opens the device `request` asks for: `None` for the CPU. `Auto` without a usable GPU is the CPU, and the
/// second value says why.
///
/// # Errors
/// [`crate::Error::Device`] when `Cuda` finds no usable GPU (naming what is missing), or the emulator's memory
/// setting is not a size.
pub(crate) fn open(request: DeviceRequest) -> crate::Result<(Option<Opened>, Option<String>)> {
    match request {
        DeviceRequest::Cpu => Ok((None, None)),
        DeviceRequest::Emulated => {
            let capacity = emulator::Emulator::capacity_from_env().map_err(crate::Error::Device)?;
            let backend: Arc<dyn Backend> =
                Arc::new(emulator::Emulator::new(emulator::Variant::Exact, capacity));
            Ok((Some(Opened { backend, device: Device::Emulated }), None))
        }
        DeviceRequest::Cuda => {
            let cuda = cuda::Cuda::open()
                .map_err(|reason| crate::Error::Device(format!("--device cuda: {reason}")))?;
            let device = Device::Cuda(cuda.describe().to_owned());
            Ok((Some(Opened { backend: Arc::new(cuda), device }), None))
        }
        DeviceRequest::Auto => match cuda::Cuda::open() {
            Ok(cuda) => {
                let device = Device::Cuda(cuda.describe().to_owned());
                Ok((Some(Opened { backend: Arc::new(cuda), device }), None))
            }
            Err(reason) => Ok((None, Some(reason))),
        },
    }
}

/// `bytes` in the largest binary unit that keeps it at least 1, with one decimal.
pub(crate) fn human_bytes(bytes: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} bytes") } else { format!("{value:.1} {}", units[unit]) }
}

#[cfg(test)]
mod tests;
