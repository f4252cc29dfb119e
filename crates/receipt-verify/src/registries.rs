//! The registries that give a bundle's names their meaning, read by this verifier's own code from the files the
//! runner builds in too: the checkpoints known by name (`configs/models.json`) and BEIR's datasets with the md5
//! of each published zip (`configs/beir-datasets.json`). A name in a bundle is a claim about bytes; these say
//! which bytes.

use std::collections::BTreeMap;

use serde_json::Value;

/// The checkpoints known by name.
const MODELS: &str = include_str!("../../../configs/models.json");
/// BEIR's datasets.
const DATASETS: &str = include_str!("../../../configs/beir-datasets.json");

/// The prefix of a checkpoint named by its weights' digest.
pub(crate) const DIGEST_NAME_PREFIX: &str = "bert-sha256-";

/// A checkpoint the registry names: file to lowercase hex sha256, and what its vectors must be made with
/// (`requires`: the identity's `pooling`, `max_tokens`, `normalization`), whether or not its files are pinned.
struct Known {
    name: String,
    files: BTreeMap<String, String>,
    requires: Option<Value>,
}

fn known() -> Result<Vec<Known>, String> {
    let registry: Value =
        serde_json::from_str(MODELS).map_err(|e| format!("configs/models.json as built in: {e}"))?;
    if registry["schema"] != "scifact-audit-model-registry-v2" {
        return Err(format!("configs/models.json has schema {}", registry["schema"]));
    }
    registry["models"]
        .as_array()
        .ok_or("configs/models.json lists no models")?
        .iter()
        .map(|model| {
            let name = model["name"].as_str().ok_or("a registry model without a name")?.to_owned();
            let files = model["files"]
                .as_object()
                .ok_or_else(|| format!("{name}: no files"))?
                .iter()
                .map(|(file, digest)| {
                    digest
                        .as_str()
                        .filter(|d| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()))
                        .map(|d| (file.clone(), d.to_owned()))
                        .ok_or_else(|| format!("{name}: {file}: not a sha256"))
                })
                .collect::<Result<_, String>>()?;
            let requires = model.get("requires").cloned();
            if let Some(requires) = &requires {
                let fields: Vec<&str> =
                    requires.as_object().into_iter().flatten().map(|(k, _)| k.as_str()).collect();
                if fields != ["max_tokens", "normalization", "pooling"] {
                    return Err(format!(
                        "{name}: requires {requires}: not pooling, max_tokens and normalization"
                    ));
                }
            }
            Ok(Known { name, files, requires })
        })
        .collect()
}

/// The digests (file name to lowercase hex sha256) an embedding identity declares: its weights and tokenizer,
/// and the sentence-transformers files it lists.
pub(crate) fn declared_digests(identity: &Value) -> BTreeMap<String, String> {
    let hex = |value: &Value| value.as_str().map(|d| d.trim_start_matches("sha256:").to_owned());
    let mut digests = BTreeMap::new();
    for (field, file) in [("weights_sha256", "model.safetensors"), ("tokenizer_sha256", "tokenizer.json")] {
        if let Some(digest) = hex(&identity[field]) {
            digests.insert(file.to_owned(), digest);
        }
    }
    for (file, digest) in identity["files"].as_object().into_iter().flatten() {
        if let Some(digest) = hex(digest) {
            digests.insert(file.clone(), digest);
        }
    }
    digests
}

/// Why `digests` are not those of `known`, if they are not.
fn mismatch(known: &Known, digests: &BTreeMap<String, String>) -> Option<String> {
    for file in ["model.safetensors", "tokenizer.json"] {
        if !digests.contains_key(file) {
            return Some(format!("no digest of {file} is declared"));
        }
    }
    digests.iter().find_map(|(file, digest)| match known.files.get(file) {
        Some(published) if published == digest => None,
        Some(published) => {
            Some(format!("{file} has sha256 {digest}, {}'s published {file} has {published}", known.name))
        }
        None => Some(format!(
            "{file} (sha256 {digest}) is not among the files the registry pins for {}",
            known.name
        )),
    })
}

/// Why an embedding `identity` is not read the way the registry entry `name` requires, if it is not (and the
/// entry requires anything).
pub(crate) fn unmet_requirement(name: &str, identity: &Value) -> Result<Option<String>, String> {
    let known = known()?;
    let Some(requires) = known.iter().find(|k| k.name == name).and_then(|k| k.requires.as_ref()) else {
        return Ok(None);
    };
    for field in ["pooling", "max_tokens", "normalization"] {
        if identity[field] != requires[field] {
            return Ok(Some(format!(
                "the bundle names the model {name}, whose registry entry requires {field} {}, but its identity \
                 records {}: read that way, the checkpoint is not {name}",
                requires[field], identity[field]
            )));
        }
    }
    Ok(None)
}

