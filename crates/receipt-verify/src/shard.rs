//! Sharded re-embedding: slice `I` of `N` of a bundle's texts re-embedded by one process
//! (`verify-bundle --embedding-shard I/N --shard-out FILE`), and the results of every slice taken by the
//! process that makes every other check (`--embedding-shards`).
//!
//! The texts are the bundle's documents then its queries, in the fixture's order; slice `I` of `N` is
//! `[I·T/N, (I+1)·T/N)` of the `T` in all. A result is bound to the bundle (its manifest's digest), the
//! verifier (its executable's digest) and the model (the declared identity it loaded and judged), and says
//! what its slice found. The merge takes the re-embedding from the results only when they cover every text
//! exactly once and each is bound to this bundle, this verifier and this model; otherwise `embedding.values`
//! fails, naming the missing, duplicated, foreign or failed slice. It then gives the evidence an unsharded
//! run gives, so the verdict, `verification.json` and the page are the same.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::recompute::embedding::Ran;

/// The schema of a shard result.
pub const SHARD_SCHEMA: &str = "scifact-audit/embedding-shard/v1";

/// The largest shard result read (they are a few kilobytes).
pub const MAX_SHARD_BYTES: u64 = 1 << 20;

/// One slice of `count`, from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    /// Which slice.
    pub index: usize,
    /// How many in all.
    pub count: usize,
}

impl Slice {
    /// The texts (documents first, then queries) of this slice, of `total`.
    pub fn range(&self, total: usize) -> Range<usize> {
        let bound = |i: usize| {
            usize::try_from(i as u128 * total as u128 / self.count.max(1) as u128).unwrap_or(total)
        };
        bound(self.index)..bound(self.index + 1)
    }
}

impl std::fmt::Display for Slice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What one slice's re-embedding found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "evidence")]
pub enum Finding {
    /// Every vector of the slice equal to the bit.
    Equal,
    /// A vector that is not the declared model's (the text named).
    Differs(String),
    /// The slice could not be checked (the bundle, the archive or the model could not be read).
    Failed(String),
}

/// A slice's result, as written by `--shard-out`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardResult {
    /// [`SHARD_SCHEMA`].
    pub schema: String,
    /// `sha256:` of the bundle's `manifest.json` (empty when it could not be read).
    pub bundle_manifest_sha256: String,
    /// `sha256:` of the verifier executable that re-embedded.
    pub verifier_sha256: String,
    /// The embedding identity the fixture declares, which the model directory was required to be.
    pub model: Value,
    /// The slice.
    pub slice: Slice,
    /// Documents in the bundle.
    pub documents: usize,
    /// Queries in the bundle.
    pub queries: usize,
    /// The texts re-embedded: positions in documents-then-queries order.
    pub texts: Range<usize>,
    /// What re-embedded (absent when the model did not load).
    pub ran: Option<Ran>,
    /// What it found.
    pub finding: Finding,
}

/// Shard results read for a merge, each by the name of the file it came from.
#[derive(Debug, Clone)]
pub struct ShardResults {
    /// Each file's result, or why it could not be read.
    pub results: Vec<(String, Result<ShardResult, String>)>,
    /// Each file's `sha256:` digest, by name (of the bytes read; absent for a file that could not be read).
    pub digests: std::collections::BTreeMap<String, String>,
    /// `sha256:` of this verifier's executable, which every result must name.
    pub verifier_sha256: String,
    /// Results of several bundles (a suite's): each bundle takes those naming its manifest and ignores the
    /// others, instead of failing on them.
    pub of_several_bundles: bool,
}

impl ShardResults {
    /// Reads every file given; a directory stands for every `*.json` file in it.
    ///
    /// # Errors
    /// A directory that cannot be listed.
    pub fn read(paths: &[std::path::PathBuf], verifier_sha256: String) -> Result<ShardResults, String> {
        let mut files = Vec::new();
        for path in paths {
            if path.is_dir() {
                let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?
                    .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                    .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
                    .collect();
                found.sort();
                files.extend(found);
            } else {
                files.push(path.clone());
            }
        }
        let mut digests = std::collections::BTreeMap::new();
        let results = files
            .into_iter()
            .map(|path| {
                let name = path.display().to_string();
                let read = safe_fs::read_regular(&path, MAX_SHARD_BYTES)
                    .map_err(|e| e.to_string())
                    .inspect(|bytes| {
                        digests.insert(name.clone(), crate::canonical::sha256_tagged(bytes));
                    })
                    .and_then(|bytes| crate::json::parse(&bytes).map_err(|e| format!("not strict JSON: {e}")))
                    .and_then(|value| {
                        serde_json::from_value::<ShardResult>(value)
                            .map_err(|e| format!("not a shard result: {e}"))
                    });
                (name, read)
            })
            .collect();
        Ok(ShardResults { results, digests, verifier_sha256, of_several_bundles: false })
    }
}

