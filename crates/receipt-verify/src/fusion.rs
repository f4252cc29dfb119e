//! `fusion.scores`: every hybrid hit's score recomputed from its components under the receipt's own
//! configuration, for reciprocal rank fusion and for the convex combination (whose receipt records how each
//! list was normalised). Written from the definitions, apart from the library's code.

use serde_json::Value;

/// Recomputes every fused score of a hybrid run; other modes have nothing to fuse.
pub(crate) fn fusion_scores(run: &crate::artifacts::Run, rows: &[Value]) -> Result<String, String> {
    let mode = run.str_at("/mode");
    if mode != "hybrid" {
        return Ok(format!("{mode} does not fuse"));
    }
    let mut hits = 0;
    let mut methods = std::collections::BTreeSet::new();
    for row in rows.iter().filter(|r| !r["receipt"].is_null()) {
        let id = row["query_id"].as_str().unwrap_or("");
        let receipt = &row["receipt"];
        let config = &receipt["config"];
        let method = config["fusion"]["method"].as_str().unwrap_or("rrf");
        methods.insert(method.to_owned());
        let number = |value: &Value, what: &str| {
            value.as_f64().ok_or_else(|| format!("query {id:?}: {what} is not a number"))
        };
        let fts_weight = number(&config["fts_weight"], "config.fts_weight")?;
        let vector_weight = number(&config["vector_weight"], "config.vector_weight")?;
        let Some(list) = receipt["hits"].as_array() else {
            return Err(format!("query {id:?}: the receipt has no hits array"));
        };
        for hit in list {
            let recorded = number(&hit["score"], "a hit's score")?;
            let fact = &hit["fact_id"];
            let expected = match method {
                "rrf" => {
                    let k = number(&config["rrf_k"], "config.rrf_k")?;
                    let part = |component: &Value, weight: f64| -> Result<f64, String> {
                        if component.is_null() {
                            return Ok(0.0);
                        }
                        Ok(weight / (k + number(&component["rank"], "a component's rank")?))
                    };
                    part(&hit["lexical"], fts_weight)? + part(&hit["vector"], vector_weight)?
                }
                "convex" => {
                    let degenerate = match config["fusion"]["normalization"].as_str() {
                        Some("min_max") => 1.0,
                        Some("z_score") => 0.0,
                        other => return Err(format!("query {id:?}: unknown normalization {other:?}")),
                    };
                    let part = |component: &Value, name: &str| -> Result<f64, String> {
                        let normal = &receipt["fusion"][name];
                        let shift = number(&normal["shift"], "fusion shift")?;
                        let scale = number(&normal["scale"], "fusion scale")?;
                        if component.is_null() {
                            return number(&normal["missing"], "fusion missing");
                        }
                        let raw = number(&component["score"], "a component's score")?;
                        let value = if scale > 0.0 { (raw - shift) / scale } else { degenerate };
                        let recorded = number(&component["normalized"], "a component's normalized score")?;
                        if !close(value, recorded) {
                            return Err(format!(
                                "query {id:?}: fact {fact}'s {name} score {raw} normalises to {value}, the \
                                 receipt says {recorded}"
                            ));
                        }
                        Ok(value)
                    };
                    fts_weight * part(&hit["lexical"], "lexical")?
                        + vector_weight * part(&hit["vector"], "vector")?
                }
                other => return Err(format!("query {id:?}: unknown fusion method {other:?}")),
            };
            if !close(expected, recorded) {
                return Err(format!(
                    "query {id:?}: fact {fact} scored {recorded}, its components give {expected}"
                ));
            }
            hits += 1;
        }
        let scores: Vec<f64> = list.iter().filter_map(|h| h["score"].as_f64()).collect();
        if scores.windows(2).any(|w| w[0] < w[1]) {
            return Err(format!("query {id:?}: hits are not in descending score order"));
        }
    }
    let methods: Vec<String> = methods.into_iter().collect();
    Ok(format!("{hits} fused scores recomputed from their components ({})", methods.join(", ")))
}

/// Equal up to the last bits a different but correct summation could change.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300)
}
