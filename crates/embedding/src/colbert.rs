//! Late-interaction encoders (ColBERT): a BERT checkpoint read as PyLate 1.6 reads it, each text one unit vector
//! per kept token, for MaxSim.
//!
//! Two layouts, each detected from its files:
//! - PyLate's own (`pylate.models.ColBERT.save`): `modules.json` with a `Transformer` and one or more Dense
//!   modules (`pylate.models.Dense.Dense`, or sentence-transformers' own), each applied in order, and the
//!   settings in `config_sentence_transformers.json` (`query_prefix`, `document_prefix`, `query_length`,
//!   `document_length`, `attend_to_expansion_tokens`, `skiplist_words`, `do_query_expansion`);
//! - Stanford's colbert-ai (`HF_ColBERT` in `config.json`'s `architectures`: colbert-ir/colbertv2.0,
//!   answerai-colbert-small-v1): the encoder's tensors beside a bias-free `linear.weight` in `model.safetensors`,
//!   the settings in `artifact.metadata` (`query_token_id`, `doc_token_id`, `query_maxlen`, `doc_maxlen`,
//!   `attend_to_mask_tokens`), PyLate's defaults for what it leaves out.
//!
//! A text is tokenized to its role's length less one, the role's marker token is inserted after `[CLS]`, and:
//! a query with expansion is padded with `[MASK]` to its length and keeps every position (attending to the
//! padding only when the checkpoint says so); a query without keeps its own tokens; a document keeps its tokens
//! but those of the skiplist (each word looked up as one token, `[UNK]` when the vocabulary lacks it, as PyLate's
//! `convert_tokens_to_ids` does). Every kept token's last hidden state goes through the Dense modules and is
//! divided by its L2 norm. The forward pass is this crate's: the same bits on every kernel.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::bert::{BACKEND, BACKEND_VERSION, Bert, Buffers, Config, Kernels};
use crate::checkpoint::{check_sizes, invalid, optional_json};
use crate::dense::{Dense, DenseSpec};
use crate::error::{Error, Result};
use crate::model_dir::{MAX_CONFIG_BYTES, MAX_TOKENIZER_BYTES, MAX_WEIGHTS_BYTES, ModelDir};
use crate::role::Role;
use crate::sha256_hex;

/// The prefix of the name a ColBERT checkpoint gets from its weights' digest.
pub const COLBERT_DIGEST_NAME_PREFIX: &str = "colbert-sha256-";

/// `string.punctuation`: PyLate's default skiplist, and colbert-ai's.
const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// Which of the two layouts a checkpoint has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ColbertLayout {
    /// PyLate's: a `Transformer` and Dense modules, settings in `config_sentence_transformers.json`.
    Pylate,
    /// colbert-ai's `HF_ColBERT`: `linear.weight` beside the encoder, settings in `artifact.metadata`.
    Stanford,
}

/// What a ColBERT encoder is, for receipts and bundles: every file that shapes a vector by its digest, and every
/// setting that decides which tokens are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColbertIdentity {
    /// The name: from the weights' digest (`colbert-sha256-<hex>`).
    pub model: String,
    /// The layout the files declare.
    pub layout: ColbertLayout,
    /// Each token vector's width: the last Dense module's output.
    pub dims: usize,
    /// The marker inserted after `[CLS]` in queries, and its id.
    pub query_marker: (String, u32),
    /// The marker inserted after `[CLS]` in documents, and its id.
    pub document_marker: (String, u32),
    /// Tokens a query is cut to (marker included) and, with expansion, padded to.
    pub query_length: usize,
    /// Tokens a document is cut to (marker included).
    pub document_length: usize,
    /// Whether queries are padded with `[MASK]` and keep every position.
    pub query_expansion: bool,
    /// Whether a query's tokens attend to its `[MASK]` padding.
    pub attend_to_expansion: bool,
    /// The token ids documents drop.
    pub skiplist: Vec<u32>,
    /// sha256 of every file read, by its path in the checkpoint.
    pub files: BTreeMap<String, String>,
    /// The forward pass that ran: [`BACKEND`].
    pub backend: String,
    /// Its version: [`BACKEND_VERSION`].
    pub backend_version: String,
}

