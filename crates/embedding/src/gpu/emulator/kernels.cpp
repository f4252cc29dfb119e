// kernels.cu compiled as host C++ for the launch emulator, and its table of kernels by name. Included twice, by
// exact.cpp (`scifact_emulate_exact`) and broken.cpp (`scifact_emulate_broken`, with SCIFACT_BREAK_ORDER: the
// products take k backwards), each in its own namespace.
#include <cstring>

#include "runtime.h"

namespace SCIFACT_VARIANT {
#include "../kernels.cu"

template <class F>
struct Argument;
template <class A>
struct Argument<void (*)(A)> {
    typedef A type;
};

template <class A, void (*K)(A)>
void trampoline(const void* params) {
    K(*static_cast<const A*>(params));
}

#define ENTRY(name) {#name, &trampoline<Argument<decltype(&name)>::type, &name>}

struct Entry {
    const char* name;
    scifact_emulator::Body body;
};

const Entry TABLE[] = {
    ENTRY(embed_tokens), ENTRY(layer_norm), ENTRY(gemm_wide), ENTRY(gemm_wide2), ENTRY(gemm_scores), ENTRY(gemm_context),
    ENTRY(softmax_rows), ENTRY(pool),       ENTRY(normalize), ENTRY(probe_ops),
};

static_assert(sizeof(EmbedArgs) == 64 && sizeof(NormArgs) == 48 && sizeof(Problem) == 48 &&
                  sizeof(GemmArgs) == 48 && sizeof(Attention) == 24 && sizeof(SoftmaxArgs) == 32 &&
                  sizeof(Sequence) == 16 && sizeof(PoolArgs) == 40 && sizeof(NormalizeArgs) == 24 &&
                  sizeof(ProbeArgs) == 40,
              "the argument structs' layout, which the Rust side mirrors (gpu/forward.rs)");

}  // namespace SCIFACT_VARIANT

extern "C" int SCIFACT_ENTRY(const char* name, const void* params, const unsigned grid[3],
                             const unsigned block[3]) {
    for (const SCIFACT_VARIANT::Entry& entry : SCIFACT_VARIANT::TABLE) {
        if (std::strcmp(entry.name, name) == 0) return scifact_emulator::launch(entry.body, params, grid, block);
    }
    return scifact_emulator::STATUS_UNKNOWN_KERNEL;
}
