// What kernels.cu needs from CUDA, for host C++: the launch coordinates of the running thread, barriers, shared
// memory, and the rounding intrinsics as the host's IEEE operations (compiled with -ffp-contract=off, so that
// a * b + c is never fused and an fma is only ever std::fma).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace scifact_emulator {

struct Dim {
    unsigned x, y, z;
};

// Where the running (emulated) thread is.
struct Place {
    Dim thread, block, block_dim, grid_dim;
};

// The running fiber's place: set by the scheduler before it switches to a fiber.
extern thread_local const Place* place;

// Waits until every thread of the block has reached the same barrier.
void barrier();

}  // namespace scifact_emulator

typedef std::uint32_t u32;
typedef std::int64_t i64;

struct alignas(16) float4 {
    float x, y, z, w;
};

#define threadIdx (scifact_emulator::place->thread)
#define blockIdx (scifact_emulator::place->block)
#define blockDim (scifact_emulator::place->block_dim)
#define gridDim (scifact_emulator::place->grid_dim)
#define __syncthreads() scifact_emulator::barrier()
// One block runs at a time on an OS thread, its threads as fibers of that thread: a function's static
// thread-local array is the block's shared memory.
#define __shared__ static thread_local
#define __align__(n) __attribute__((aligned(n)))
#define SCIFACT_DEVICE static inline
#define SCIFACT_KERNEL static
#define SCIFACT_BOUNDS(threads, blocks)

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline float __double2float_rn(double a) { return static_cast<float>(a); }
inline u32 __float_as_uint(float f) {
    u32 u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
inline float __uint_as_float(u32 u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