/// One text's token vectors, row after row.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenVectors {
    /// `rows × dims` values, each row of unit length.
    pub values: Vec<f32>,
    /// The width of a row.
    pub dims: usize,
    /// Tokens the encoder saw (marker and padding included).
    pub tokens: usize,
}

impl TokenVectors {
    /// How many token vectors: the kept tokens.
    pub fn rows(&self) -> usize {
        self.values.len() / self.dims.max(1)
    }

    /// Each token vector.
    pub fn vectors(&self) -> impl Iterator<Item = &[f32]> {
        self.values.chunks_exact(self.dims.max(1))
    }
}

/// A ColBERT encoder, loaded.
pub struct ColbertEncoder {
    bert: Bert,
    kernels: Kernels,
    /// The tokenizer cut to each role's length less one: queries', documents'.
    tokenizers: [Tokenizer; 2],
    lower_case: bool,
    dense: Vec<(Dense, crate::bert::gemm::Packed)>,
    mask_id: u32,
    skiplist: BTreeSet<u32>,
    identity: ColbertIdentity,
    batch_size: usize,
}

/// Whether a module type names a Dense projection PyLate applies (its own, or sentence-transformers').
fn is_dense(kind: &str) -> bool {
    kind == "pylate.models.Dense.Dense"
        || kind.starts_with("sentence_transformers.") && kind.ends_with(".Dense")
}

impl ColbertEncoder {
    /// Whether `dir` holds a ColBERT checkpoint: PyLate's (`modules.json` with a PyLate Dense module, or
    /// `config_sentence_transformers.json`'s `model_type` `ColBERT`) or colbert-ai's (`HF_ColBERT`).
    ///
    /// # Errors
    /// A file that cannot be read or parsed.
    pub fn is_colbert(dir: &Path) -> Result<bool> {
        let model_dir = ModelDir::open(dir)?;
        if let Some((_, modules)) = optional_json(&model_dir, &dir.join("modules.json"), "modules.json")?
            && modules
                .as_array()
                .into_iter()
                .flatten()
                .any(|m| m["type"].as_str().is_some_and(|t| t.starts_with("pylate.")))
        {
            return Ok(true);
        }
        let settings = dir.join("config_sentence_transformers.json");
        if let Some((_, value)) = optional_json(&model_dir, &settings, "config_sentence_transformers.json")?
            && value["model_type"] == "ColBERT"
        {
            return Ok(true);
        }
        let Some((_, config)) = optional_json(&model_dir, &dir.join("config.json"), "config.json")? else {
            return Ok(false);
        };
        Ok(config["architectures"].as_array().into_iter().flatten().any(|a| a == "HF_ColBERT"))
    }

    /// Loads the ColBERT checkpoint in `dir`, named by its weights' digest (`colbert-sha256-<weights>`).
    ///
    /// # Errors
    /// [`Error::Io`] for a missing file; [`Error::InvalidModelFile`] naming the file and the field for anything
    /// this crate cannot run as PyLate does: another architecture, a Dense module whose input is not the
    /// encoder's (or the module before it's) width, a marker the vocabulary lacks, a length of 0, of 1 (no room
    /// for the marker) or beyond the positions, a prompt applied by default, a weight that is not finite.
    pub fn load(dir: &Path) -> Result<ColbertEncoder> {
        ColbertEncoder::load_with(dir, Kernels::best())
    }

