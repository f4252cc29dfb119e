//! `--device`: where the model runs never changes a bit. The GPU kernels run here under the launch emulator
//! (`--device emulated`, the same kernel source and forward pass a CUDA GPU runs): a tiny evaluation made on it is
//! the expected bundle, fixture and store bytes included, and verifies on the CPU; the expected bundle, made on
//! the CPU, verifies on it; shards built on it and on the CPU merge into the unsharded fixture; a build it started
//! and was killed in resumes on the CPU. Without a GPU, `--device cuda` says what is missing.

use std::path::Path;

use serde_json::Value;

use crate::crash::{Outcome, run_until};
use crate::tiny::{assert_identical_to_expected, only_bundle, root, tiny_eval_args};
use crate::{keys, path_str, scifact_audit};

#[test]
fn the_device_command_names_the_device_or_what_is_missing() {
    let found = scifact_audit(&["device", "--json"], "");
    assert!(found.status.success(), "{}", String::from_utf8_lossy(&found.stderr));
    let found: Value = serde_json::from_slice(&found.stdout).unwrap();
    let cuda = scifact_audit(&["device", "--device", "cuda"], "");
    let stderr = String::from_utf8_lossy(&cuda.stderr);
    if found["device"] == "cuda" {
        assert!(cuda.status.success(), "{stderr}");
    } else {
        assert_eq!(found["device"], "cpu");
        assert!(found["no_gpu"].as_str().is_some_and(|why| !why.is_empty()), "{found}");
        assert_eq!(cuda.status.code(), Some(2), "{stderr}");
        assert!(
            ["no NVIDIA driver", "sees no GPU", "did not start", "NVRTC"]
                .iter()
                .any(|what| stderr.contains(what)),
            "{stderr}"
        );
    }
    let checked = scifact_audit(&["device", "--device", "emulated", "--check"], "");
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "{stdout}{}", String::from_utf8_lossy(&checked.stderr));
    assert!(stdout.contains("every result the CPU's bits"), "{stdout}");
    for kernel in
        ["embed_tokens", "layer_norm", "softmax_rows", "pool", "normalize", "gemm_scores", "gemm_context"]
    {
        assert!(stdout.contains(kernel), "{kernel} not checked: {stdout}");
    }
    assert!(stdout.ends_with("the kernels give the CPU's bits\n"), "{stdout}");
}

/// `auto` takes a GPU only once it passes the self-check: with the launch emulator standing in for the GPU
/// `auto` finds, the exact kernels are taken, and the ones whose products take k in reverse are refused, the
/// CPU used and the reason said, by `device` and by `embed` (whose vectors are then the CPU's).
#[test]
fn auto_uses_a_gpu_only_after_its_self_check_and_says_why_not() {
    let stand_in = embedding::gpu::AUTO_STAND_IN_VAR;
    let passes = crate::scifact_audit_with(&["device", "--json"], "", &[(stand_in, "emulated")]);
    let passes: Value = serde_json::from_slice(&passes.stdout).unwrap();
    assert_eq!(passes["device"], "emulated", "{passes}");
    assert_eq!(passes["no_gpu"], Value::Null, "{passes}");

    let refused = crate::scifact_audit_with(&["device", "--json"], "", &[(stand_in, "emulated-broken")]);
    let refused: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(refused["device"], "cpu", "{refused}");
    let why = refused["no_gpu"].as_str().unwrap_or_default();
    assert!(why.contains("failed its self-check against the CPU") && why.contains("gemm_wide"), "{why}");

    let model = root().join("fixtures/tiny/model");
    let embed = ["embed", "--model-dir", path_str(&model), "--role", "query"];
    let texts = "\"alpha beta\"\n\"gamma\"\n";
    let cpu = scifact_audit(&[&embed[..], &["--device", "cpu"]].concat(), texts);
    let auto = crate::scifact_audit_with(&embed, texts, &[(stand_in, "emulated-broken")]);
    let stderr = String::from_utf8_lossy(&auto.stderr);
    assert!(auto.status.success(), "{stderr}");
    assert!(stderr.contains("device: cpu") && stderr.contains("failed its self-check"), "{stderr}");
    assert_eq!(auto.stdout, cpu.stdout);

    let cuda_like = crate::scifact_audit_with(
        &["device", "--device", "auto", "--check", "--self-check"],
        "",
        &[(stand_in, "emulated-broken")],
    );
    let stdout = String::from_utf8_lossy(&cuda_like.stdout);
    assert_eq!(cuda_like.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("the kernels do NOT give the CPU's bits"), "{stdout}");

    let unknown = crate::scifact_audit_with(&["device"], "", &[(stand_in, "h100")]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("only `emulated` and `emulated-broken`"));
}

/// `verify-bundle` of `bundle` on `device`: its report.
fn verify_on(bundle: &Path, public: &Path, device: &str) -> Value {
    let fixtures = root().join("fixtures/tiny");
    let output = scifact_audit(
        &[
            "verify-bundle",
            "--bundle-dir",
            path_str(bundle),
            "--public-key",
            path_str(public),
            "--archive",
            path_str(&fixtures.join("scifact-tiny.zip")),
            "--model-dir",
            path_str(&fixtures.join("model")),
            "--device",
            device,
            "--json",
        ],
        "",
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}", String::from_utf8_lossy(&output.stderr)))
}

