//! Fusion, recomputed from two candidate lists (three with a sparse one): reciprocal rank fusion, or the convex
//! combination of min-max or z-score normalised scores with the declared rule for a document one list lacks.
//! Written from the definitions, apart from the library's code, in the documented order of operations
//! (contributions added lexical first, then vector, the sparse one last; normalisation sums in candidate
//! order), so that the results are the library's bits.

use serde_json::Value;

/// One component's place in a fused hit: its rank in its list (from 1), its score, and its normalised value
/// (convex combination only).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Component {
    pub(crate) rank: usize,
    pub(crate) score: f64,
    pub(crate) normalized: Option<f64>,
}

/// One fused hit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hit {
    pub(crate) fact: i64,
    pub(crate) score: f64,
    pub(crate) lexical: Option<Component>,
    pub(crate) vector: Option<Component>,
    pub(crate) sparse: Option<Component>,
}

/// A list's normalisation: `(score - shift) / scale`, or `degenerate` when the scale is not positive; the
/// value of a document the list lacks is `missing`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Normalization {
    pub(crate) shift: f64,
    pub(crate) scale: f64,
    pub(crate) missing: f64,
    degenerate: f64,
}

impl Normalization {
    fn of(&self, score: f64) -> f64 {
        if self.scale > 0.0 { (score - self.shift) / self.scale } else { self.degenerate }
    }
}

/// How a configuration fuses, read from its JSON.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Method {
    Rrf { k: f64 },
    Convex { z_score: bool, missing_lowest: bool },
}

/// What fusion needs of a configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Plan {
    pub(crate) top_k: usize,
    pub(crate) fts_weight: f64,
    pub(crate) vector_weight: f64,
    /// The sparse list's weight (0, or absent in configurations made before sparse lists: two lists).
    pub(crate) sparse_weight: f64,
    pub(crate) method: Method,
}

impl Plan {
    /// Reads a configuration (an absent `fusion` is reciprocal rank fusion, as in the baseline).
    ///
    /// # Errors
    /// The field that is missing or unknown.
    pub(crate) fn of(config: &Value) -> Result<Plan, String> {
        let number = |key: &str| config[key].as_f64().ok_or_else(|| format!("config.{key} is not a number"));
        let method = match config["fusion"]["method"].as_str().unwrap_or("rrf") {
            "rrf" => Method::Rrf { k: number("rrf_k")? },
            "convex" => Method::Convex {
                z_score: match config["fusion"]["normalization"].as_str() {
                    Some("min_max") => false,
                    Some("z_score") => true,
                    other => return Err(format!("unknown normalization {other:?}")),
                },
                missing_lowest: match config["fusion"]["missing"].as_str() {
                    Some("zero") => false,
                    Some("lowest") => true,
                    other => return Err(format!("unknown missing rule {other:?}")),
                },
            },
            other => return Err(format!("unknown fusion method {other:?}")),
        };
        let top_k = config["top_k"].as_u64().ok_or("config.top_k is not a count")? as usize;
        let sparse_weight = match &config["sparse_weight"] {
            Value::Null => 0.0,
            _ => number("sparse_weight")?,
        };
        Ok(Plan {
            top_k,
            fts_weight: number("fts_weight")?,
            vector_weight: number("vector_weight")?,
            sparse_weight,
            method,
        })
    }
}

/// Normalises a candidate list (convex combination only).
pub(crate) fn normalize(list: &[(i64, f64)], z_score: bool, missing_lowest: bool) -> Normalization {
    let scores = || list.iter().map(|(_, s)| *s);
    let (shift, scale, degenerate) = if list.is_empty() {
        (0.0, 0.0, 0.0)
    } else if z_score {
        let n = list.len() as f64;
        let mean = scores().sum::<f64>() / n;
        let deviation = (scores().map(|s| (s - mean) * (s - mean)).sum::<f64>() / n).sqrt();
        (mean, deviation, 0.0)
    } else {
        let low = scores().fold(f64::INFINITY, f64::min);
        let high = scores().fold(f64::NEG_INFINITY, f64::max);
        (low, high - low, 1.0)
    };
    let mut normal = Normalization { shift, scale, missing: 0.0, degenerate };
    if missing_lowest && !list.is_empty() {
        normal.missing = normal.of(scores().fold(f64::INFINITY, f64::min));
    }
    normal
}

/// The three normalisations of a convex combination: lexical, vector, and sparse when a sparse list is fused.
pub(crate) type Normalizations = (Normalization, Normalization, Option<Normalization>);

