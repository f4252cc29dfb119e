//! `SCIFACT_AUDIT_SIMD` caps the first pass of the exact vector search. Its own test binary: the cap is read
//! once per process, so this process sets it before any search runs.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use semantic_memory::vector::FirstPass;
use semantic_memory::{SIMD_CAP_VAR, SimdCap};

#[test]
fn the_cap_chooses_the_first_pass_an_avx2_machine_runs() {
    // SAFETY: the only test of this binary sets the variable before anything reads the environment.
    unsafe { std::env::set_var(SIMD_CAP_VAR, "avx2") };
    assert_eq!(SimdCap::from_env(), Ok(Some(SimdCap::Avx2)));
    let available = FirstPass::available();
    let expected = if available.contains(&FirstPass::Avx2) { FirstPass::Avx2 } else { FirstPass::Portable };
    assert_eq!(FirstPass::chosen(), expected, "capped at avx2 on a CPU with {available:?}");
    // SAFETY: as above; the choice was made once and stays.
    unsafe { std::env::set_var(SIMD_CAP_VAR, "sse4") };
    assert_eq!(SimdCap::from_env(), Err("sse4".to_owned()));
    assert_eq!(FirstPass::chosen(), expected, "decided once per process");
}
