//! An NVIDIA GPU as a [`Backend`], through the CUDA driver API and NVRTC, both loaded at run time: a binary built
//! on a machine without CUDA runs everywhere, and where the libraries or a GPU are missing the answer is an error
//! naming what is missing, never a panic.
//!
//! Only symbols the driver has exported under these names for many releases are used (the `_v2` ones are the
//! real names of cuMemAlloc and its kin), and the device's primary context, so no versioned context API. The
//! kernels are compiled by NVRTC for the device's own architecture (a cubin) with contraction, fast math and
//! flush-to-zero off; where this NVRTC does not know the architecture, to PTX for the newest it knows, which the
//! driver compiles (PTX's `.rn` operations are never contracted).

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::path::PathBuf;

use libloading::Library;

use super::backend::{Backend, DeviceError, Kernel};

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;
type CuModule = *mut c_void;
type CuFunction = *mut c_void;
type CuStream = *mut c_void;
type NvrtcResult = c_int;
type NvrtcProgram = *mut c_void;

const CUDA_SUCCESS: CuResult = 0;
const CUDA_ERROR_OUT_OF_MEMORY: CuResult = 2;
const ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;

/// The NVRTC options: IEEE rounding everywhere, nothing fused that the source does not fuse.
pub(crate) const NVRTC_OPTIONS: [&str; 5] =
    ["--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false", "--std=c++17"];

/// The variable naming the NVRTC library to load (a path), when it is not on the loader's path.
pub const NVRTC_VAR: &str = "SCIFACT_AUDIT_NVRTC";

/// What the source is compiled with before kernels.cu: the types and markers it uses.
const CUDA_PRELUDE: &str = "typedef unsigned int u32;\n\
typedef long long i64;\n\
#define SCIFACT_DEVICE static __device__ __forceinline__\n\
#define SCIFACT_KERNEL extern \"C\" __global__\n\
#define SCIFACT_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)\n";

/// kernels.cu as NVRTC compiles it.
pub(crate) fn source() -> String {
    format!("{CUDA_PRELUDE}{}", super::KERNELS_SOURCE)
}

macro_rules! symbols {
    ($name:ident { $($field:ident : fn($($arg:ty),*) -> $ret:ty = $symbol:literal;)* }) => {
        #[allow(non_snake_case)]
        struct $name {
            $($field: unsafe extern "C" fn($($arg),*) -> $ret,)*
            _library: Library,
        }

        impl $name {
            /// # Safety
            /// `library` must be the library whose C functions have these signatures.
            unsafe fn load(library: Library, path: &str) -> Result<Self, String> {
                Ok($name {
                    $($field: *unsafe { library.get::<unsafe extern "C" fn($($arg),*) -> $ret>($symbol) }
                        .map_err(|e| format!("{path} has no {}: {e}", $symbol))?,)*
                    _library: library,
                })
            }
        }
    };
}

symbols!(Driver {
    init: fn(c_uint) -> CuResult = "cuInit";
    driver_version: fn(*mut c_int) -> CuResult = "cuDriverGetVersion";
    device_count: fn(*mut c_int) -> CuResult = "cuDeviceGetCount";
    device_get: fn(*mut CuDevice, c_int) -> CuResult = "cuDeviceGet";
    device_name: fn(*mut c_char, c_int, CuDevice) -> CuResult = "cuDeviceGetName";
    device_attribute: fn(*mut c_int, c_int, CuDevice) -> CuResult = "cuDeviceGetAttribute";
    primary_retain: fn(*mut CuContext, CuDevice) -> CuResult = "cuDevicePrimaryCtxRetain";
    set_current: fn(CuContext) -> CuResult = "cuCtxSetCurrent";
    synchronize: fn() -> CuResult = "cuCtxSynchronize";
    module_load: fn(*mut CuModule, *const c_void) -> CuResult = "cuModuleLoadData";
    module_function: fn(*mut CuFunction, CuModule, *const c_char) -> CuResult = "cuModuleGetFunction";
    launch_kernel: fn(CuFunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CuStream,
        *mut *mut c_void, *mut *mut c_void) -> CuResult = "cuLaunchKernel";
    mem_alloc: fn(*mut u64, usize) -> CuResult = "cuMemAlloc_v2";
    mem_free: fn(u64) -> CuResult = "cuMemFree_v2";
    copy_to_device: fn(u64, *const c_void, usize) -> CuResult = "cuMemcpyHtoD_v2";
    copy_to_host: fn(*mut c_void, u64, usize) -> CuResult = "cuMemcpyDtoH_v2";
    mem_info: fn(*mut usize, *mut usize) -> CuResult = "cuMemGetInfo_v2";
    error_name: fn(CuResult, *mut *const c_char) -> CuResult = "cuGetErrorName";
});