/// The `embedding.values` check of a report: it must have passed with every vector re-embedded; its evidence.
fn embedding_values_passed(report: &Value) -> String {
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "embedding.values")
        .unwrap_or_else(|| panic!("no embedding.values: {report}"));
    assert_eq!(check["status"], "pass", "{check}");
    check["evidence"].as_str().unwrap().to_owned()
}

#[test]
fn a_tiny_evaluation_on_the_emulated_gpu_is_the_expected_bundle_and_each_verifies_on_the_other_device() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = keys(dir.path());
    let work = dir.path().join("work");
    let mut args = tiny_eval_args(&work, &secret);
    args.extend([
        "--device".to_owned(),
        "emulated".to_owned(),
        "--embedding-sample".to_owned(),
        "8".to_owned(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = scifact_audit(&args, "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("device: emulated"), "{stderr}");
    let bundle = only_bundle(&work);
    assert_identical_to_expected(&bundle, &public, dir.path());

    // Made on the (emulated) GPU, verified on the CPU: every vector re-embedded there.
    let evidence = embedding_values_passed(&verify_on(&bundle, &public, "cpu"));
    assert!(
        evidence.contains("all 300 documents") || evidence.contains("300 of 300 documents"),
        "{evidence}"
    );
    assert!(evidence.contains("kernels): every vector equal to the bit"), "{evidence}");
    // The device is recorded, as the signer's word.
    let aggregate = std::fs::read_dir(&bundle)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".aggregate.json"))
        .unwrap();
    let aggregate: Value = serde_json::from_slice(&std::fs::read(aggregate).unwrap()).unwrap();
    assert!(
        aggregate["host"]["embedding_device"].as_str().is_some_and(|d| d.starts_with("emulated")),
        "{}",
        aggregate["host"]
    );

    // Made on the CPU (the committed bundle), verified on the emulated GPU.
    let fixtures = root().join("fixtures/tiny");
    let report = verify_on(&fixtures.join("expected"), &fixtures.join("expected.pub"), "emulated");
    let evidence = embedding_values_passed(&report);
    assert!(evidence.contains("(emulated GPU kernels)"), "{evidence}");
}

/// `build --profile tiny` into `out` with the cache in `work`, with `extra` flags.
fn build(out: &Path, work: &Path, extra: &[&str]) -> std::process::Output {
    let args = build_args(out, work);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend_from_slice(extra);
    scifact_audit(&args, "")
}

/// The arguments of `build --profile tiny` of the committed archive and model into `out`, cached in `work`.
fn build_args(out: &Path, work: &Path) -> Vec<String> {
    let fixtures = root().join("fixtures/tiny");
    [
        "build",
        "--profile",
        "tiny",
        "--archive",
        path_str(&fixtures.join("scifact-tiny.zip")),
        "--model-dir",
        path_str(&fixtures.join("model")),
        "--out",
        path_str(out),
        "--work-dir",
        path_str(work),
    ]
    .map(str::to_owned)
    .to_vec()
}

#[test]
fn gpu_and_cpu_shards_merge_into_the_unsharded_fixture_and_a_killed_gpu_build_resumes_on_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let unsharded = dir.path().join("unsharded.json");
    let output = build(&unsharded, &dir.path().join("w0"), &["--device", "cpu"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let expected = std::fs::read(&unsharded).unwrap();

    let work = dir.path().join("w1");
    let merged = dir.path().join("merged.json");
    for (shard, device) in [("0/3", "emulated"), ("1/3", "cpu"), ("2/3", "emulated")] {
        let mut args = build_args(&merged, &work);
        let out = args.iter().position(|a| a == "--out").unwrap();
        args.drain(out..out + 2);
        args.extend(["--shard", shard, "--device", device].map(str::to_owned));
        let output = scifact_audit(&args.iter().map(String::as_str).collect::<Vec<_>>(), "");
        assert!(output.status.success(), "{shard}: {}", String::from_utf8_lossy(&output.stderr));
    }
    let output = build(&merged, &work, &["--device", "cpu"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        std::fs::read(&merged).unwrap() == expected,
        "the merged fixture is the unsharded one, byte for byte"
    );

    // Killed on the GPU after its second chunk was cached; finished on the CPU.
    let work = dir.path().join("w2");
    let resumed = dir.path().join("resumed.json");
    let mut args = build_args(&resumed, &work);
    args.extend(["--device".to_owned(), "emulated".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(run_until(&args, "build.embedded:2"), Outcome::Killed);
    assert!(!resumed.exists());
    let output = build(&resumed, &work, &["--device", "cpu"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("128 from cache"), "{stdout}");
    assert!(
        std::fs::read(&resumed).unwrap() == expected,
        "the resumed fixture is the unsharded one, byte for byte"
    );
}
