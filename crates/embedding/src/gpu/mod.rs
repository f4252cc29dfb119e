//! The forward pass on an NVIDIA GPU, designed to give the CPU's bits.
//!
//! Every vector this crate computes is defined by its operation order (`bert::gemm`, `bert::ops`): each linear
//! output one fused multiply-add chain over k ascending from its bias, row sums in 16 partials added in a fixed
//! tree, its own exp and erf from add, multiply, fma, divide and compare. A GPU rounds those operations as IEEE
//! says when told to, so kernels that keep the order (`kernels.cu`) are meant to give the same bits. What is
//! shown: the kernels' own source, compiled as host C++ and run under the launch emulator, gives the CPU's bits
//! in CI; NVRTC compiles it to IEEE operations only. What is not: these kernels have not yet run on a GPU
//! (docs/performance.md, "On a GPU"), so no GPU is trusted on the design's word. `auto` and `cuda` take a GPU
//! only once it has passed a self-check at start (every kernel against the CPU on fixed inputs, [`Extent`]);
//! `auto` uses the CPU otherwise, saying why.
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

pub use check::{Extent, KernelCheck, ProductCheck, StepCheck, Throughput, check_kernels};
pub use cuda::NVRTC_VAR;
pub use emulator::EMULATED_MEMORY_VAR;
pub use forward::{GEMM_VAR, PROFILE_VAR};

pub(crate) use backend::{Backend, DeviceError};
pub(crate) use forward::GpuModel;

/// The kernels' source (compiled by NVRTC at run time, and into the emulator by build.rs).
pub(crate) const KERNELS_SOURCE: &str = include_str!("kernels.cu");

/// Where a forward pass is asked to run. Each is designed to give the CPU's bits; a GPU is used only once it
/// has shown it on the self-check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceRequest {
    /// An NVIDIA GPU when one is found and passes the self-check, else the CPU.
    Auto,
    /// The CPU.
    Cpu,
    /// An NVIDIA GPU, through the CUDA driver and NVRTC; an error naming what is missing when none is usable, or
    /// what differed when it fails the self-check.
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
/// model would run. A GPU counts as usable only once it has passed the self-check.
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

/// The variable that has `auto` take the launch emulator as the GPU it found: `emulated`, or `emulated-broken`
/// (its products' k order reversed, which the self-check must refuse). For rehearsing, without a GPU, what
/// `auto` does with one (`scripts/gpu-check.sh --device emulated`, CI); it changes where the model runs,
/// never the bits, which the self-check holds either way.
pub const AUTO_STAND_IN_VAR: &str = "SCIFACT_AUDIT_AUTO_GPU_STAND_IN";

/// Opens the device `request` asks for: `None` for the CPU. `Auto` and `Cuda` take a GPU only once it has
/// passed [`check::Extent::SelfCheck`]; `Auto` without one that did is the CPU, and the second value says why.
///
/// # Errors
/// [`crate::Error::Device`] when `Cuda` finds no usable GPU (naming what is missing, or the kernels its
/// self-check found differing), or the emulator's memory setting is not a size.
pub(crate) fn open(request: DeviceRequest) -> crate::Result<(Option<Opened>, Option<String>)> {
    match request {
        DeviceRequest::Cpu | DeviceRequest::Emulated => open_unvetted(request),
        DeviceRequest::Cuda => {
            let (opened, _) = open_unvetted(request)?;
            match opened.map(vet) {
                Some(Ok(opened)) => Ok((Some(opened), None)),
                Some(Err(why)) => Err(crate::Error::Device(format!(
                    "--device cuda: {why}; `scifact-audit device --device cuda --check` shows every kernel, and \
                     --device cpu embeds without it"
                ))),
                None => Err(crate::Error::Device("--device cuda: no GPU opened".to_owned())),
            }
        }
        DeviceRequest::Auto => {
            let (opened, no_gpu) = open_unvetted(request)?;
            match opened.map(vet) {
                Some(Ok(opened)) => Ok((Some(opened), None)),
                Some(Err(why)) => Ok((None, Some(why))),
                None => Ok((None, no_gpu)),
            }
        }
    }
}

/// `opened`, once its kernels have given the CPU's bits on the self-check's inputs; else why not, in words.
fn vet(opened: Opened) -> Result<Opened, String> {
    let description = opened.device.describe();
    match check::check_on(Arc::clone(&opened.backend), description.clone(), check::Extent::SelfCheck, false) {
        Ok(found) if found.exact() => Ok(opened),
        Ok(found) => Err(format!(
            "{description} failed its self-check against the CPU (values that differ: {}), so its vectors would \
             not be the CPU's",
            found.differences()
        )),
        Err(error) => Err(format!("{description} could not run its self-check: {error}")),
    }
}

/// Opens the device `request` asks for as it is found, without the self-check (which `device --check`
/// reports on in full rather than refusing). `Auto` without a GPU is the CPU, and the second value says why.
pub(crate) fn open_unvetted(request: DeviceRequest) -> crate::Result<(Option<Opened>, Option<String>)> {
    let emulated = |variant| -> crate::Result<Opened> {
        let capacity = emulator::Emulator::capacity_from_env().map_err(crate::Error::Device)?;
        let backend: Arc<dyn Backend> = Arc::new(emulator::Emulator::new(variant, capacity));
        Ok(Opened { backend, device: Device::Emulated })
    };
    let cuda = || -> Result<Opened, String> {
        let cuda = cuda::Cuda::open()?;
        let device = Device::Cuda(cuda.describe().to_owned());
        Ok(Opened { backend: Arc::new(cuda), device })
    };
    match request {
        DeviceRequest::Cpu => Ok((None, None)),
        DeviceRequest::Emulated => Ok((Some(emulated(emulator::Variant::Exact)?), None)),
        DeviceRequest::Cuda => {
            let opened = cuda().map_err(|reason| crate::Error::Device(format!("--device cuda: {reason}")))?;
            Ok((Some(opened), None))
        }
        DeviceRequest::Auto => match std::env::var(AUTO_STAND_IN_VAR).as_deref() {
            Ok("emulated") => Ok((Some(emulated(emulator::Variant::Exact)?), None)),
            Ok("emulated-broken") => Ok((Some(emulated(emulator::Variant::Broken)?), None)),
            Ok(other) => Err(crate::Error::Device(format!(
                "{AUTO_STAND_IN_VAR}={other:?}: only `emulated` and `emulated-broken` stand in for a GPU"
            ))),
            Err(_) => match cuda() {
                Ok(opened) => Ok((Some(opened), None)),
                Err(reason) => Ok((None, Some(reason))),
            },
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
