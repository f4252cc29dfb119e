//! The receipts, checked against their aggregate: the exactness policy each declares, every digest and the
//! rolling digest, the fused scores against their own components, and the effective configuration every
//! receipt carries against the aggregate's and the freeze.

use serde_json::Value;

use crate::artifacts::Run;
use crate::baseline::is_frozen_baseline;
use crate::canonical::{canonical_digest, sha256_tagged};
use crate::names::EFFECTIVE_CONFIG_FILE;
use crate::report::Report;

/// The seed of the rolling receipt digest (the runner's documented algorithm).
pub(crate) const RECEIPT_CHAIN_SEED: &str = "semantic-memory-scifact-receipt-chain-v1";

/// The exact-by-bound vector backend's name in receipts.
pub(crate) const BOUNDED: &str = "int8_bound_exact";

/// The per-aggregate receipt checks, given the frozen `effective-config.json` when there is one.
pub(crate) fn receipts(run: &Run, frozen: Option<&Value>) -> Report {
    let mut report = Report::default();
    let scope = run.name.as_str();
    let rows = match &run.rows {
        Ok(rows) => rows,
        Err(reason) => {
            report.record(scope, "receipts.digests", Err(reason.clone()));
            return report;
        }
    };
    report.record(scope, "exactness.policy", exactness(run, rows));
    report.record(scope, "receipts.digests", receipt_digests(run, rows));
    report.record(scope, "fusion.scores", crate::checks::rankings::fusion_scores(run, rows));
    report.record(scope, "config.effective", effective_config(run, rows, frozen));
    report
}

fn exactness(run: &Run, rows: &[Value]) -> std::result::Result<String, String> {
    let mode = run.str_at("/mode");
    let (mut exact, mut bounded) = (0, 0);
    for row in rows.iter().filter(|r| !r["receipt"].is_null()) {
        let id = row["query_id"].as_str().unwrap_or("");
        let receipt = &row["receipt"];
        if receipt["mode"].as_str() != Some(mode) {
            return Err(format!("query {id:?}: receipt mode {} under a {mode} aggregate", receipt["mode"]));
        }
        let wants_lexical = matches!(mode, "fts_only" | "hybrid");
        let wants_vector = matches!(mode, "vector_only" | "hybrid");
        let sparse_weight = receipt["config"]["sparse_weight"].as_f64().unwrap_or(0.0);
        let wants_sparse = mode == "sparse_only" || (mode == "hybrid" && sparse_weight != 0.0);
        if receipt["lexical"].is_null() == wants_lexical
            || receipt["vector"].is_null() == wants_vector
            || receipt["sparse"].is_null() == wants_sparse
        {
            return Err(format!("query {id:?}: component evidence does not fit mode {mode}"));
        }
        let sparse = &receipt["sparse"];
        if wants_sparse
            && (sparse["exact"] != true || sparse["facts_scored"].as_u64() > sparse["index_size"].as_u64())
        {
            return Err(format!(
                "query {id:?}: the sparse evidence claims no exact answer, or scored more facts than its index holds"
            ));
        }
        let vector = &receipt["vector"];
        if vector.is_null() {
            continue;
        }
        if receipt["config"]["candidate_dims"].is_null() != vector["matryoshka"].is_null() {
            return Err(format!(
                "query {id:?}: candidate_dims is {} but the vector evidence {} Matryoshka stages",
                receipt["config"]["candidate_dims"],
                if vector["matryoshka"].is_null() { "records no" } else { "records" }
            ));
        }
        let profile = vector["profile"].as_str().unwrap_or("");
        let is_exact = vector["exact"].as_bool().unwrap_or(false);
        let available = vector["exact_available"].as_bool().unwrap_or(false);
        let backend = vector["backend"].as_str().unwrap_or("");
        let scanned = vector["vectors_scanned"].as_u64();
        let size = vector["index_size"].as_u64();
        let declared = receipt["config"]["exactness"].as_str().unwrap_or("");
        if profile != declared {
            return Err(format!(
                "query {id:?}: the vector evidence says profile {profile:?}, the config {declared:?}"
            ));
        }
        match profile {
            "require_exact" if !is_exact => {
                return Err(format!("query {id:?}: require_exact, but {backend} answered approximately"));
            }
            "prefer_exact" if available && !is_exact => {
                return Err(format!(
                    "query {id:?}: {profile} with an exact backend available, but {backend} answered"
                ));
            }
            "prefer_exact" if !is_exact && vector["fallback_reason"].is_null() => {
                return Err(format!(
                    "query {id:?}: approximate answer under prefer_exact without a fallback reason"
                ));
            }
            "require_exact" | "prefer_exact" | "allow_approximate" => {}
            other => return Err(format!("query {id:?}: unknown exactness profile {other:?}")),
        }
        if is_exact {
            if scanned != size || size.is_none() {
                return Err(format!(
                    "query {id:?}: exact claim by {backend} scanned {scanned:?} of {size:?}"
                ));
            }
            match backend {
                "brute_force" => {}
                // Exact by bound: its claim is structural here, and `vector.exactness` re-checks it by full scans.
                BOUNDED => {
                    let rescored = vector["vectors_rescored"].as_u64();
                    let returned = vector["returned"].as_u64().unwrap_or(u64::MAX);
                    if !rescored.is_some_and(|r| r >= returned && Some(r) <= scanned) {
                        return Err(format!(
                            "query {id:?}: {backend} rescored {rescored:?} of {scanned:?} and returned {returned}"
                        ));
                    }
                    bounded += 1;
                }
                other => {
                    return Err(format!(
                        "query {id:?}: exact claim by {other}, which is not an exact backend"
                    ));
                }
            }
            exact += 1;
        }
    }
    Ok(format!(
        "{exact} exact vector answers ({bounded} by bound, re-checked under vector.exactness); every receipt's \
         backend fits its profile and mode {mode}"
    ))
}

