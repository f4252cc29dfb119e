//! The launch emulator as a [`Backend`]: kernels.cu compiled as host C++ (build.rs), run block by block on the
//! CPU with each block's threads as fibers that meet at barriers. Device memory is host memory. Slow, and exact:
//! it is how CI runs the GPU kernels, and the forward pass over them, without a GPU.

use std::alloc::Layout;
use std::collections::HashMap;
use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::backend::{Backend, DeviceError, Kernel};

unsafe extern "C" {
    fn scifact_emulate_exact(
        name: *const c_char,
        params: *const c_void,
        grid: *const u32,
        block: *const u32,
    ) -> c_int;
    fn scifact_emulate_broken(
        name: *const c_char,
        params: *const c_void,
        grid: *const u32,
        block: *const u32,
    ) -> c_int;
}

/// Which build of the kernels runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// kernels.cu as it is.
    Exact,
    /// With the products' k order reversed: a kernel that must fail the order tests and the self-check.
    Broken,
}

/// The emulated device.
pub(crate) struct Emulator {
    variant: Variant,
    /// The memory it pretends to have: allocations past it fail as out of memory.
    capacity: usize,
    allocations: Mutex<HashMap<u64, Layout>>,
    used: AtomicUsize,
    /// Free memory to report instead of the truth (tests: a device that overstates what it has).
    reported: Option<usize>,
    /// Allocations refused for want of memory.
    pub(crate) refused: AtomicUsize,
}

/// The memory an emulated device has unless `SCIFACT_AUDIT_EMULATED_GPU_MEMORY` (bytes, or with a K, M or G
/// suffix) says otherwise.
pub(crate) const DEFAULT_CAPACITY: usize = 2 << 30;

/// The variable that sets an emulated device's memory, to try the batch sizing of a small GPU.
pub const EMULATED_MEMORY_VAR: &str = "SCIFACT_AUDIT_EMULATED_GPU_MEMORY";

impl Emulator {
    pub(crate) fn new(variant: Variant, capacity: usize) -> Emulator {
        Emulator {
            variant,
            capacity,
            allocations: Mutex::new(HashMap::new()),
            used: AtomicUsize::new(0),
            reported: None,
            refused: AtomicUsize::new(0),
        }
    }

    /// The emulator, reporting `reported` bytes free whatever it has (`None`: the truth).
    #[cfg(test)]
    pub(crate) fn reporting(mut self, reported: Option<usize>) -> Emulator {
        self.reported = reported;
        self
    }

    /// The capacity `SCIFACT_AUDIT_EMULATED_GPU_MEMORY` asks for.
    ///
    /// # Errors
    /// A value that is not a size.
    pub(crate) fn capacity_from_env() -> Result<usize, String> {
        let Ok(value) = std::env::var(EMULATED_MEMORY_VAR) else {
            return Ok(DEFAULT_CAPACITY);
        };
        let trimmed = value.trim();
        let (digits, unit) = match trimmed.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
            Some((at, _)) => (&trimmed[..at], trimmed[at..].trim_end_matches(['i', 'B', 'b'])),
            None => (trimmed, ""),
        };
        let scale: usize = match unit {
            "" => 1,
            "K" | "k" => 1 << 10,
            "M" | "m" => 1 << 20,
            "G" | "g" => 1 << 30,
            _ => return Err(format!("{EMULATED_MEMORY_VAR}={value:?} is not a size (bytes, or 64M, 2G, …)")),
        };
        digits
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{EMULATED_MEMORY_VAR}={value:?} is not a size (bytes, or 64M, 2G, …)"))
    }
}