    /// [`ColbertEncoder::load`] on `kernels` instead of the fastest this CPU has: every kind gives the same
    /// bits, which this exists to show.
    ///
    /// # Errors
    /// As [`ColbertEncoder::load`], or [`Error::InvalidModelFile`] when this CPU cannot run `kernels`.
    pub fn load_with(dir: &Path, kernels: Kernels) -> Result<ColbertEncoder> {
        if !Kernels::available().contains(&kernels) {
            return Err(invalid(dir, format!("this CPU cannot run the {kernels:?} kernels")));
        }
        let model_dir = ModelDir::open(dir)?;
        let mut files = BTreeMap::new();
        let config_path = dir.join("config.json");
        let config_bytes = model_dir.read("config.json", MAX_CONFIG_BYTES)?;
        files.insert("config.json".to_owned(), sha256_hex(&config_bytes));
        let raw: Value = serde_json::from_slice(&config_bytes)
            .map_err(|error| invalid(&config_path, format!("not JSON: {error}")))?;
        let stanford = raw["architectures"].as_array().into_iter().flatten().any(|a| a == "HF_ColBERT");
        check_bert(&config_path, &raw, stanford)?;
        let config: Config = serde_json::from_value(raw).map_err(|error| invalid(&config_path, error))?;
        check_sizes(&config_path, &config)?;
        if config.hidden_act != "gelu" {
            return Err(invalid(&config_path, format!("hidden_act {:?} is not \"gelu\"", config.hidden_act)));
        }
        let positions = config.max_sequence();
        let hidden = config.hidden_size;

        let mut lower_case = false;
        if let Some((bytes, value)) =
            optional_json(&model_dir, &dir.join("sentence_bert_config.json"), "sentence_bert_config.json")?
        {
            files.insert("sentence_bert_config.json".to_owned(), sha256_hex(&bytes));
            if let Some(flag) = value.get("do_lower_case").filter(|v| !v.is_null()) {
                lower_case = flag.as_bool().ok_or_else(|| {
                    invalid(
                        &dir.join("sentence_bert_config.json"),
                        format!("do_lower_case {flag} is not a boolean"),
                    )
                })?;
            }
        }
        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer_bytes = model_dir.read("tokenizer.json", MAX_TOKENIZER_BYTES)?;
        files.insert("tokenizer.json".to_owned(), sha256_hex(&tokenizer_bytes));
        let mut tokenizer =
            Tokenizer::from_bytes(&tokenizer_bytes).map_err(|error| invalid(&tokenizer_path, error))?;
        tokenizer.with_padding(None);
        let tokenizer_vocab = tokenizer.get_vocab_size(true);
        if tokenizer_vocab > config.vocab_size {
            return Err(invalid(
                &tokenizer_path,
                format!(
                    "holds {tokenizer_vocab} tokens, config.json's vocab_size is {}: a token would have no embedding",
                    config.vocab_size
                ),
            ));
        }
        let special = |name: &str, default: &str| -> Result<String> {
            let path = dir.join("tokenizer_config.json");
            let value = optional_json(&model_dir, &path, "tokenizer_config.json")?.map(|(_, v)| v);
            Ok(value
                .and_then(|v| v.get(name).and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| default.to_owned()))
        };
        if let Some(bytes) = model_dir.read_optional("tokenizer_config.json", MAX_CONFIG_BYTES)? {
            files.insert("tokenizer_config.json".to_owned(), sha256_hex(&bytes));
        }
        let token_id = |token: &str, field: &str, file: &Path| -> Result<u32> {
            tokenizer.token_to_id(token).ok_or_else(|| {
                invalid(file, format!("{field} {token:?} is not a token of tokenizer.json's vocabulary"))
            })
        };
        let mask_token = special("mask_token", "[MASK]")?;
        let mask_id = token_id(&mask_token, "mask_token", &dir.join("tokenizer_config.json"))?;
        let unk_id = tokenizer.token_to_id(&special("unk_token", "[UNK]")?);

        let weights_path = dir.join("model.safetensors");
        let weights = model_dir.read("model.safetensors", MAX_WEIGHTS_BYTES)?;
        let weights_sha256 = sha256_hex(&weights);
        files.insert("model.safetensors".to_owned(), weights_sha256.clone());
        if let Some(reason) = crate::bert::first_non_finite(&weights) {
            return Err(invalid(&weights_path, reason));
        }

        let settings = if stanford {
            let path = dir.join("artifact.metadata");
            let metadata = match optional_json(&model_dir, &path, "artifact.metadata")? {
                Some((bytes, value)) => {
                    files.insert("artifact.metadata".to_owned(), sha256_hex(&bytes));
                    value
                }
                None => Value::Null,
            };
            Settings::stanford(&path, &metadata)?
        } else {
            let path = dir.join("config_sentence_transformers.json");
            let (bytes, value) = optional_json(&model_dir, &path, "config_sentence_transformers.json")?
                .ok_or_else(|| invalid(&path, "missing: a PyLate checkpoint keeps its settings there"))?;
            files.insert("config_sentence_transformers.json".to_owned(), sha256_hex(&bytes));
            Settings::pylate(&path, &value)?
        };
        let settings_file = if stanford { "artifact.metadata" } else { "config_sentence_transformers.json" };
        let settings_path = dir.join(settings_file);
        for (field, length) in
            [("query length", settings.query_length), ("document length", settings.document_length)]
        {
            if length < 2 || length > positions {
                return Err(invalid(
                    &settings_path,
                    format!(
                        "{field} {length}: a text needs room for [CLS], its marker and [SEP], within the {positions} positions"
                    ),
                ));
            }
        }
        let query_id = token_id(&settings.query_prefix, "the query marker", &settings_path)?;
        let document_id = token_id(&settings.document_prefix, "the document marker", &settings_path)?;
        // PyLate's convert_tokens_to_ids: a word that is no single token is [UNK].
        let skiplist: BTreeSet<u32> =
            settings.skiplist.iter().filter_map(|word| tokenizer.token_to_id(word).or(unk_id)).collect();

        let dense = if stanford {
            let spec = DenseSpec {
                path: String::new(),
                in_features: hidden,
                out_features: stanford_dims(&weights_path, &weights, hidden)?,
                bias: false,
                activation: crate::dense::Activation::Identity,
                residual: false,
            };
            vec![Dense::from_root(&weights_path, &weights, &spec)?]
        } else {
            read_dense_modules(&model_dir, dir, hidden, &mut files)?
        };
        let dims = dense.last().map_or(hidden, Dense::out_features);
        let dense = dense
            .into_iter()
            .map(|module| {
                let packed = module.packed(kernels);
                (module, packed)
            })
            .collect();
        let cut = |length: usize| -> Result<Tokenizer> {
            let mut cut = tokenizer.clone();
            cut.with_truncation(Some(TruncationParams {
                max_length: length - 1,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|error| invalid(&tokenizer_path, error))?;
            Ok(cut)
        };
        let tokenizers = [cut(settings.query_length)?, cut(settings.document_length)?];
        let bert = Bert::load(config, &weights, kernels).map_err(|error| invalid(&weights_path, error))?;
        let identity = ColbertIdentity {
            model: format!("{COLBERT_DIGEST_NAME_PREFIX}{weights_sha256}"),
            layout: if stanford { ColbertLayout::Stanford } else { ColbertLayout::Pylate },
            dims,
            query_marker: (settings.query_prefix.clone(), query_id),
            document_marker: (settings.document_prefix.clone(), document_id),
            query_length: settings.query_length,
            document_length: settings.document_length,
            query_expansion: settings.expansion,
            attend_to_expansion: settings.expansion && settings.attend_to_expansion,
            skiplist: skiplist.iter().copied().collect(),
            files,
            backend: BACKEND.to_owned(),
            backend_version: BACKEND_VERSION.to_owned(),
        };
        Ok(ColbertEncoder {
            bert,
            kernels,
            tokenizers,
            lower_case,
            dense,
            mask_id,
            skiplist,
            identity,
            batch_size: 32,
        })
    }

    /// What this encoder is.
    pub fn identity(&self) -> &ColbertIdentity {
        &self.identity
    }

    /// Sets how many texts run through the encoder together (default 32): speed and memory, never bits.
    pub fn set_batch_size(&mut self, batch_size: usize) {
        self.batch_size = batch_size.max(1);
    }

    /// The ids a text of `role` runs with, and how many of them its tokens attend to: cut to the role's length
    /// less one, the marker inserted after `[CLS]`, a query with expansion padded with `[MASK]`.
    ///
    /// # Errors
    /// [`Error::Tokenizer`] for a text the tokenizer refuses.
    pub fn input_ids(&self, role: Role, text: &str) -> Result<(Vec<u32>, usize)> {
        let identity = &self.identity;
        let (length, marker) = match role {
            Role::Query => (identity.query_length, identity.query_marker.1),
            Role::Document => (identity.document_length, identity.document_marker.1),
        };
        let lowered;
        let text = if self.lower_case {
            lowered = crate::sentence_bert::python_lower(text);
            lowered.as_str()
        } else {
            text
        };
        let tokenizer = &self.tokenizers[usize::from(role == Role::Document)];
        let encoding = tokenizer.encode(text, true).map_err(|error| Error::Tokenizer(error.to_string()))?;
        let mut ids = encoding.get_ids().to_vec();
        ids.insert(1.min(ids.len()), marker);
        let own = ids.len();
        if role == Role::Query && identity.query_expansion {
            ids.resize(length, self.mask_id);
        }
        let attended = if role == Role::Query && identity.attend_to_expansion { ids.len() } else { own };
        Ok((ids, attended))
    }

    /// Encodes `texts` as PyLate's `encode(is_query=role == Query)` does: each text's kept token vectors.
    /// `done(n)` after each batch of `n`.
    ///
    /// # Errors
    /// [`Error::Tokenizer`] for a text the tokenizer refuses; [`Error::InvalidEmbedding`] for a token vector
    /// that is not finite or is zero (it has no direction).
    pub fn encode(
        &self,
        role: Role,
        texts: &[&str],
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<TokenVectors>> {
        let encoded: Vec<(Vec<u32>, usize)> =
            texts.par_iter().map(|text| self.input_ids(role, text)).collect::<Result<_>>()?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&index| (std::cmp::Reverse(encoded[index].0.len()), index));
        let mut out: Vec<Option<TokenVectors>> = vec![None; texts.len()];
        let mut buffers = Buffers::default();
        let hidden = self.bert.hidden_size();
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&index| encoded[index].0.as_slice()).collect();
            let attended: Vec<usize> = chunk.iter().map(|&index| encoded[index].1).collect();
            let states = self.bert.hidden_states_attending(&batch, &attended, &mut buffers)?;
            // The kept tokens' states, gathered, projected together.
            let mut kept: Vec<f32> = Vec::with_capacity(states.len());
            let mut counts = Vec::with_capacity(chunk.len());
            let mut rows = states.chunks_exact(hidden);
            for (&index, ids) in chunk.iter().zip(&batch) {
                let before = kept.len();
                for (position, row) in rows.by_ref().take(ids.len()).enumerate() {
                    let skipped = match role {
                        Role::Document => self.skiplist.contains(&ids[position]),
                        Role::Query => !self.identity.query_expansion && position >= encoded[index].1,
                    };
                    if !skipped {
                        kept.extend_from_slice(row);
                    }
                }
                counts.push((kept.len() - before) / hidden);
            }
            let mut width = hidden;
            for (module, packed) in &self.dense {
                kept = module.apply_rows(self.kernels, packed, &kept, kept.len() / width);
                width = module.out_features();
            }
            let mut vectors = kept.chunks_exact_mut(width);
            for ((&index, ids), count) in chunk.iter().zip(&batch).zip(counts) {
                let mut values = Vec::with_capacity(count * width);
                for (row, vector) in vectors.by_ref().take(count).enumerate() {
                    crate::identity::normalize(vector).map_err(|reason| Error::InvalidEmbedding {
                        index,
                        reason: format!("token vector {row}: {reason}"),
                    })?;
                    values.extend_from_slice(vector);
                }
                out[index] = Some(TokenVectors { values, dims: self.identity.dims, tokens: ids.len() });
            }
            done(chunk.len());
        }
        Ok(out
            .into_iter()
            .map(|vectors| {
                vectors.unwrap_or(TokenVectors { values: Vec::new(), dims: self.identity.dims, tokens: 0 })
            })
            .collect())
    }
}