symbols!(Nvrtc {
    version: fn(*mut c_int, *mut c_int) -> NvrtcResult = "nvrtcVersion";
    create: fn(*mut NvrtcProgram, *const c_char, *const c_char, c_int, *const *const c_char,
        *const *const c_char) -> NvrtcResult = "nvrtcCreateProgram";
    compile: fn(NvrtcProgram, c_int, *const *const c_char) -> NvrtcResult = "nvrtcCompileProgram";
    log_size: fn(NvrtcProgram, *mut usize) -> NvrtcResult = "nvrtcGetProgramLogSize";
    log: fn(NvrtcProgram, *mut c_char) -> NvrtcResult = "nvrtcGetProgramLog";
    cubin_size: fn(NvrtcProgram, *mut usize) -> NvrtcResult = "nvrtcGetCUBINSize";
    cubin: fn(NvrtcProgram, *mut c_char) -> NvrtcResult = "nvrtcGetCUBIN";
    ptx_size: fn(NvrtcProgram, *mut usize) -> NvrtcResult = "nvrtcGetPTXSize";
    ptx: fn(NvrtcProgram, *mut c_char) -> NvrtcResult = "nvrtcGetPTX";
    destroy: fn(*mut NvrtcProgram) -> NvrtcResult = "nvrtcDestroyProgram";
    error_string: fn(NvrtcResult) -> *const c_char = "nvrtcGetErrorString";
});

/// Opens the first library of `candidates` that loads.
fn open_first(candidates: &[String]) -> Result<(Library, String), String> {
    let mut tried = Vec::new();
    for candidate in candidates {
        // SAFETY: loading a CUDA library runs its initialisers, which have no preconditions of ours.
        match unsafe { Library::new(candidate.as_str()) } {
            Ok(library) => return Ok((library, candidate.clone())),
            Err(error) => {
                let detail =
                    std::error::Error::source(&error).map_or_else(|| error.to_string(), ToString::to_string);
                tried.push(format!("{candidate} ({detail})"));
            }
        }
    }
    Err(tried.join("; "))
}

/// The NVRTC library names tried, in order: `SCIFACT_AUDIT_NVRTC`, then the loader's path, then the usual
/// toolkit directories.
fn nvrtc_candidates() -> Vec<String> {
    let mut names = Vec::new();
    if let Some(path) = std::env::var_os(NVRTC_VAR).filter(|v| !v.is_empty()) {
        names.push(PathBuf::from(path).display().to_string());
    }
    let sonames = ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"];
    names.extend(sonames.iter().map(|s| (*s).to_owned()));
    let mut roots: Vec<PathBuf> =
        ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(std::env::var_os).map(PathBuf::from).collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    for root in roots {
        for soname in sonames {
            names.push(root.join("lib64").join(soname).display().to_string());
        }
    }
    names
}

/// NVRTC, loaded.
pub(crate) struct Compiler {
    nvrtc: Nvrtc,
}

/// What NVRTC made of the kernels.
pub(crate) struct Compiled {
    /// A cubin for the architecture asked for, or PTX (NUL-terminated) for the driver to compile.
    pub(crate) image: Vec<u8>,
    /// Whether `image` is PTX.
    pub(crate) is_ptx: bool,
    /// The option naming the architecture it was compiled for.
    pub(crate) architecture: String,
}

impl Compiler {
    /// Loads NVRTC.
    ///
    /// # Errors
    /// Which libraries were tried and why none loaded.
    pub(crate) fn load() -> Result<Compiler, String> {
        let (library, path) = open_first(&nvrtc_candidates())
            .map_err(|tried| format!("no NVRTC library (the CUDA runtime compiler) could be loaded: tried {tried}; set {NVRTC_VAR} to its path"))?;
        // SAFETY: a library that loads under these names is NVRTC, whose functions have these signatures.
        let nvrtc = unsafe { Nvrtc::load(library, &path)? };
        Ok(Compiler { nvrtc })
    }

