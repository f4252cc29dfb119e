//! The checkpoints known by name (`configs/models.json`, built in): a name is a claim about bytes, so a
//! checkpoint carries a registry name only when every file that shapes its vectors has the digest the registry
//! lists for it. Any other checkpoint is named by its weights' digest. The verifier reads the same file with its
//! own parser and applies the same rule, so a name the runner would not give fails verification too.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{Error, Result};

/// The registry file, as built into this crate.
pub const MODEL_REGISTRY: &str = include_str!("../../../configs/models.json");

/// The schema the registry file declares.
const SCHEMA: &str = "scifact-audit-model-registry-v2";

/// One checkpoint known by name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KnownModel {
    /// The name a bundle records (the checkpoint's repository id).
    pub name: String,
    /// The upstream revision the sources pin.
    pub revision: String,
    /// File name (as in the checkpoint directory) to lowercase hex sha256.
    pub files: BTreeMap<String, String>,
    /// What the checkpoint's vectors must be made with (bge's pooling, window and normalization, whose files
    /// the registry does not pin; all-MiniLM-L6-v2's, for a directory without its pinned files): a checkpoint
    /// read otherwise is not this model.
    #[serde(default)]
    pub requires: Option<Requires>,
}

/// How a registry model's vectors are made, in the words of its [`crate::EmbedderIdentity`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// The identity's `pooling` (`cls`, `mean`, ...).
    pub pooling: String,
    /// The identity's `max_tokens`.
    pub max_tokens: usize,
    /// The identity's `normalization` (`l2` or `none`).
    pub normalization: String,
}

#[derive(Deserialize)]
struct RegistryFile {
    schema: String,
    models: Vec<KnownModel>,
}

/// The digests of a checkpoint directory: every file that shapes its vectors, by name, hex sha256
/// (`model.safetensors` and `tokenizer.json` always among them).
pub type Digests = BTreeMap<String, String>;

/// The checkpoints this build knows by name.
///
/// # Errors
/// [`Error::Model`] when the built-in file does not parse (a build from a broken tree).
pub fn known_models() -> Result<Vec<KnownModel>> {
    let file: RegistryFile = serde_json::from_str(MODEL_REGISTRY)
        .map_err(|error| Error::Model(format!("configs/models.json: {error}")))?;
    if file.schema != SCHEMA {
        return Err(Error::Model(format!("configs/models.json: schema {:?}, not {SCHEMA}", file.schema)));
    }
    Ok(file.models)
}

/// The registry entry `name` names, with or without its organisation (`all-MiniLM-L6-v2` for
/// `sentence-transformers/all-MiniLM-L6-v2`).
///
/// # Errors
/// As [`known_models`].
pub fn lookup(name: &str) -> Result<Option<KnownModel>> {
    Ok(known_models()?
        .into_iter()
        .find(|model| model.name == name || model.name.rsplit('/').next() == Some(name)))
}

/// Why `digests` are not `model`'s, or `None` when every file the checkpoint holds has the registry's digest.
/// A file the checkpoint holds that the registry does not pin is a reason too: its bytes shape the vectors
/// and nobody published them.
pub fn mismatch(model: &KnownModel, digests: &Digests) -> Option<String> {
    for (file, digest) in digests {
        match model.files.get(file) {
            Some(published) if published == digest => {}
            Some(published) => {
                return Some(format!(
                    "{file} has sha256 {digest}, {}'s published {file} has {published}",
                    model.name
                ));
            }
            None => {
                return Some(format!(
                    "{file} (sha256 {digest}) is not among the files the registry pins for {}",
                    model.name
                ));
            }
        }
    }
    ["model.safetensors", "tokenizer.json"]
        .into_iter()
        .find(|file| !digests.contains_key(*file))
        .map(|file| format!("the checkpoint's digests do not include {file}"))
}