/// The settings that decide the tokens: PyLate's names, its defaults for what a file leaves out.
struct Settings {
    query_prefix: String,
    document_prefix: String,
    query_length: usize,
    document_length: usize,
    expansion: bool,
    attend_to_expansion: bool,
    skiplist: Vec<String>,
}

impl Settings {
    fn defaults(query_prefix: &str, document_prefix: &str) -> Settings {
        Settings {
            query_prefix: query_prefix.to_owned(),
            document_prefix: document_prefix.to_owned(),
            query_length: 32,
            document_length: 180,
            expansion: true,
            attend_to_expansion: false,
            skiplist: PUNCTUATION.chars().map(String::from).collect(),
        }
    }

    /// `config_sentence_transformers.json` of a PyLate checkpoint.
    fn pylate(path: &Path, value: &Value) -> Result<Settings> {
        let mut settings = Settings::defaults("[Q] ", "[D] ");
        if let Some(name) = value.get("default_prompt_name").filter(|v| !v.is_null()) {
            return Err(invalid(
                path,
                format!("default_prompt_name {name}: a prompt applied to every text is not run here"),
            ));
        }
        read_string(path, value, "query_prefix", &mut settings.query_prefix)?;
        read_string(path, value, "document_prefix", &mut settings.document_prefix)?;
        read_length(path, value, "query_length", &mut settings.query_length)?;
        read_length(path, value, "document_length", &mut settings.document_length)?;
        read_flag(path, value, "do_query_expansion", &mut settings.expansion)?;
        read_flag(path, value, "attend_to_expansion_tokens", &mut settings.attend_to_expansion)?;
        if let Some(words) = value.get("skiplist_words").filter(|v| !v.is_null()) {
            settings.skiplist = words
                .as_array()
                .and_then(|words| words.iter().map(|w| w.as_str().map(str::to_owned)).collect())
                .ok_or_else(|| invalid(path, "skiplist_words is not a list of strings"))?;
        }
        if settings.query_prefix.is_empty() || settings.document_prefix.is_empty() {
            return Err(invalid(
                path,
                "an empty query_prefix or document_prefix (no marker) is not run here",
            ));
        }
        Ok(settings)
    }