/// `embedding.values` from shard results: the evidence an unsharded run gives, or what is wrong, named.
pub(crate) fn merge(
    shards: &ShardResults,
    manifest_sha256: Option<&str>,
    identity: &Value,
    documents: usize,
    queries: usize,
) -> Result<String, String> {
    let Some(manifest_sha256) = manifest_sha256 else {
        return Err(
            "shard results are taken only by verify-bundle (they are bound to a bundle's manifest)".into()
        );
    };
    if shards.results.is_empty() {
        return Err("no shard result was given".into());
    }
    let total = documents + queries;
    let results: Vec<&(String, Result<ShardResult, String>)> = shards
        .results
        .iter()
        .filter(|(_, result)| {
            !shards.of_several_bundles
                || result.as_ref().map_or(true, |result| result.bundle_manifest_sha256 == manifest_sha256)
        })
        .collect();
    if results.is_empty() {
        return Err(format!("no shard result names this bundle's manifest ({manifest_sha256})"));
    }
    let mut covered: Vec<(Range<usize>, &str, Slice)> = Vec::new();
    let mut ran: Vec<&Ran> = Vec::new();
    let mut sources: Vec<(Slice, String)> = Vec::new();
    for (name, result) in results {
        let result = result.as_ref().map_err(|reason| format!("{name}: {reason}"))?;
        let slice = result.slice;
        let of = |what: String| format!("{name} (slice {slice}): {what}");
        if result.schema != SHARD_SCHEMA {
            return Err(of(format!("schema {:?}, expected {SHARD_SCHEMA:?}", result.schema)));
        }
        if result.bundle_manifest_sha256 != manifest_sha256 {
            return Err(of(format!(
                "made for another bundle (manifest {}), not this one ({manifest_sha256})",
                or_none(&result.bundle_manifest_sha256)
            )));
        }
        if result.verifier_sha256 != shards.verifier_sha256 {
            return Err(of(format!(
                "made by another verifier executable ({}), not this one ({})",
                result.verifier_sha256, shards.verifier_sha256
            )));
        }
        if &result.model != identity {
            return Err(of("re-embedded with another model identity than the fixture declares".into()));
        }
        // More slices than texts is refused: naming the slices a gap falls in walks them one by one.
        if slice.index >= slice.count || slice.count > total.max(1) {
            return Err(of(format!(
                "not one of at most {} slices of the bundle's {total} texts",
                total.max(1)
            )));
        }
        if (result.documents, result.queries) != (documents, queries) {
            return Err(of(format!(
                "counts {} documents and {} queries, the bundle {documents} and {queries}",
                result.documents, result.queries
            )));
        }
        if result.texts != slice.range(total) {
            return Err(of(format!(
                "holds texts {}..{}, the slice is {}..{}",
                result.texts.start,
                result.texts.end,
                slice.range(total).start,
                slice.range(total).end
            )));
        }
        match &result.finding {
            Finding::Equal => {}
            Finding::Differs(reason) => return Err(of(reason.clone())),
            Finding::Failed(reason) => return Err(of(format!("could not re-embed: {reason}"))),
        }
        if let Some(r) = &result.ran {
            ran.push(r);
        }
        let kernels = result
            .ran
            .as_ref()
            .map_or_else(|| "kernels unstated".to_owned(), |r| format!("{} kernels", r.kernels));
        let digest = shards.digests.get(name).map_or("no digest", String::as_str);
        sources.push((slice, format!("slice {slice} {name} ({digest}, {kernels})")));
        covered.push((result.texts.clone(), name.as_str(), slice));
    }
    covered.sort_by_key(|(range, _, _)| (range.start, range.end));
    let mut next = 0;
    for (range, name, slice) in &covered {
        if range.start < next {
            let overlaps = |other: &Range<usize>| other.start < range.end && range.start < other.end;
            let first = covered.iter().find(|(other, other_name, _)| other_name != name && overlaps(other));
            let (first, first_slice) = first.map_or(("another", *slice), |(_, n, s)| (*n, *s));
            return Err(format!(
                "texts {}..{} are covered twice: by {first} (slice {first_slice}) and {name} (slice {slice})",
                range.start,
                next.min(range.end)
            ));
        }
        if range.start > next {
            return Err(missing(next..range.start, (documents, total), &covered));
        }
        next = range.end;
    }
    if next < total {
        return Err(missing(next..total, (documents, total), &covered));
    }
    let Some(first) = ran.first() else { return Err("no shard result says what re-embedded".into()) };
    let mut kernels: Vec<&str> = ran.iter().map(|r| r.kernels.as_str()).collect();
    kernels.sort_unstable();
    kernels.dedup();
    let merged = Ran {
        backend: first.backend.clone(),
        backend_version: first.backend_version.clone(),
        kernels: kernels.join(", "),
    };
    sources.sort_by_key(|(slice, _)| slice.index);
    let listed: Vec<String> = sources.into_iter().map(|(_, source)| source).collect();
    Ok(format!(
        "{}; taken from {} shard results, not re-embedded in this process: {}. A shard result is the verifying \
         party's own unsigned intermediate: its bindings (this bundle, this executable, the declared model, the \
         slice) catch a stale or foreign result, never one written by hand",
        merged.sentence(identity, documents, documents, queries),
        listed.len(),
        listed.join("; ")
    ))
}