/// Why a checkpoint read as `identity` says is not `model`, whose registry entry requires another pooling, window
/// or normalization; `None` when it requires nothing or `identity` meets it.
pub fn unmet(model: &KnownModel, identity: &crate::EmbedderIdentity) -> Option<String> {
    let required = model.requires.as_ref()?;
    let differs = |what: &str, has: String, needs: String| {
        (has != needs).then(|| {
            format!(
                "its {what} is {has}, {} requires {needs} (its own sentence-transformers files say so; \
                 without them a checkpoint is read with the defaults)",
                model.name
            )
        })
    };
    differs("pooling", identity.pooling.clone(), required.pooling.clone())
        .or_else(|| {
            differs(
                "window",
                format!("{} tokens", identity.max_tokens),
                format!("{} tokens", required.max_tokens),
            )
        })
        .or_else(|| differs("normalization", identity.normalization.clone(), required.normalization.clone()))
}

/// The registry name whose files `digests` match and whose requirements `identity` meets, if any.
///
/// # Errors
/// As [`known_models`].
pub fn name_of(digests: &Digests, identity: &crate::EmbedderIdentity) -> Result<Option<String>> {
    Ok(known_models()?
        .into_iter()
        .find(|model| mismatch(model, digests).is_none() && unmet(model, identity).is_none())
        .map(|model| model.name))
}