    /// NVRTC's version.
    pub(crate) fn describe(&self) -> String {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two valid out-pointers.
        unsafe { (self.nvrtc.version)(&mut major, &mut minor) };
        format!("NVRTC {major}.{minor}")
    }

    fn check(&self, result: NvrtcResult, what: &str) -> Result<(), String> {
        if result == 0 {
            return Ok(());
        }
        // SAFETY: nvrtcGetErrorString returns a static string for any code.
        let text =
            unsafe { CStr::from_ptr((self.nvrtc.error_string)(result)) }.to_string_lossy().into_owned();
        Err(format!("{what}: {text}"))
    }

    /// Compiles `source` with [`NVRTC_OPTIONS`] for `sm_<major><minor>`, as a cubin, or as PTX when `ptx`.
    ///
    /// # Errors
    /// NVRTC's message and log.
    pub(crate) fn compile(
        &self,
        source: &str,
        major: i32,
        minor: i32,
        ptx: bool,
    ) -> Result<Compiled, String> {
        self.compile_with(source, (major, minor), ptx, &NVRTC_OPTIONS)
    }

    /// [`Compiler::compile`] with other options than [`NVRTC_OPTIONS`]: for the test that shows the source
    /// leaves the compiler nothing to contract (`--fmad=true` must give the same PTX).
    pub(crate) fn compile_with(
        &self,
        source: &str,
        (major, minor): (i32, i32),
        ptx: bool,
        options: &[&str],
    ) -> Result<Compiled, String> {
        let architecture =
            format!("--gpu-architecture={}_{major}{minor}", if ptx { "compute" } else { "sm" });
        let source = CString::new(source).map_err(|e| e.to_string())?;
        let name = c"kernels.cu";
        let mut program: NvrtcProgram = std::ptr::null_mut();
        // SAFETY: valid out-pointer, NUL-terminated source and name, no headers.
        let created = unsafe {
            (self.nvrtc.create)(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        self.check(created, "nvrtcCreateProgram")?;
        let result = self.compile_program(program, &architecture, ptx, options);
        // SAFETY: `program` was created above and is destroyed once.
        unsafe { (self.nvrtc.destroy)(&mut program) };
        result.map(|(image, is_ptx)| Compiled { image, is_ptx, architecture })
    }

    fn compile_program(
        &self,
        program: NvrtcProgram,
        architecture: &str,
        ptx: bool,
        options: &[&str],
    ) -> Result<(Vec<u8>, bool), String> {
        let options: Vec<CString> = std::iter::once(architecture)
            .chain(options.iter().copied())
            .map(|o| CString::new(o).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        // SAFETY: `program` is live; `pointers` holds `options.len()` NUL-terminated strings that outlive the call.
        let compiled = unsafe { (self.nvrtc.compile)(program, pointers.len() as c_int, pointers.as_ptr()) };
        if compiled != 0 {
            let log = self.log(program);
            self.check(compiled, &format!("NVRTC could not compile the kernels ({architecture})"))
                .map_err(|e| format!("{e}\n{log}"))?;
        }
        let (size_of, get) = if ptx {
            (self.nvrtc.ptx_size, self.nvrtc.ptx)
        } else {
            (self.nvrtc.cubin_size, self.nvrtc.cubin)
        };
        let mut size = 0usize;
        // SAFETY: `program` is compiled; valid out-pointer.
        self.check(unsafe { size_of(program, &mut size) }, "reading the compiled size")?;
        let mut image = vec![0u8; size];
        // SAFETY: `image` holds the `size` bytes NVRTC reported.
        self.check(unsafe { get(program, image.as_mut_ptr().cast()) }, "reading the compiled kernels")?;
        Ok((image, ptx))
    }

    fn log(&self, program: NvrtcProgram) -> String {
        let mut size = 0usize;
        // SAFETY: valid program and out-pointer.
        if unsafe { (self.nvrtc.log_size)(program, &mut size) } != 0 || size == 0 {
            return String::new();
        }
        let mut log = vec![0u8; size];
        // SAFETY: `log` holds the `size` bytes NVRTC reported.
        unsafe { (self.nvrtc.log)(program, log.as_mut_ptr().cast()) };
        String::from_utf8_lossy(&log).trim_end_matches('\0').trim().to_owned()
    }
}

/// A CUDA device with the kernels loaded.
pub(crate) struct Cuda {
    driver: Driver,
    context: CuContext,
    functions: Vec<(Kernel, CuFunction)>,
    description: String,
}

// SAFETY: the driver API is thread-safe; every call first makes the primary context current on its thread, and
// the functions and context are handles the driver owns.
unsafe impl Send for Cuda {}
// SAFETY: as above.
unsafe impl Sync for Cuda {}

impl Cuda {
    /// Loads the driver, takes GPU 0's primary context and compiles the kernels for it.
    ///
    /// # Errors
    /// What is missing, in words: no driver, no GPU, no NVRTC, or a compilation that failed.
    pub(crate) fn open() -> Result<Cuda, String> {
        // The loader's path first; then where NVIDIA's container toolkit and Debian put the driver, for a process
        // whose loader path leaves them out.
        let candidates = [
            "libcuda.so.1",
            "libcuda.so",
            "/usr/local/nvidia/lib64/libcuda.so.1",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "/usr/lib64/libcuda.so.1",
        ];
        let (library, path) = open_first(&candidates.map(str::to_owned))
            .map_err(|tried| format!("no NVIDIA driver: {tried}"))?;
        // SAFETY: libcuda's functions have these signatures.
        let driver = unsafe { Driver::load(library, &path)? };
        let check = |result: CuResult, what: &str| -> Result<(), String> {
            if result == CUDA_SUCCESS {
                Ok(())
            } else {
                Err(format!("{what}: {}", error_name(&driver, result)))
            }
        };
        // SAFETY: every call below passes valid out-pointers and handles the driver returned.
        unsafe {
            check((driver.init)(0), "the NVIDIA driver did not start (cuInit)")?;
            let mut count = 0;
            check((driver.device_count)(&mut count), "cuDeviceGetCount")?;
            if count == 0 {
                return Err("the NVIDIA driver sees no GPU".into());
            }
            let mut device: CuDevice = 0;
            check((driver.device_get)(&mut device, 0), "cuDeviceGet")?;
            let mut name = [0 as c_char; 256];
            check((driver.device_name)(name.as_mut_ptr(), name.len() as c_int, device), "cuDeviceGetName")?;
            let name = CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
            let (mut major, mut minor) = (0, 0);
            check(
                (driver.device_attribute)(&mut major, ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
                "compute capability",
            )?;
            check(
                (driver.device_attribute)(&mut minor, ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
                "compute capability",
            )?;
            let mut version = 0;
            check((driver.driver_version)(&mut version), "cuDriverGetVersion")?;
            let mut context: CuContext = std::ptr::null_mut();
            check((driver.primary_retain)(&mut context, device), "cuDevicePrimaryCtxRetain")?;
            check((driver.set_current)(context), "cuCtxSetCurrent")?;

            let compiler = Compiler::load()?;
            let source = source();
            let compiled = match compiler.compile(&source, major, minor, false) {
                Ok(compiled) => compiled,
                // An NVRTC older than the GPU: PTX for the newest architecture it surely knows (Hopper), which the
                // driver compiles for this one.
                Err(cubin_error) => compiler
                    .compile(&source, major.min(9), if major > 9 { 0 } else { minor }, true)
                    .map_err(|ptx_error| format!("{cubin_error}\nand as PTX: {ptx_error}"))?,
            };
            let mut module: CuModule = std::ptr::null_mut();
            check(
                (driver.module_load)(&mut module, compiled.image.as_ptr().cast()),
                "loading the compiled kernels",
            )?;
            let mut functions = Vec::new();
            for kernel in Kernel::ALL {
                let symbol = CString::new(kernel.name()).map_err(|e| e.to_string())?;
                let mut function: CuFunction = std::ptr::null_mut();
                check((driver.module_function)(&mut function, module, symbol.as_ptr()), kernel.name())?;
                functions.push((kernel, function));
            }
            let description = format!(
                "{name} (sm_{major}{minor}, driver {}.{}, {}{})",
                version / 1000,
                version % 1000 / 10,
                compiler.describe(),
                if compiled.is_ptx {
                    format!(
                        ", kernels as PTX for {}",
                        compiled.architecture.trim_start_matches("--gpu-architecture=")
                    )
                } else {
                    String::new()
                },
            );
            Ok(Cuda { driver, context, functions, description })
        }
    }

    /// The GPU, its architecture, the driver and the compiler.
    pub(crate) fn describe(&self) -> &str {
        &self.description
    }

    fn current(&self) -> Result<(), DeviceError> {
        // SAFETY: the context was retained in `open` and is never released while `self` lives.
        self.call(unsafe { (self.driver.set_current)(self.context) }, "cuCtxSetCurrent")
    }

    fn call(&self, result: CuResult, what: &str) -> Result<(), DeviceError> {
        match result {
            CUDA_SUCCESS => Ok(()),
            _ => Err(DeviceError::Failed(format!("{what}: {}", error_name(&self.driver, result)))),
        }
    }
}

fn error_name(driver: &Driver, result: CuResult) -> String {
    let mut name: *const c_char = std::ptr::null();
    // SAFETY: valid out-pointer; the driver returns a static string or leaves it null.
    unsafe {
        if (driver.error_name)(result, &mut name) == CUDA_SUCCESS && !name.is_null() {
            return format!("{} ({result})", CStr::from_ptr(name).to_string_lossy());
        }
    }
    format!("CUDA error {result}")
}

impl Backend for Cuda {
    fn alloc(&self, bytes: usize) -> Result<u64, DeviceError> {
        self.current()?;
        let mut address = 0u64;
        // SAFETY: valid out-pointer; the context is current.
        match unsafe { (self.driver.mem_alloc)(&mut address, bytes.max(1)) } {
            CUDA_SUCCESS => Ok(address),
            CUDA_ERROR_OUT_OF_MEMORY => Err(DeviceError::OutOfMemory { bytes }),
            other => Err(DeviceError::Failed(format!("cuMemAlloc: {}", error_name(&self.driver, other)))),
        }
    }

    fn free(&self, address: u64) {
        if self.current().is_ok() {
            // SAFETY: `address` came from `alloc` and is freed once (Buffer's drop).
            unsafe { (self.driver.mem_free)(address) };
        }
    }

    fn upload(&self, address: u64, source: &[u8]) -> Result<(), DeviceError> {
        self.current()?;
        // SAFETY: `address` is an allocation of at least `source.len()` bytes (Buffer's contract).
        self.call(
            unsafe { (self.driver.copy_to_device)(address, source.as_ptr().cast(), source.len()) },
            "cuMemcpyHtoD",
        )
    }

    fn download(&self, address: u64, target: &mut [u8]) -> Result<(), DeviceError> {
        self.current()?;
        // SAFETY: as in `upload`.
        self.call(
            unsafe { (self.driver.copy_to_host)(target.as_mut_ptr().cast(), address, target.len()) },
            "cuMemcpyDtoH",
        )
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
                "{} takes {} bytes of arguments",
                kernel.name(),
                kernel.argument_bytes()
            )));
        }
        self.current()?;
        let function = self
            .functions
            .iter()
            .find(|(k, _)| *k == kernel)
            .map(|(_, f)| *f)
            .ok_or_else(|| DeviceError::Failed(format!("no kernel {}", kernel.name())))?;
        let mut aligned = vec![0u64; arguments.len().div_ceil(8)];
        // SAFETY: `aligned` holds at least `arguments.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                arguments.as_ptr(),
                aligned.as_mut_ptr().cast::<u8>(),
                arguments.len(),
            )
        };
        let mut parameters = [aligned.as_mut_ptr().cast::<c_void>()];
        // SAFETY: the function takes one struct of this size, which `parameters[0]` points to; the launch
        // completes (synchronize) before `aligned` is dropped.
        unsafe {
            self.call(
                (self.driver.launch_kernel)(
                    function,
                    grid[0],
                    grid[1],
                    grid[2],
                    block[0],
                    block[1],
                    block[2],
                    0,
                    std::ptr::null_mut(),
                    parameters.as_mut_ptr(),
                    std::ptr::null_mut(),
                ),
                kernel.name(),
            )?;
            self.call((self.driver.synchronize)(), kernel.name())
        }
    }

    fn free_memory(&self) -> Result<usize, DeviceError> {
        self.current()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers.
        self.call(unsafe { (self.driver.mem_info)(&mut free, &mut total) }, "cuMemGetInfo")?;
        Ok(free)
    }
}