fn receipt_digest(receipt: &Value) -> String {
    let mut body = receipt.clone();
    if let Some(object) = body.as_object_mut() {
        object.remove("digest");
    }
    canonical_digest(&body)
}

fn receipt_digests(run: &Run, rows: &[Value]) -> std::result::Result<String, String> {
    let mut chain = sha256_tagged(RECEIPT_CHAIN_SEED.as_bytes());
    let mut count = 0;
    for row in rows.iter().filter(|r| !r["receipt"].is_null()) {
        let id = row["query_id"].as_str().unwrap_or("");
        let receipt = &row["receipt"];
        let recorded = receipt["digest"].as_str().unwrap_or("");
        let computed = receipt_digest(receipt);
        if recorded != computed {
            return Err(format!("query {id:?}: receipt digest {recorded}, recomputed {computed}"));
        }
        if receipt["request_id"] != row["request_id"]
            || receipt["namespace"] != run.aggregate["store"]["namespace"]
        {
            return Err(format!("query {id:?}: the receipt belongs to another request or namespace"));
        }
        chain = sha256_tagged(format!("{chain}\n{computed}").as_bytes());
        count += 1;
    }
    let recorded = run.str_at("/receipts/rolling_digest");
    if recorded != chain {
        return Err(format!("rolling digest {recorded}, recomputed {chain}"));
    }
    Ok(format!("{count} receipt digests recomputed; rolling digest {chain}"))
}

fn effective_config(
    run: &Run,
    rows: &[Value],
    frozen: Option<&Value>,
) -> std::result::Result<String, String> {
    let config = run.aggregate.pointer("/retrieval/config").cloned().unwrap_or(Value::Null);
    let digest = canonical_digest(&config);
    if run.str_at("/retrieval/config_sha256") != digest {
        return Err(format!("config_sha256 {}, recomputed {digest}", run.str_at("/retrieval/config_sha256")));
    }
    for row in rows.iter().filter(|r| !r["receipt"].is_null()) {
        if row["receipt"]["config"] != config {
            return Err(format!(
                "query {}: the receipt's config differs from the aggregate's",
                row["query_id"]
            ));
        }
    }
    if config.get("top_k") != run.aggregate.pointer("/retrieval/top_k") {
        return Err("retrieval.top_k differs from the config's".into());
    }
    let baseline = run.aggregate.pointer("/retrieval/baseline").and_then(Value::as_bool).unwrap_or(false);
    if baseline && !is_frozen_baseline(&config) {
        return Err("the aggregate claims the baseline, but its config is not the frozen baseline".into());
    }
    if let Some(value) = frozen {
        let frozen_config = value.get("config").unwrap_or(value);
        let selected = value["schema"] == "scifact-audit-effective-config-v2";
        if selected && run.str_at("/split") == "calibration" {
            // Calibration ran every declared trial before the freeze; `selection.*` checks them.
            return Ok(format!(
                "every receipt carries config {digest}, a calibration trial (see selection.ledger)"
            ));
        }
        let baseline_digest = value.pointer("/baseline/config_sha256").and_then(Value::as_str);
        let frozen_digest = canonical_digest(frozen_config);
        if frozen_digest != digest && !(selected && baseline_digest == Some(digest.as_str())) {
            return Err(format!("the config differs from the frozen {EFFECTIVE_CONFIG_FILE}"));
        }
    }
    Ok(format!(
        "every receipt carries config {digest}{}",
        if baseline { " (the frozen baseline)" } else { "" }
    ))
}