fn or_none(digest: &str) -> &str {
    if digest.is_empty() { "none: it could not read one" } else { digest }
}

/// The error for texts no result covers, naming the slices that would have: the slices of the bundle's `total`
/// texts (never of the largest end a result covers, which names a present slice when the last one is missing).
fn missing(
    gap: Range<usize>,
    (documents, total): (usize, usize),
    covered: &[(Range<usize>, &str, Slice)],
) -> String {
    let count = covered.first().map_or(0, |(_, _, slice)| slice.count);
    let absent: Vec<String> = (0..count)
        .map(|index| Slice { index, count })
        .filter(|slice| {
            let range = slice.range(total);
            range.start < gap.end && gap.start < range.end && !range.is_empty()
        })
        .map(|slice| slice.to_string())
        .collect();
    let what =
        |i: usize| if i < documents { format!("document {i}") } else { format!("query {}", i - documents) };
    format!(
        "texts {}..{} ({} to {}) are covered by no shard result{}",
        gap.start,
        gap.end,
        what(gap.start),
        what(gap.end - 1),
        if absent.is_empty() { String::new() } else { format!(": slice {} is missing", absent.join(", ")) }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_of_more_slices_than_texts_is_refused_at_once() {
        let identity = serde_json::json!({"model": "m"});
        let result = ShardResult {
            schema: SHARD_SCHEMA.into(),
            bundle_manifest_sha256: "sha256:b".into(),
            verifier_sha256: "sha256:v".into(),
            model: identity.clone(),
            slice: Slice { index: 0, count: usize::MAX },
            documents: 3,
            queries: 2,
            texts: 0..0,
            ran: None,
            finding: Finding::Equal,
        };
        let shards = ShardResults {
            results: vec![("r.json".into(), Ok(result))],
            digests: std::collections::BTreeMap::new(),
            verifier_sha256: "sha256:v".into(),
            of_several_bundles: false,
        };
        let refused = merge(&shards, Some("sha256:b"), &identity, 3, 2).unwrap_err();
        assert!(refused.contains("not one of at most 5 slices"), "{refused}");
    }

    /// With slices 1 and 3 of 4 missing from 10 texts, the first gap is slice 1 alone: recomputed against the
    /// largest end covered (7), slice 2/4, which is there, was named too.
    #[test]
    fn the_missing_slice_named_is_the_missing_one() {
        let identity = serde_json::json!({"model": "m"});
        let result = |index: usize| ShardResult {
            schema: SHARD_SCHEMA.into(),
            bundle_manifest_sha256: "sha256:b".into(),
            verifier_sha256: "sha256:v".into(),
            model: identity.clone(),
            slice: Slice { index, count: 4 },
            documents: 6,
            queries: 4,
            texts: Slice { index, count: 4 }.range(10),
            ran: None,
            finding: Finding::Equal,
        };
        let shards = ShardResults {
            results: vec![("a.json".into(), Ok(result(0))), ("c.json".into(), Ok(result(2)))],
            digests: std::collections::BTreeMap::new(),
            verifier_sha256: "sha256:v".into(),
            of_several_bundles: false,
        };
        let refused = merge(&shards, Some("sha256:b"), &identity, 6, 4).unwrap_err();
        assert!(refused.contains("texts 2..5"), "{refused}");
        assert!(refused.ends_with("slice 1/4 is missing"), "{refused}");
    }

    #[test]
    fn slices_tile_the_texts() {
        for total in [0, 1, 7, 5483] {
            for count in 1..=9 {
                let mut next = 0;
                for index in 0..count {
                    let range = Slice { index, count }.range(total);
                    assert_eq!(range.start, next);
                    next = range.end;
                }
                assert_eq!(next, total);
            }
        }
    }
}
