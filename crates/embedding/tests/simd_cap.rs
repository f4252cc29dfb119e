//! `SCIFACT_AUDIT_SIMD` caps the forward pass's kernels. Its own test binary, so that setting the variable
//! touches no other test.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use embedding::{Kernels, SIMD_CAP_VAR};

#[test]
fn the_cap_chooses_the_kernels_a_lesser_machine_runs() {
    let available = Kernels::available();
    // SAFETY: the only test of this binary sets the variable; nothing else in the process reads it concurrently.
    unsafe { std::env::set_var(SIMD_CAP_VAR, "avx2") };
    let expected = if available.contains(&Kernels::Avx2) { Kernels::Avx2 } else { Kernels::Scalar };
    assert_eq!(Kernels::best(), expected, "capped at avx2 on a CPU with {available:?}");
    // SAFETY: as above.
    unsafe { std::env::set_var(SIMD_CAP_VAR, "portable") };
    assert_eq!(Kernels::best(), Kernels::Scalar);
    // SAFETY: as above.
    unsafe { std::env::set_var(SIMD_CAP_VAR, "avx512") };
    assert_eq!(Kernels::best(), available[0]);
}