/// What a model name says of these digests: `Ok(evidence)` when `name` is a registry name whose every file
/// `digests` match, or the digest name of these weights; `Err(reason)` otherwise.
pub(crate) fn judge_name(name: &str, digests: &BTreeMap<String, String>) -> Result<String, String> {
    let known = known()?;
    if let Some(entry) = known.iter().find(|k| k.name == name) {
        return match mismatch(entry, digests) {
            None => Ok(format!(
                "a registry name whose every declared file digest ({}) is the registry's (configs/models.json)",
                digests.len()
            )),
            Some(reason) => {
                Err(format!("the bundle names the model {name}, but {reason}: the name is not these bytes'"))
            }
        };
    }
    let weights = digests.get("model.safetensors").map_or("", String::as_str);
    if let Some(hex) = name.strip_prefix(DIGEST_NAME_PREFIX) {
        if hex != weights || weights.is_empty() {
            return Err(format!("the model is named {name}, but its weights' sha256 is {weights:?}"));
        }
        let also = known
            .iter()
            .find(|k| mismatch(k, digests).is_none())
            .map_or(String::new(), |k| format!(" (the registry's {})", k.name));
        return Ok(format!("named by its weights' digest, as a checkpoint of no registry name is{also}"));
    }
    Err(format!(
        "the model is named {name:?}, which is neither a registry name (configs/models.json) nor its weights' digest ({DIGEST_NAME_PREFIX}{weights})"
    ))
}

/// BEIR's registry entry named exactly `name`.
fn dataset_entry(name: &str) -> Option<Value> {
    let mut registry: Value = serde_json::from_str(DATASETS).ok()?;
    let all = registry["datasets"].as_array_mut()?;
    let at = all.iter().position(|d| d["name"] == name)?;
    Some(all.swap_remove(at))
}

/// The entry of `dataset`, or for `<dataset>/<forum>` of its dataset.
fn dataset_or_parent(dataset: &str) -> Option<Value> {
    dataset_entry(dataset).or_else(|| dataset_entry(dataset.split('/').next().unwrap_or(dataset)))
}

/// BEIR's md5 of the zip that holds `dataset` (a registered name; a forum's is its parent's), if BEIR publishes one.
pub(crate) fn beir_md5(dataset: &str) -> Option<String> {
    dataset_or_parent(dataset)?["md5"].as_str().map(str::to_owned)
}

/// Whether BEIR's registry names `dataset` (or, for `<dataset>/<forum>`, its dataset).
pub(crate) fn is_beir_dataset(dataset: &str) -> bool {
    dataset_or_parent(dataset).is_some()
}

/// Whether a fixture's dataset has published rows, so that its bundle must carry `published.json`: one of
/// BEIR's datasets, not an archive named only by its folder (nor the tiny stand-in).
pub(crate) fn has_published_rows(metadata: &Value) -> bool {
    metadata["registered"] != false && is_beir_dataset(metadata["profile"].as_str().unwrap_or(""))
}

/// The forums BEIR's registry lists for `dataset` (as `<dataset>/<forum>`), or `None` when it lists none: a
/// dataset of forums is their unweighted mean, so a suite's row of it must hold exactly these.
pub(crate) fn forums(dataset: &str) -> Option<Vec<String>> {
    let entry = dataset_entry(dataset)?;
    let names: Vec<String> = entry["forums"]
        .as_array()?
        .iter()
        .filter_map(|f| f["name"].as_str())
        .map(|f| format!("{dataset}/{f}"))
        .collect();
    (!names.is_empty()).then_some(names)
}

