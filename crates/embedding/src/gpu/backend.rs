//! What the GPU forward pass asks of a device: memory, copies and kernel launches by name. Two implement it: the
//! CUDA driver (`cuda`) and the launch emulator (`emulator`), which runs the same kernel source on the CPU. The
//! forward pass (`forward`) is written once over this trait, so the emulator's tests cover it whole.

use std::sync::Arc;

/// Why a device operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeviceError {
    /// An allocation the device could not make: the forward pass retries with a smaller batch.
    OutOfMemory { bytes: usize },
    /// Anything else, said in words (the driver's or NVRTC's own message included).
    Failed(String),
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceError::OutOfMemory { bytes } => {
                write!(f, "out of GPU memory allocating {}", crate::gpu::human_bytes(*bytes as u64))
            }
            DeviceError::Failed(reason) => f.write_str(reason),
        }
    }
}

/// The kernels of `kernels.cu`, by the name each is compiled under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    EmbedTokens,
    LayerNorm,
    GemmWide,
    GemmWide2,
    GemmScores,
    GemmContext,
    SoftmaxRows,
    Pool,
    Normalize,
    ProbeOps,
}

impl Kernel {
    /// Every kernel, in the order the CUDA module looks them up.
    pub(crate) const ALL: [Kernel; 10] = [
        Kernel::EmbedTokens,
        Kernel::LayerNorm,
        Kernel::GemmWide,
        Kernel::GemmWide2,
        Kernel::GemmScores,
        Kernel::GemmContext,
        Kernel::SoftmaxRows,
        Kernel::Pool,
        Kernel::Normalize,
        Kernel::ProbeOps,
    ];

    /// The kernel's name in the source.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kernel::EmbedTokens => "embed_tokens",
            Kernel::LayerNorm => "layer_norm",
            Kernel::GemmWide => "gemm_wide",
            Kernel::GemmWide2 => "gemm_wide2",
            Kernel::GemmScores => "gemm_scores",
            Kernel::GemmContext => "gemm_context",
            Kernel::SoftmaxRows => "softmax_rows",
            Kernel::Pool => "pool",
            Kernel::Normalize => "normalize",
            Kernel::ProbeOps => "probe_ops",
        }
    }

    /// The size of its argument struct in bytes (kernels.cu; the emulator's table asserts the same sizes).
    pub(crate) fn argument_bytes(self) -> usize {
        match self {
            Kernel::EmbedTokens => 64,
            Kernel::LayerNorm
            | Kernel::GemmWide
            | Kernel::GemmWide2
            | Kernel::GemmScores
            | Kernel::GemmContext => 48,
            Kernel::SoftmaxRows => 32,
            Kernel::Pool | Kernel::ProbeOps => 40,
            Kernel::Normalize => 24,
        }
    }
}

/// A device: memory by address, copies, and launches of `kernels.cu`'s kernels with one argument struct each.
pub(crate) trait Backend: Send + Sync {
    /// Allocates `bytes` (at least one), aligned to 256 bytes; its device address.
    fn alloc(&self, bytes: usize) -> Result<u64, DeviceError>;
    /// Frees an address `alloc` returned.
    fn free(&self, address: u64);
    /// Copies `source` to `address` (inside an allocation of at least its length: [`Buffer`] checks).
    fn upload(&self, address: u64, source: &[u8]) -> Result<(), DeviceError>;
    /// Copies `target.len()` bytes from `address` (likewise).
    fn download(&self, address: u64, target: &mut [u8]) -> Result<(), DeviceError>;
    /// Runs `kernel` over `grid` blocks of `block` threads with `arguments` (its struct's bytes), and waits for it.
    fn launch(
        &self,
        kernel: Kernel,
        grid: [u32; 3],
        block: [u32; 3],
        arguments: &[u8],
    ) -> Result<(), DeviceError>;
    /// The device memory free now, in bytes.
    fn free_memory(&self) -> Result<usize, DeviceError>;
}

/// Device memory that frees itself.
pub(crate) struct Buffer {
    backend: Arc<dyn Backend>,
    address: u64,
    bytes: usize,
}

impl Buffer {
    /// `bytes` of device memory (contents undefined).
    pub(crate) fn new(backend: &Arc<dyn Backend>, bytes: usize) -> Result<Buffer, DeviceError> {
        let address = backend.alloc(bytes.max(1))?;
        Ok(Buffer { backend: Arc::clone(backend), address, bytes })
    }

    /// A buffer holding `values`.
    pub(crate) fn with_f32(backend: &Arc<dyn Backend>, values: &[f32]) -> Result<Buffer, DeviceError> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Buffer::with_bytes(backend, &bytes)
    }

    /// A buffer holding `values`.
    pub(crate) fn with_u32(backend: &Arc<dyn Backend>, values: &[u32]) -> Result<Buffer, DeviceError> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Buffer::with_bytes(backend, &bytes)
    }

    /// A buffer holding `bytes`.
    pub(crate) fn with_bytes(backend: &Arc<dyn Backend>, bytes: &[u8]) -> Result<Buffer, DeviceError> {
        let buffer = Buffer::new(backend, bytes.len())?;
        buffer.backend.upload(buffer.address, bytes)?;
        Ok(buffer)
    }

    /// The device address of the start.
    pub(crate) fn address(&self) -> u64 {
        self.address
    }

    /// The first `count` f32 values.
    pub(crate) fn read_f32(&self, count: usize) -> Result<Vec<f32>, DeviceError> {
        if 4 * count > self.bytes {
            return Err(DeviceError::Failed(format!(
                "read of {count} floats from a buffer of {} bytes",
                self.bytes
            )));
        }
        let mut bytes = vec![0u8; 4 * count];
        self.backend.download(self.address, &mut bytes)?;
        Ok(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.backend.free(self.address);
    }
}

/// A kernel's argument struct (or a table's row) as bytes, written field by field in kernels.cu's order. Every
/// struct there is laid out without padding (8-byte fields first, then 4-byte ones, whole multiples of 8), so
/// its fields' little-endian bytes in order are its memory.
#[derive(Default)]
pub(crate) struct Fields(Vec<u8>);

impl Fields {
    pub(crate) fn new() -> Fields {
        Fields::default()
    }

    /// A pointer field (null: 0).
    pub(crate) fn pointer(mut self, address: u64) -> Fields {
        self.0.extend(address.to_le_bytes());
        self
    }

    pub(crate) fn i64(mut self, value: i64) -> Fields {
        self.0.extend(value.to_le_bytes());
        self
    }

    pub(crate) fn i32(mut self, value: i32) -> Fields {
        self.0.extend(value.to_le_bytes());
        self
    }

    pub(crate) fn f32(mut self, value: f32) -> Fields {
        self.0.extend(value.to_le_bytes());
        self
    }

    pub(crate) fn bytes(self) -> Vec<u8> {
        self.0
    }
}
