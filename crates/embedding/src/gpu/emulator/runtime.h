// The launch emulator's entry, shared by the kernel tables (kernels.cpp) and the runtime (runtime.cpp).
#pragma once

#include "prelude.h"

namespace scifact_emulator {

// A kernel's body: called once per (emulated) thread with a pointer to its argument struct.
typedef void (*Body)(const void* params);

enum Status { STATUS_OK = 0, STATUS_UNKNOWN_KERNEL = 1, STATUS_BARRIER_DIVERGENCE = 2, STATUS_BAD_LAUNCH = 3 };

// Runs `body` over a grid of `grid` blocks of `block` threads; returns a Status.
int launch(Body body, const void* params, const unsigned grid[3], const unsigned block[3]);

}  // namespace scifact_emulator
