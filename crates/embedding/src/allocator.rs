//! A process-wide allocator setting that makes CPU inference markedly faster on glibc.
//!
//! Each layer of the model allocates and frees buffers of tens of MB. glibc serves those with `mmap` and
//! returns them with `munmap`, so every page faults in again on the next call: measured here, 28 s of system
//! time in a 67 s run. Keeping freed memory in the heap removes that. Binaries opt in; libraries never call it.

/// Tells glibc's malloc to serve large blocks from the heap and never trim it. Returns true if and only if the
/// settings were applied (glibc on Linux); elsewhere it does nothing.
pub fn keep_freed_memory_for_reuse() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const M_TRIM_THRESHOLD: i32 = -1;
        const M_MMAP_THRESHOLD: i32 = -3;
        unsafe extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        // SAFETY: mallopt only changes malloc tuning parameters; any value is accepted or rejected by glibc.
        unsafe {
            // 1 GiB: larger than any tensor of this model, so every buffer comes from the reusable heap.
            mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1 && mallopt(M_TRIM_THRESHOLD, i32::MAX) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Gives the heap's free pages back to the operating system (glibc's `malloc_trim`), for a binary that kept
/// freed memory for reuse and is done with the work that reused it: a later stage's peak then does not sit on
/// top of an earlier one's. Returns true if and only if memory was released; elsewhere it does nothing.
pub fn return_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only releases free memory at the heaps' ends and in their free pages.
        unsafe { malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
