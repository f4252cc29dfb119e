//! Compiles the GPU kernels (src/gpu/kernels.cu) as host C++ under the launch emulator (src/gpu/emulator/), so
//! that the kernels themselves run, and are held to the CPU path bit for bit, on machines without a GPU: as they
//! are (`scifact_emulate_exact`), and with their products' k order reversed (`scifact_emulate_broken`), for the
//! test that shows such a kernel fails.
//!
//! -ffp-contract=off: a * b + c is never fused, so the only fused multiply-adds are the kernels' own __fmaf_rn.

fn main() {
    let dir = "src/gpu/emulator";
    for source in ["src/gpu/kernels.cu"].into_iter().map(str::to_owned).chain(
        ["prelude.h", "runtime.h", "runtime.cpp", "kernels.cpp", "exact.cpp", "broken.cpp"]
            .map(|f| format!("{dir}/{f}")),
    ) {
        println!("cargo::rerun-if-changed={source}");
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        .flag("-ffp-contract=off")
        .flag("-fno-fast-math")
        .flag("-fno-strict-aliasing")
        .warnings(true)
        .files(["runtime.cpp", "exact.cpp", "broken.cpp"].map(|f| format!("{dir}/{f}")))
        .compile("scifact_emulator");
}
