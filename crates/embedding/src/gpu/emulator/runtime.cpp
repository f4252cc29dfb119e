// The launch emulator: a grid's blocks run on OS threads, each block's threads as fibers (ucontext) of one OS
// thread, switched at barriers. Every thread runs to its next barrier before any passes it, as on a GPU; a block
// whose threads reach different numbers of barriers is an error, never a silent result.
#include "runtime.h"

#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

namespace scifact_emulator {

thread_local const Place* place = nullptr;

namespace {

// A fiber's stack: the kernels keep a few hundred floats of locals.
constexpr std::size_t STACK_BYTES = 64 * 1024;

struct Fiber {
    ucontext_t context;
    Place place;
    bool done;
    long barriers;
};

struct Worker {
    ucontext_t scheduler;
    std::vector<Fiber> fibers;
    std::unique_ptr<char[]> stacks;
    Fiber* running = nullptr;
    Body body = nullptr;
    const void* params = nullptr;
};

thread_local Worker* worker = nullptr;

void entry() {
    Worker* w = worker;
    w->body(w->params);
    w->running->done = true;
}

// Runs one block to its end; false when its threads reached different numbers of barriers.
bool run_block(Worker& w, Dim block, Dim block_dim, Dim grid_dim) {
    const std::size_t threads = std::size_t(block_dim.x) * block_dim.y * block_dim.z;
    if (w.fibers.size() < threads) {
        w.fibers.resize(threads);
        w.stacks.reset(new char[threads * STACK_BYTES]);
    }
    for (std::size_t t = 0; t < threads; ++t) {
        Fiber& f = w.fibers[t];
        unsigned x = unsigned(t % block_dim.x);
        unsigned y = unsigned(t / block_dim.x % block_dim.y);
        unsigned z = unsigned(t / (std::size_t(block_dim.x) * block_dim.y));
        f.place = Place{Dim{x, y, z}, block, block_dim, grid_dim};
        f.done = false;
        f.barriers = 0;
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = w.stacks.get() + t * STACK_BYTES;
        f.context.uc_stack.ss_size = STACK_BYTES;
        f.context.uc_link = &w.scheduler;
        makecontext(&f.context, entry, 0);
    }
    for (;;) {
        bool pending = false;
        for (std::size_t t = 0; t < threads; ++t) {
            Fiber& f = w.fibers[t];
            if (f.done) continue;
            w.running = &f;
            place = &f.place;
            swapcontext(&w.scheduler, &f.context);
            if (!f.done) pending = true;
        }
        if (!pending) break;
    }
    place = nullptr;
    for (std::size_t t = 1; t < threads; ++t) {
        if (w.fibers[t].barriers != w.fibers[0].barriers) return false;
    }
    return true;
}

}  // namespace

void barrier() {
    Worker* w = worker;
    Fiber* f = w->running;
    f->barriers += 1;
    swapcontext(&f->context, &w->scheduler);
}

int launch(Body body, const void* params, const unsigned grid[3], const unsigned block[3]) {
    const Dim grid_dim{grid[0], grid[1], grid[2]};
    const Dim block_dim{block[0], block[1], block[2]};
    const std::size_t threads = std::size_t(block[0]) * block[1] * block[2];
    const std::size_t blocks = std::size_t(grid[0]) * grid[1] * grid[2];
    if (threads == 0 || threads > 1024 || blocks == 0) return STATUS_BAD_LAUNCH;
    unsigned width = std::max(1u, std::thread::hardware_concurrency());
    if (const char* cap = std::getenv("SCIFACT_AUDIT_EMULATOR_THREADS")) {
        width = std::max(1, std::atoi(cap));
    }
    width = unsigned(std::min<std::size_t>(width, blocks));
    std::atomic<std::size_t> next{0};
    std::atomic<bool> diverged{false};
    auto work = [&]() {
        Worker w;
        w.body = body;
        w.params = params;
        worker = &w;
        for (std::size_t b = next++; b < blocks; b = next++) {
            Dim at{unsigned(b % grid[0]), unsigned(b / grid[0] % grid[1]),
                   unsigned(b / (std::size_t(grid[0]) * grid[1]))};
            if (!run_block(w, at, block_dim, grid_dim)) diverged = true;
        }
        worker = nullptr;
    };
    if (width == 1) {
        work();
    } else {
        std::vector<std::thread> pool;
        for (unsigned i = 0; i < width; ++i) pool.emplace_back(work);
        for (std::thread& t : pool) t.join();
    }
    return diverged ? STATUS_BARRIER_DIVERGENCE : STATUS_OK;
}

}  // namespace scifact_emulator
