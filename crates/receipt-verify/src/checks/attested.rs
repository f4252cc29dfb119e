//! What only the signer can say: the git state of the tree the executable was built from, the host, and the
//! latency it measured. These are read and checked for consistency, and reported as attested: no verifier can
//! recompute them, so none is ever reported as `pass`.

use serde_json::{Value, json};

use crate::artifacts::Run;
use crate::report::{Basis, Report, Status};

/// The attested checks of one aggregate.
pub(crate) fn attested(run: &Run) -> Report {
    let mut report = Report::default();
    let scope = run.name.as_str();
    let (status, text) = git_state(run);
    report.push(scope, "git.clean", status, Basis::Attested, text);
    report.attest(scope, "host.identity", host_identity(run));
    report.attest(scope, "latency.measured", latency(run));
    report
}

fn git_state(run: &Run) -> (Status, String) {
    let git = &run.aggregate["source"]["git"];
    let revision = run.str_at("/source/build_revision");
    if !git["available"].as_bool().unwrap_or(false) {
        return (Status::NotPublishable, format!("no git state: {}", git["unavailable"]));
    }
    let head = git["head"].as_str().unwrap_or("");
    if !git["clean"].as_bool().unwrap_or(false) {
        return (
            Status::NotPublishable,
            format!(
                "worktree dirty at {head} ({} changed, {} untracked; digest {})",
                git["dirty"].as_array().map_or(0, Vec::len),
                git["untracked"].as_array().map_or(0, Vec::len),
                git["dirty_digest"]
            ),
        );
    }
    if revision != head {
        return (Status::NotPublishable, format!("executable built from {revision}, worktree at {head}"));
    }
    (
        Status::Attested,
        format!("the signer's tool recorded a clean worktree at {head}, the executable built from it"),
    )
}

fn host_identity(run: &Run) -> Result<String, String> {
    let host = &run.aggregate["host"];
    let present =
        |key: &str| host.get(key).is_some_and(|v| !v.is_null() && v != &json!("") && v != &json!(0));
    for key in ["os", "kernel", "arch", "cpu_brand", "logical_cores", "memory_bytes"] {
        if !present(key) {
            return Err(format!("host.{key} is missing ({})", host["unavailable"]));
        }
    }
    Ok(format!(
        "recorded host: {} {} / {} / {} logical cores / {:.1} GiB of memory{}",
        host["os"].as_str().unwrap_or(""),
        host["kernel"].as_str().unwrap_or(""),
        host["cpu_brand"].as_str().unwrap_or(""),
        host["logical_cores"],
        host["memory_bytes"].as_f64().unwrap_or(0.0) / f64::from(1u32 << 30),
        host["embedding_device"]
            .as_str()
            .map_or_else(String::new, |device| format!(" / embedder on {device}")),
    ))
}

fn latency(run: &Run) -> Result<String, String> {
    let metrics = &run.aggregate["metrics"];
    let latency = metrics.get("latency_ms").ok_or("no latency_ms")?;
    let p50 = latency["p50"].as_f64().ok_or("latency_ms.p50 is not a number")?;
    let p95 = latency["p95"].as_f64().ok_or("latency_ms.p95 is not a number")?;
    let retrieval = metrics["retrieval_ms"]["p50"].as_f64();
    Ok(format!(
        "whole-call p50 {p50:.3} ms, p95 {p95:.3} ms{} on {}: the signer's measurement, on the signer's machine",
        retrieval.map_or_else(String::new, |r| format!(" (retrieval p50 {r:.3} ms)")),
        run.aggregate["host"]["cpu_brand"].as_str().unwrap_or("an unnamed CPU"),
    ))
}

/// `freeze.order` for a held-out run under a freeze: it started (by the signer's clock) no earlier than the
/// configuration was frozen.
pub(crate) fn freeze_order(run: &Run, frozen: &Value) -> Result<String, String> {
    let frozen_at =
        frozen.get("frozen_unix").and_then(Value::as_u64).ok_or("the freeze records no frozen_unix")?;
    let started = run.aggregate.get("started_unix").and_then(Value::as_u64).ok_or("no started_unix")?;
    if started < frozen_at {
        return Err(format!(
            "this {} run started at {started}, before the configuration was frozen at {frozen_at}",
            run.str_at("/split")
        ));
    }
    Ok(format!(
        "started at {}, after the freeze at {} (the signer's clock)",
        crate::time::rfc3339(started),
        crate::time::rfc3339(frozen_at)
    ))
}