impl Backend for Emulator {
    fn alloc(&self, bytes: usize) -> Result<u64, DeviceError> {
        let bytes = bytes.max(1);
        let used = self.used.fetch_add(bytes, Ordering::SeqCst) + bytes;
        if used > self.capacity {
            self.used.fetch_sub(bytes, Ordering::SeqCst);
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(DeviceError::OutOfMemory { bytes });
        }
        let layout = Layout::from_size_align(bytes, 256).map_err(|e| DeviceError::Failed(e.to_string()))?;
        // SAFETY: the layout's size is at least one byte.
        let pointer = unsafe { std::alloc::alloc(layout) };
        if pointer.is_null() {
            self.used.fetch_sub(bytes, Ordering::SeqCst);
            return Err(DeviceError::OutOfMemory { bytes });
        }
        let address = pointer as u64;
        self.allocations
            .lock()
            .map_err(|_| DeviceError::Failed("allocation table poisoned".into()))?
            .insert(address, layout);
        Ok(address)
    }

    fn free(&self, address: u64) {
        let Ok(mut allocations) = self.allocations.lock() else { return };
        if let Some(layout) = allocations.remove(&address) {
            self.used.fetch_sub(layout.size(), Ordering::SeqCst);
            // SAFETY: `address` was returned by `alloc` with this layout and is freed once (removed above).
            unsafe { std::alloc::dealloc(address as *mut u8, layout) };
        }
    }

    fn upload(&self, address: u64, source: &[u8]) -> Result<(), DeviceError> {
        // SAFETY: `address` is an allocation of at least `source.len()` bytes (Buffer's contract).
        unsafe { std::ptr::copy_nonoverlapping(source.as_ptr(), address as *mut u8, source.len()) };
        Ok(())
    }

    fn download(&self, address: u64, target: &mut [u8]) -> Result<(), DeviceError> {
        // SAFETY: as in `upload`.
        unsafe { std::ptr::copy_nonoverlapping(address as *const u8, target.as_mut_ptr(), target.len()) };
        Ok(())
    }

    fn launch(
        &self,
        kernel: Kernel,
        grid: [u32; 3],
        block: [u32; 3],
        arguments: &[u8],
    ) -> Result<(), DeviceError> {
        if arguments.len() != kernel.argument_bytes() {
            return Err(DeviceError::Failed(format!(
                "{} takes {} bytes of arguments, not {}",
                kernel.name(),
                kernel.argument_bytes(),
                arguments.len()
            )));
        }
        let name = CString::new(kernel.name()).map_err(|e| DeviceError::Failed(e.to_string()))?;
        // The struct is read by value, at its natural alignment: copy the bytes into 8-byte-aligned storage.
        let mut aligned = vec![0u64; arguments.len().div_ceil(8)];
        // SAFETY: `aligned` holds at least `arguments.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                arguments.as_ptr(),
                aligned.as_mut_ptr().cast::<u8>(),
                arguments.len(),
            )
        };
        let params = aligned.as_ptr().cast::<c_void>();
        // SAFETY: the arguments are the kernel's struct (size checked above), whose pointers the forward pass
        // took from live allocations of this emulator, and the launch returns only when every block has run.
        let status = unsafe {
            match self.variant {
                Variant::Exact => scifact_emulate_exact(name.as_ptr(), params, grid.as_ptr(), block.as_ptr()),
                Variant::Broken => {
                    scifact_emulate_broken(name.as_ptr(), params, grid.as_ptr(), block.as_ptr())
                }
            }
        };
        match status {
            0 => Ok(()),
            1 => Err(DeviceError::Failed(format!("the emulator has no kernel {}", kernel.name()))),
            2 => Err(DeviceError::Failed(format!(
                "{}: threads of one block reached different numbers of barriers",
                kernel.name()
            ))),
            _ => {
                Err(DeviceError::Failed(format!("{}: launch of {grid:?} x {block:?} refused", kernel.name())))
            }
        }
    }

    fn free_memory(&self) -> Result<usize, DeviceError> {
        if let Some(reported) = self.reported {
            return Ok(reported);
        }
        Ok(self.capacity.saturating_sub(self.used.load(Ordering::SeqCst)))
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Ok(allocations) = self.allocations.get_mut() {
            for (address, layout) in allocations.drain() {
                // SAFETY: each was allocated by `alloc` with its layout and not yet freed.
                unsafe { std::alloc::dealloc(address as *mut u8, layout) };
            }
        }
    }
}