/// The name of a checkpoint no registry entry matches: its weights' digest.
pub fn digest_name(weights_sha256: &str) -> String {
    format!("bert-sha256-{weights_sha256}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minilm() -> KnownModel {
        lookup("all-MiniLM-L6-v2").unwrap().unwrap()
    }

    /// An identity as a checkpoint read with `pooling`, `max_tokens` and `normalization` has.
    fn read_as(pooling: &str, max_tokens: usize, normalization: &str) -> crate::EmbedderIdentity {
        crate::EmbedderIdentity {
            model: "bert-sha256-00".into(),
            dims: 384,
            weights_sha256: None,
            tokenizer_sha256: None,
            max_tokens,
            pooling: pooling.into(),
            normalization: normalization.into(),
            backend: crate::BACKEND.into(),
            backend_version: "0".into(),
            overlong_policy: format!("truncate to {max_tokens} tokens"),
            files: None,
            prompts: None,
            lower_case: None,
        }
    }

    #[test]
    fn every_entry_pins_its_weights_with_sha256_hex_and_the_named_ones_their_tokenizer() {
        let models = known_models().unwrap();
        assert!(models.len() >= 4);
        for model in &models {
            assert!(model.files.contains_key("model.safetensors"), "{}: model.safetensors", model.name);
            // Every entry that names bytes people run (MiniLM, bge) pins the tokenizer too; e5-base-v2's
            // tokenizer had one public source, so that entry only refuses its name beside other weights.
            if model.name != "intfloat/e5-base-v2" {
                assert!(model.files.contains_key("tokenizer.json"), "{}: tokenizer.json", model.name);
            }
            for (file, digest) in &model.files {
                assert!(
                    digest.len() == 64
                        && digest.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                    "{}: {file}: {digest}",
                    model.name
                );
            }
        }
        let names: std::collections::BTreeSet<&str> = models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names.len(), models.len(), "names are unique");
        // The runner's pinned constants and the registry agree.
        assert_eq!(minilm().name, crate::ALL_MINILM_L6_V2);
        assert_eq!(minilm().files["model.safetensors"], crate::ALL_MINILM_L6_V2_WEIGHTS_SHA256);
        for (file, digest) in crate::ALL_MINILM_L6_V2_FILES {
            assert_eq!(minilm().files[file], digest, "{file}");
        }
    }

    #[test]
    fn a_name_needs_every_file_it_holds_to_be_the_registry_s() {
        let model = minilm();
        let all = model.files.clone();
        assert_eq!(mismatch(&model, &all), None);
        assert_eq!(
            name_of(&all, &read_as("mean", 256, "l2")).unwrap().as_deref(),
            Some(crate::ALL_MINILM_L6_V2)
        );
        // A subset that holds weights and tokenizer is still the model (a directory without the optional
        // sentence-transformers files).
        let core: Digests = all
            .iter()
            .filter(|(f, _)| f.ends_with("safetensors") || *f == "tokenizer.json")
            .map(|(f, d)| (f.clone(), d.clone()))
            .collect();
        assert_eq!(mismatch(&model, &core), None);
        let mut other_weights = all.clone();
        other_weights.insert("model.safetensors".into(), "0".repeat(64));
        assert!(mismatch(&model, &other_weights).unwrap().contains("model.safetensors has sha256 000"));
        assert_eq!(name_of(&other_weights, &read_as("mean", 256, "l2")).unwrap(), None);
        let mut other_config = all.clone();
        other_config.insert("sentence_bert_config.json".into(), "1".repeat(64));
        assert!(mismatch(&model, &other_config).unwrap().contains("sentence_bert_config.json"));
        let mut extra = all.clone();
        extra.insert("2_Dense/config.json".into(), "2".repeat(64));
        assert!(mismatch(&model, &extra).unwrap().contains("not among the files the registry pins"));
        let mut no_tokenizer = all;
        no_tokenizer.remove("tokenizer.json");
        assert!(mismatch(&model, &no_tokenizer).unwrap().contains("tokenizer.json"));
    }

    /// bge's entry pins three files; a directory of just those is read with the defaults (mean pooling, 256
    /// tokens) and must not be called bge, whose own files say CLS pooling, 512 tokens, normalized.
    #[test]
    fn a_bge_name_needs_bges_pooling_window_and_normalization() {
        for name in ["BAAI/bge-small-en-v1.5", "BAAI/bge-base-en-v1.5"] {
            let bge = lookup(name).unwrap().unwrap();
            let three_files = bge.files.clone();
            assert_eq!(mismatch(&bge, &three_files), None);
            let as_published = read_as("cls", 512, "l2");
            assert_eq!(unmet(&bge, &as_published), None);
            assert_eq!(name_of(&three_files, &as_published).unwrap().as_deref(), Some(name));
            for (read, what) in [
                (read_as("mean", 256, "l2"), "its pooling is mean"),
                (read_as("cls", 256, "l2"), "its window is 256 tokens"),
                (read_as("cls", 512, "none"), "its normalization is none"),
            ] {
                let reason = unmet(&bge, &read).unwrap();
                assert!(reason.contains(what) && reason.contains(name), "{reason}");
                assert_eq!(name_of(&three_files, &read).unwrap(), None, "{what}");
            }
        }
    }

    /// all-MiniLM-L6-v2's files are pinned when present; its entry also says how it is read, so that a directory
    /// without its sentence-transformers files keeps the name only when the defaults read it as they do.
    #[test]
    fn a_minilm_name_needs_minilms_reading_too() {
        let minilm = minilm();
        assert_eq!(unmet(&minilm, &read_as("mean", 256, "l2")), None);
        for (read, what) in [
            (read_as("cls", 256, "l2"), "its pooling is cls"),
            (read_as("mean", 128, "l2"), "its window is 128 tokens"),
            (read_as("mean", 256, "none"), "its normalization is none"),
        ] {
            let reason = unmet(&minilm, &read).unwrap();
            assert!(reason.contains(what), "{reason}");
        }
    }

    #[test]
    fn names_are_found_with_or_without_their_organisation() {
        assert_eq!(lookup("BAAI/bge-small-en-v1.5").unwrap().unwrap().name, "BAAI/bge-small-en-v1.5");
        assert_eq!(lookup("bge-base-en-v1.5").unwrap().unwrap().name, "BAAI/bge-base-en-v1.5");
        assert_eq!(lookup("bge-huge").unwrap(), None);
        assert_eq!(digest_name("ab"), "bert-sha256-ab");
    }
}