/// The fused top k of two ranked candidate lists, and of a third sparse one when given, best first, ties by
/// fact id; and the normalisations (convex combination only).
pub(crate) fn fuse(
    lexical: &[(i64, f64)],
    vector: &[(i64, f64)],
    sparse: Option<&[(i64, f64)]>,
    plan: &Plan,
) -> (Vec<Hit>, Option<Normalizations>) {
    let normal = match plan.method {
        Method::Rrf { .. } => None,
        Method::Convex { z_score, missing_lowest } => Some((
            normalize(lexical, z_score, missing_lowest),
            normalize(vector, z_score, missing_lowest),
            sparse.map(|sparse| normalize(sparse, z_score, missing_lowest)),
        )),
    };
    let place = |index: usize, score: f64, normal: Option<&Normalization>| Component {
        rank: index + 1,
        score,
        normalized: normal.map(|n| n.of(score)),
    };
    type Places = (Option<Component>, Option<Component>, Option<Component>);
    let mut by_fact: std::collections::BTreeMap<i64, Places> = std::collections::BTreeMap::new();
    for (index, (fact, score)) in lexical.iter().enumerate() {
        by_fact.entry(*fact).or_default().0 = Some(place(index, *score, normal.as_ref().map(|n| &n.0)));
    }
    for (index, (fact, score)) in vector.iter().enumerate() {
        by_fact.entry(*fact).or_default().1 = Some(place(index, *score, normal.as_ref().map(|n| &n.1)));
    }
    for (index, (fact, score)) in sparse.unwrap_or_default().iter().enumerate() {
        let normal = normal.as_ref().and_then(|n| n.2.as_ref());
        by_fact.entry(*fact).or_default().2 = Some(place(index, *score, normal));
    }
    let mut hits: Vec<Hit> = by_fact
        .into_iter()
        .map(|(fact, (lexical, vector, found))| {
            let score = match (&plan.method, &normal) {
                (Method::Rrf { k }, _) => {
                    let rrf =
                        |weight: f64, c: Option<Component>| c.map_or(0.0, |c| weight / (k + c.rank as f64));
                    let two = rrf(plan.fts_weight, lexical) + rrf(plan.vector_weight, vector);
                    if sparse.is_some() { two + rrf(plan.sparse_weight, found) } else { two }
                }
                (Method::Convex { .. }, Some((ln, vn, sn))) => {
                    let value = |c: Option<Component>, n: &Normalization| {
                        c.and_then(|c| c.normalized).unwrap_or(n.missing)
                    };
                    let two = plan.fts_weight * value(lexical, ln) + plan.vector_weight * value(vector, vn);
                    match sn {
                        Some(sn) => two + plan.sparse_weight * value(found, sn),
                        None => two,
                    }
                }
                (Method::Convex { .. }, None) => f64::NAN,
            };
            Hit { fact, score, lexical, vector, sparse: found }
        })
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.fact.cmp(&b.fact)));
    hits.truncate(plan.top_k);
    (hits, normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_adds_weighted_reciprocal_ranks_lexical_first() {
        let plan = Plan {
            top_k: 3,
            fts_weight: 1.0,
            vector_weight: 0.5,
            sparse_weight: 0.0,
            method: Method::Rrf { k: 60.0 },
        };
        let (hits, normal) = fuse(&[(1, 9.0), (2, 8.0)], &[(2, 0.9), (3, 0.8)], None, &plan);
        assert!(normal.is_none());
        assert_eq!(hits.iter().map(|h| h.fact).collect::<Vec<_>>(), vec![2, 1, 3]);
        assert_eq!(hits[0].score, 1.0 / 62.0 + 0.5 / 61.0);
        assert_eq!(hits[0].lexical.map(|c| c.rank), Some(2));
        assert_eq!(hits[2].lexical, None);
    }

    #[test]
    fn convex_min_max_and_z_score_with_their_missing_rules() {
        let plan = |z_score, missing_lowest| Plan {
            top_k: 10,
            fts_weight: 0.6,
            vector_weight: 0.4,
            sparse_weight: 0.0,
            method: Method::Convex { z_score, missing_lowest },
        };
        let lexical = [(1, 10.0), (2, 6.0), (3, 2.0)];
        let vector = [(3, 0.5), (5, 0.375), (4, 0.25)];
        let (hits, normal) = fuse(&lexical, &vector, None, &plan(false, false));
        let (ln, vn, _) = normal.unwrap();
        assert_eq!((ln.shift, ln.scale, ln.missing), (2.0, 8.0, 0.0));
        assert_eq!((vn.shift, vn.scale), (0.25, 0.25));
        let score = |hits: &[Hit], fact: i64| hits.iter().find(|h| h.fact == fact).unwrap().score;
        assert_eq!(score(&hits, 3), 0.6 * 0.0 + 0.4 * 1.0);
        assert_eq!(score(&hits, 2), 0.6 * 0.5, "a list the fact is missing from adds 0 (min-max, zero)");
        assert_eq!(score(&hits, 5), 0.4 * 0.5, "each normalised value is multiplied by its list's weight");
        let (hits, normal) = fuse(&lexical, &vector, None, &plan(true, true));
        let (ln, vn, _) = normal.unwrap();
        // The population deviation: sqrt(((10 - 6)² + 0² + (2 - 6)²) / 3).
        assert_eq!((ln.shift, ln.scale), (6.0, (32.0f64 / 3.0).sqrt()));
        assert_eq!(ln.missing, (2.0 - 6.0) / (32.0f64 / 3.0).sqrt(), "lowest normalises the lowest score");
        assert_eq!(score(&hits, 1), 0.6 * ln.of(10.0) + 0.4 * vn.missing);
        // Receipts are compared bit for bit, so the deviation is the definition's, operation by operation:
        // Σ (s − mean)² / n, not an algebraically equal form that rounds differently.
        // (These four scores tell Σ (s − mean)² from Σ (s + mean)(s − mean) after the square root.)
        let irregular = [(1, -0.98), (2, 9.71), (3, 8.46), (4, 0.83)];
        let z = normalize(&irregular, true, false);
        let mean = (-0.98 + 9.71 + 8.46 + 0.83) / 4.0;
        let squares = |s: f64| (s - mean) * (s - mean);
        let deviation = ((squares(-0.98) + squares(9.71) + squares(8.46) + squares(0.83)) / 4.0f64).sqrt();
        assert_eq!((z.shift.to_bits(), z.scale.to_bits()), (mean.to_bits(), deviation.to_bits()));
        let (hits, normal) = fuse(&lexical, &vector, None, &plan(true, false));
        let (ln, vn, _) = normal.unwrap();
        assert_eq!((ln.missing, vn.missing), (0.0, 0.0), "zero: a missing fact scores 0, not the lowest");
        assert_eq!(score(&hits, 1), 0.6 * ln.of(10.0));
        let (_, normal) = fuse(&[(1, 5.0)], &[], None, &plan(false, false));
        assert_eq!(normal.unwrap().0.of(5.0), 1.0, "a degenerate min-max list normalises to 1");
    }

    #[test]
    fn a_sparse_list_adds_its_weighted_part_last_under_both_methods() {
        let lexical = [(1, 10.0), (2, 6.0)];
        let vector = [(2, 0.5), (3, 0.25)];
        let sparse = [(3, 40.0), (4, 20.0), (1, 10.0)];
        let rrf = Plan {
            top_k: 10,
            fts_weight: 1.0,
            vector_weight: 1.0,
            sparse_weight: 0.5,
            method: Method::Rrf { k: 60.0 },
        };
        let (hits, _) = fuse(&lexical, &vector, Some(&sparse), &rrf);
        let of = |hits: &[Hit], fact: i64| hits.iter().find(|h| h.fact == fact).unwrap().clone();
        assert_eq!(of(&hits, 1).score, 1.0 / 61.0 + 0.0 + 0.5 / 63.0);
        assert_eq!(of(&hits, 4).score, 0.5 / 62.0);
        assert_eq!(of(&hits, 3).sparse.map(|c| c.rank), Some(1));
        assert_eq!(of(&hits, 2).sparse, None);
        let convex = Plan {
            fts_weight: 0.5,
            vector_weight: 0.25,
            sparse_weight: 0.25,
            method: Method::Convex { z_score: false, missing_lowest: false },
            ..rrf
        };
        let (hits, normal) = fuse(&lexical, &vector, Some(&sparse), &convex);
        let sn = normal.unwrap().2.unwrap();
        assert_eq!((sn.shift, sn.scale), (10.0, 30.0));
        assert_eq!(of(&hits, 3).score, 0.5 * 0.0 + 0.25 * 0.0 + 0.25 * 1.0);
        assert_eq!(of(&hits, 1).score, 0.5 * 1.0 + 0.25 * 0.0 + 0.25 * 0.0);
        // Without a sparse list the sparse weight adds nothing, whatever it is.
        let (two, normal) = fuse(&lexical, &vector, None, &rrf);
        assert!(normal.is_none());
        assert_eq!(of(&two, 1).score, 1.0 / 61.0);
    }
}