    /// `artifact.metadata` of a colbert-ai checkpoint (`Null` when it has none: PyLate's fallbacks).
    fn stanford(path: &Path, value: &Value) -> Result<Settings> {
        let mut settings = Settings::defaults("[unused0]", "[unused1]");
        read_string(path, value, "query_token_id", &mut settings.query_prefix)?;
        read_string(path, value, "doc_token_id", &mut settings.document_prefix)?;
        read_length(path, value, "query_maxlen", &mut settings.query_length)?;
        read_length(path, value, "doc_maxlen", &mut settings.document_length)?;
        read_flag(path, value, "attend_to_mask_tokens", &mut settings.attend_to_expansion)?;
        Ok(settings)
    }
}

fn read_string(path: &Path, value: &Value, key: &str, into: &mut String) -> Result<()> {
    if let Some(found) = value.get(key).filter(|v| !v.is_null()) {
        *into =
            found.as_str().ok_or_else(|| invalid(path, format!("{key} {found} is not a string")))?.to_owned();
    }
    Ok(())
}

fn read_length(path: &Path, value: &Value, key: &str, into: &mut usize) -> Result<()> {
    if let Some(found) = value.get(key).filter(|v| !v.is_null()) {
        *into = found
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| invalid(path, format!("{key} {found} is not a count of tokens")))?;
    }
    Ok(())
}