/// Whose archive a fixture's metadata records, judged from its md5: `Ok` when it is BEIR's published file of the
/// dataset, `Err(statement)` saying what it is instead. The tiny stand-in and an unregistered archive are never
/// BEIR's.
pub(crate) fn archive_standing(metadata: &Value) -> Result<String, String> {
    let dataset = metadata["profile"].as_str().unwrap_or("");
    let md5 = metadata["source"]["archive_md5"].as_str().unwrap_or("");
    if metadata["registered"] == false {
        return Err(format!(
            "an archive in BEIR's layout whose name, {dataset}, is only its folder's (md5 {md5})"
        ));
    }
    match beir_md5(dataset) {
        Some(beir) if beir == md5 => Ok(format!("BEIR's published {dataset} archive (md5 {md5})")),
        Some(beir) => Err(format!(
            "an archive of {dataset}'s shape, not BEIR's published file (md5 {md5}, BEIR's {beir})"
        )),
        None => Err(format!("an archive of {dataset}, which BEIR does not publish (md5 {md5})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINILM_WEIGHTS: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
    const MINILM_TOKENIZER: &str = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037";

    fn digests(weights: &str, tokenizer: &str) -> BTreeMap<String, String> {
        [("model.safetensors", weights), ("tokenizer.json", tokenizer)]
            .into_iter()
            .map(|(f, d)| (f.to_owned(), d.to_owned()))
            .collect()
    }

    #[test]
    fn a_bge_name_holds_only_read_as_bge() {
        let read = |pooling: &str, max_tokens: usize, normalization: &str| serde_json::json!({"pooling": pooling, "max_tokens": max_tokens, "normalization": normalization});
        let bge = "BAAI/bge-small-en-v1.5";
        assert_eq!(unmet_requirement(bge, &read("cls", 512, "l2")).unwrap(), None);
        for (identity, field) in [
            (read("mean", 512, "l2"), "pooling"),
            (read("cls", 256, "l2"), "max_tokens"),
            (read("cls", 512, "none"), "normalization"),
        ] {
            let reason = unmet_requirement(bge, &identity).unwrap().unwrap();
            assert!(reason.contains(&format!("requires {field}")), "{reason}");
        }
        // MiniLM is held to its files where present, and to its reading where they are not.
        let minilm = "sentence-transformers/all-MiniLM-L6-v2";
        assert_eq!(unmet_requirement(minilm, &read("mean", 256, "l2")).unwrap(), None);
        let reason = unmet_requirement(minilm, &read("cls", 256, "l2")).unwrap().unwrap();
        assert!(reason.contains("requires pooling"), "{reason}");
    }

    #[test]
    fn a_registry_name_holds_only_beside_its_own_digests() {
        let minilm = digests(MINILM_WEIGHTS, MINILM_TOKENIZER);
        assert!(judge_name("sentence-transformers/all-MiniLM-L6-v2", &minilm).is_ok());
        let other = digests(&"a".repeat(64), MINILM_TOKENIZER);
        let refused = judge_name("sentence-transformers/all-MiniLM-L6-v2", &other).unwrap_err();
        assert!(refused.contains("model.safetensors has sha256 aaaa"), "{refused}");
        assert!(judge_name("BAAI/bge-base-en-v1.5", &minilm).unwrap_err().contains("bge-base"));
        // Named by its digest: allowed, and the registry's name is mentioned when the bytes are an entry's.
        let by_digest = judge_name(&format!("bert-sha256-{MINILM_WEIGHTS}"), &minilm).unwrap();
        assert!(by_digest.contains("all-MiniLM-L6-v2"), "{by_digest}");
        assert!(judge_name(&format!("bert-sha256-{}", "b".repeat(64)), &minilm).is_err());
        assert!(judge_name("my-favourite-model", &minilm).unwrap_err().contains("neither a registry name"));
        let mut extra = minilm.clone();
        extra.insert("sentence_bert_config.json".into(), "c".repeat(64));
        assert!(judge_name("sentence-transformers/all-MiniLM-L6-v2", &extra).is_err());
        // e5-base-v2's weights alone are pinned: its name is refused beside other weights, and cannot be
        // carried by a directory whose tokenizer nobody pinned twice.
        let e5 = "d0d559c47d5f71b1d280b13b62a2657f3e3bc70c0786f9ab91a36545e6a8f693";
        assert!(judge_name("intfloat/e5-base-v2", &minilm).unwrap_err().contains("e5-base-v2"));
        assert!(judge_name("intfloat/e5-base-v2", &digests(e5, MINILM_TOKENIZER)).is_err());
    }

    #[test]
    fn an_archive_is_beirs_only_with_beirs_md5() {
        let beir = beir_md5("nfcorpus").unwrap();
        let of = |md5: &str, registered: bool| serde_json::json!({"profile": "nfcorpus", "registered": registered, "source": {"archive_md5": md5}});
        assert!(archive_standing(&of(&beir, true)).is_ok());
        let other = archive_standing(&of("0123", true)).unwrap_err();
        assert!(other.contains("not BEIR's published file (md5 0123, BEIR's"), "{other}");
        assert!(archive_standing(&of(&beir, false)).is_err());
        assert_eq!(beir_md5("cqadupstack/android"), beir_md5("cqadupstack"));
        assert!(beir_md5("cqadupstack").is_some());
        let forums = forums("cqadupstack").unwrap();
        assert_eq!(forums.len(), 12);
        assert!(forums.contains(&"cqadupstack/android".to_owned()));
        assert_eq!(super::forums("nfcorpus"), None);
        assert!(is_beir_dataset("scifact") && is_beir_dataset("cqadupstack/android"));
        assert!(!is_beir_dataset("tiny") && !is_beir_dataset("made-up"));
        let of = |profile: &str, registered: bool| serde_json::json!({"profile": profile, "registered": registered});
        assert!(
            has_published_rows(&of("nfcorpus", true)) && has_published_rows(&of("cqadupstack/android", true))
        );
        assert!(!has_published_rows(&of("nfcorpus", false)) && !has_published_rows(&of("tiny", true)));
        let tiny = serde_json::json!({"profile": "tiny", "source": {"archive_md5": "00"}});
        assert!(archive_standing(&tiny).is_err());
    }
}