fn read_flag(path: &Path, value: &Value, key: &str, into: &mut bool) -> Result<()> {
    if let Some(found) = value.get(key).filter(|v| !v.is_null()) {
        *into = found.as_bool().ok_or_else(|| invalid(path, format!("{key} {found} is not a boolean")))?;
    }
    Ok(())
}

/// `config.json` names a BERT encoder (`BertModel`, or colbert-ai's `HF_ColBERT`, which holds one).
fn check_bert(path: &Path, raw: &Value, stanford: bool) -> Result<()> {
    let kind = raw.get("model_type").and_then(Value::as_str).unwrap_or("bert");
    if kind != "bert" {
        return Err(invalid(
            path,
            format!("model_type {kind:?} is not \"bert\": only BERT ColBERT encoders run here"),
        ));
    }
    if !stanford {
        return crate::checkpoint::check_architecture(path, raw);
    }
    // HF_ColBERT holds a BertModel: the rest of the file is checked as that model's.
    let mut encoder = raw.clone();
    if let Some(fields) = encoder.as_object_mut() {
        fields.remove("architectures");
    }
    crate::checkpoint::check_architecture(path, &encoder)
}

/// The width of a colbert-ai checkpoint's `linear.weight` (`[dims, hidden]`).
fn stanford_dims(path: &Path, weights: &[u8], hidden: usize) -> Result<usize> {
    let tensors = safetensors::SafeTensors::deserialize(weights).map_err(|e| invalid(path, e))?;
    let view = tensors.tensor("linear.weight").map_err(|_| {
        invalid(path, "no tensor linear.weight: an HF_ColBERT checkpoint keeps its projection there")
    })?;
    match view.shape() {
        [dims, width] if *width == hidden && *dims > 0 => Ok(*dims),
        shape => Err(invalid(
            path,
            format!(
                "linear.weight is {shape:?}; a projection of the encoder's {hidden}-wide states is [dims, {hidden}]"
            ),
        )),
    }
}

/// Every module after the encoder in `modules.json`: Dense modules, each reading the one before's width.
fn read_dense_modules(
    model_dir: &ModelDir,
    dir: &Path,
    hidden: usize,
    files: &mut BTreeMap<String, String>,
) -> Result<Vec<Dense>> {
    let path = dir.join("modules.json");
    let (bytes, modules) =
        optional_json(model_dir, &path, "modules.json")?.ok_or_else(|| invalid(&path, "missing"))?;
    files.insert("modules.json".to_owned(), sha256_hex(&bytes));
    let list = modules.as_array().ok_or_else(|| invalid(&path, "not a list of modules"))?;
    let Some((first, rest)) = list.split_first() else {
        return Err(invalid(&path, "no modules"));
    };
    if !first["type"].as_str().is_some_and(|t| t.ends_with(".Transformer"))
        || !first["path"].as_str().is_some_and(str::is_empty)
    {
        return Err(invalid(&path, "module 0 is not the Transformer at the directory's root"));
    }
    if rest.is_empty() {
        return Err(invalid(
            &path,
            "no Dense module after the Transformer: PyLate would add an untrained projection",
        ));
    }
    let mut width = hidden;
    let mut dense = Vec::with_capacity(rest.len());
    for (index, module) in rest.iter().enumerate() {
        let kind = module["type"].as_str().unwrap_or("");
        if !is_dense(kind) {
            return Err(invalid(&path, format!("module {} is {kind:?}, not a Dense projection", index + 1)));
        }
        let folder = module["path"].as_str().unwrap_or("");
        if folder.is_empty() || folder.contains("..") || folder.starts_with('/') {
            return Err(invalid(
                &path,
                format!("module {}'s path {folder:?} is not a folder inside the directory", index + 1),
            ));
        }
        let name = format!("{folder}/config.json");
        let config_path = dir.join(&name);
        let (bytes, value) = optional_json(model_dir, &config_path, &name)?
            .ok_or_else(|| invalid(&config_path, "missing (the Dense module's config)"))?;
        files.insert(name, sha256_hex(&bytes));
        let spec = DenseSpec::read(&config_path, folder, &value, width)?;
        let (module, digest) = Dense::load(model_dir, dir, &spec)?;
        files.insert(format!("{folder}/model.safetensors"), digest);
        width = spec.out_features;
        dense.push(module);
    }
    Ok(dense)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query's own tokens attend to themselves only: their hidden states are the unpadded sequence's to the
    /// bit, while the padding's rows are computed (and differ from what attending to the padding gives).
    #[test]
    fn padding_nobody_attends_leaves_the_querys_own_rows_as_they_are() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/colbert/pylate-default");
        let encoder = ColbertEncoder::load(&dir).unwrap();
        let (ids, attended) = encoder.input_ids(Role::Query, "protein expression in cells").unwrap();
        assert!(attended < ids.len());
        let mut buffers = Buffers::default();
        let masked = encoder.bert.hidden_states_attending(&[&ids], &[attended], &mut buffers).unwrap();
        let own = encoder.bert.hidden_states(&[&ids[..attended]], &mut buffers).unwrap();
        let unmasked = encoder.bert.hidden_states(&[&ids], &mut buffers).unwrap();
        let h = encoder.bert.hidden_size();
        let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&masked[..attended * h]), bits(&own), "the query's own rows");
        let apart = masked.iter().zip(&unmasked).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(apart > 1e-3, "attending to the padding changes the states ({apart})");
    }
}
