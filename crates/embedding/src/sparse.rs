//! Learned sparse encoders (SPLADE): a `BertForMaskedLM` checkpoint read as sentence-transformers'
//! `SparseEncoder` reads it, each text one weight per vocabulary entry, most of them zero.
//!
//! Four layouts, each detected from its files:
//! - sentence-transformers 6: `modules.json` with a `Transformer` whose `sentence_bert_config.json` says
//!   `"transformer_task": "fill-mask"` (the window in `tokenizer_config.json`'s `model_max_length`), then a
//!   `SpladePooling`;
//! - sentence-transformers 5: an `MLMTransformer` (`max_seq_length` and `do_lower_case` in
//!   `sentence_bert_config.json`), then a `SpladePooling`;
//! - the inference-free `Router`: `router_config.json` sends queries to a `SparseStaticEmbedding` (a weight per
//!   vocabulary entry, for each token present) and documents to the MLM encoder and its pooling, each module in
//!   its own folder;
//! - a bare `BertForMaskedLM` directory (naver's): the MLM encoder with max pooling and relu, as
//!   sentence-transformers loads one.
//!
//! The encoder is this crate's BERT forward pass, then the MLM head and SPLADE's pooling (`bert::mlm`): the same
//! bits on every kernel. `max_active_dims` keeps the largest values by magnitude, ties at the cut going to the
//! smaller vocabulary id (`torch.topk` leaves that order open). Only safetensors weights are read: a checkpoint
//! that ships only `pytorch_model.bin` (naver/splade-v3) is refused with the one-line conversion that makes
//! `model.safetensors` from it, since unpickling runs code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::bert::mlm::{Activation, MlmHead, Reduce};
use crate::bert::{BACKEND, BACKEND_VERSION, Bert, Buffers, Config, Kernels};
use crate::checkpoint::{check_architecture, check_sizes, invalid, model_max_length, optional_json};
use crate::error::{Error, Result};
use crate::model_dir::{MAX_CONFIG_BYTES, MAX_TOKENIZER_BYTES, MAX_WEIGHTS_BYTES, ModelDir};
use crate::role::Role;
use crate::sha256_hex;

/// The prefix of the name a sparse checkpoint gets from its weights' digest (the encoder's, for a Router).
pub const SPARSE_DIGEST_NAME_PREFIX: &str = "splade-sha256-";

/// One text's sparse vector: vocabulary ids ascending and unique, each with its (non-zero) weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SparseVector {
    /// Vocabulary ids, ascending, unique.
    pub indices: Vec<u32>,
    /// The weight of each id.
    pub values: Vec<f32>,
}

/// One encoded text.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseEmbedding {
    /// Its sparse vector.
    pub vector: SparseVector,
    /// Tokens the encoder saw, special tokens included, after truncation.
    pub tokens: usize,
}

/// Which of the four layouts a checkpoint has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SparseLayout {
    /// sentence-transformers 6: a fill-mask `Transformer` and `SpladePooling`.
    FillMask,
    /// sentence-transformers 5: an `MLMTransformer` and `SpladePooling`.
    MlmTransformer,
    /// An inference-free `Router`: a `SparseStaticEmbedding` for queries, the MLM encoder for documents.
    Router,
    /// A bare `BertForMaskedLM` directory: max pooling, relu.
    BareMaskedLm,
}

/// What a sparse encoder is, for receipts and bundles: every file that shapes a vector by its digest, and how
/// the checkpoint is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SparseIdentity {
    /// The name: the registry's when every file is a registered checkpoint's, else from the weights' digest.
    pub model: String,
    /// The layout the files declare.
    pub layout: SparseLayout,
    /// The vocabulary's size: the vectors' dimension.
    pub vocab: usize,
    /// Tokens the MLM encoder sees at most, special tokens included.
    pub max_tokens: usize,
    /// `max` or `sum`.
    pub pooling: String,
    /// `relu` (`log1p(relu(x))`) or `log1p_relu` (log1p twice).
    pub activation: String,
    /// The most non-zero weights a vector keeps, when the checkpoint says.
    pub max_active_dims: Option<usize>,
    /// How queries are encoded: `mlm` (as documents are) or `static` (a weight per token present).
    pub query_encoder: String,
    /// Tokens a query keeps with the static encoder (no special tokens), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_max_tokens: Option<usize>,
    /// sha256 (hex) of every file that shapes a vector, by its path in the directory.
    pub files: BTreeMap<String, String>,
    /// The prompts per role (`query`, `document`), when the checkpoint declares any.
    pub prompts: BTreeMap<String, String>,
    /// Whether texts are lower-cased before tokenizing (`do_lower_case`).
    pub lower_case: bool,
    /// The forward pass (`scifact-audit-bert`) and its version.
    pub backend: String,
    /// Its version.
    pub backend_version: String,
}

/// The MLM encoder: a BERT and its masked-language-model head, with its tokenizer and window.
struct MlmEncoder {
    bert: Bert,
    head: MlmHead,
    tokenizer: Tokenizer,
    max_tokens: usize,
    lower_case: bool,
}

/// The Router's query side: a weight per vocabulary entry, taken for each token a query holds.
struct StaticEncoder {
    weight: Vec<f32>,
    tokenizer: Tokenizer,
    max_tokens: usize,
}

/// A learned sparse encoder, loaded.
pub struct SparseEncoder {
    mlm: MlmEncoder,
    query: Option<StaticEncoder>,
    reduce: Reduce,
    activation: Activation,
    max_active_dims: Option<usize>,
    prompts: BTreeMap<Role, String>,
    identity: SparseIdentity,
    batch_size: usize,
    /// A Router's route for a text given no role is its query side.
    default_is_query: bool,
}

/// The class name a `modules.json` or `router_config.json` type gives, when it is one of sentence-transformers'
/// (`sentence_transformers.<anything>.<Class>`).
fn class_of(kind: &str) -> Option<&str> {
    kind.strip_prefix("sentence_transformers.").and_then(|rest| rest.rsplit('.').next())
}

/// A folder named by a checkpoint's own files: inside the directory, or refused by name.
fn folder(path: &Path, field: &str, name: &str) -> Result<String> {
    if name.contains("..") || name.starts_with('/') || name.contains('\\') {
        return Err(invalid(path, format!("{field} {name:?} is not a folder inside the directory")));
    }
    Ok(name.trim_end_matches('/').to_owned())
}

/// `folder/name`, or `name` for the directory itself.
fn inside(folder: &str, name: &str) -> String {
    if folder.is_empty() { name.to_owned() } else { format!("{folder}/{name}") }
}

/// What a checkpoint's modules say before anything is loaded: the layout, the encoder's folder, the pooling's
/// folder (none for the bare layout) and the Router's query folder.
struct Modules {
    layout: SparseLayout,
    encoder: String,
    pooling: Option<String>,
    query: Option<String>,
    /// The Router's route for a text given no role (`default_route`): `true` when it is the query side.
    default_is_query: bool,
}

impl SparseEncoder {
    /// Whether `dir` holds a sparse checkpoint (any of the four layouts), judged from its `modules.json`, or,
    /// without one, from `config.json`'s `architectures` (`*ForMaskedLM`).
    ///
    /// # Errors
    /// A file that cannot be read or parsed.
    pub fn is_sparse(dir: &Path) -> Result<bool> {
        let model_dir = ModelDir::open(dir)?;
        if let Some((_, modules)) = optional_json(&model_dir, &dir.join("modules.json"), "modules.json")? {
            let classes: Vec<&str> = modules
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["type"].as_str().and_then(class_of))
                .collect();
            return Ok(classes.iter().any(|c| matches!(*c, "SpladePooling" | "MLMTransformer" | "Router"))
                && (classes.contains(&"SpladePooling") || classes.contains(&"MLMTransformer") || {
                    // A Router is sparse when one of its routes is.
                    let router =
                        optional_json(&model_dir, &dir.join("router_config.json"), "router_config.json")?;
                    router.is_some_and(|(_, value)| {
                        value["types"].as_object().into_iter().flatten().any(|(_, kind)| {
                            kind.as_str().and_then(class_of).is_some_and(|c| {
                                matches!(c, "SpladePooling" | "SparseStaticEmbedding" | "MLMTransformer")
                            })
                        })
                    })
                }));
        }
        let Some((_, config)) = optional_json(&model_dir, &dir.join("config.json"), "config.json")? else {
            return Ok(false);
        };
        Ok(config["architectures"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(|name| name.ends_with("ForMaskedLM")))
    }

    /// Loads the sparse checkpoint in `dir`, named by its digests (`splade-sha256-<weights>`).
    ///
    /// # Errors
    /// [`Error::Io`] for a missing file; [`Error::InvalidModelFile`] naming the file and the field for anything
    /// this crate cannot run exactly: another architecture or module, no MLM head, a decoder whose vocabulary
    /// is not the tokenizer's, a weight that is not finite, `max_active_dims` of 0 or beyond the vocabulary, a
    /// Router without a query side, weights only as `pytorch_model.bin`.
    pub fn load(dir: &Path) -> Result<SparseEncoder> {
        SparseEncoder::load_with(dir, Kernels::best())
    }

    /// [`SparseEncoder::load`] on `kernels` instead of the fastest this CPU has: every kind gives the same
    /// bits, which this exists to show.
    ///
    /// # Errors
    /// As [`SparseEncoder::load`], or [`Error::InvalidModelFile`] when this CPU cannot run `kernels`.
    pub fn load_with(dir: &Path, kernels: Kernels) -> Result<SparseEncoder> {
        if !Kernels::available().contains(&kernels) {
            return Err(invalid(dir, format!("this CPU cannot run the {kernels:?} kernels")));
        }
        let model_dir = ModelDir::open(dir)?;
        let mut files = BTreeMap::new();
        let modules = read_modules(&model_dir, dir, &mut files)?;
        let (mlm, weights_sha256) =
            read_mlm(&model_dir, dir, &modules.encoder, modules.layout, kernels, &mut files)?;
        let vocab = mlm.head.vocab();
        let (reduce, activation) = match &modules.pooling {
            None => (Reduce::Max, Activation::Relu),
            Some(folder) => read_pooling(&model_dir, dir, folder, vocab, &mut files)?,
        };
        let query = match &modules.query {
            Some(folder) => Some(read_static(&model_dir, dir, folder, vocab, &mut files)?),
            None => None,
        };
        let mut prompts = BTreeMap::new();
        let mut max_active_dims = None;
        let settings_path = dir.join("config_sentence_transformers.json");
        if let Some((bytes, value)) =
            optional_json(&model_dir, &settings_path, "config_sentence_transformers.json")?
        {
            files.insert("config_sentence_transformers.json".to_owned(), sha256_hex(&bytes));
            prompts = read_role_prompts(&settings_path, &value)?;
            if let Some(dims) = value.get("max_active_dims").filter(|v| !v.is_null()) {
                let dims = dims.as_u64().filter(|n| *n > 0 && *n as usize <= vocab).ok_or_else(|| {
                    invalid(
                        &settings_path,
                        format!("max_active_dims {dims} is not a count from 1 to the vocabulary's {vocab}"),
                    )
                })?;
                max_active_dims = Some(dims as usize);
            }
        }
        let identity = SparseIdentity {
            model: format!("{SPARSE_DIGEST_NAME_PREFIX}{weights_sha256}"),
            layout: modules.layout,
            vocab,
            max_tokens: mlm.max_tokens,
            pooling: match reduce {
                Reduce::Max => "max",
                Reduce::Sum => "sum",
            }
            .to_owned(),
            activation: match activation {
                Activation::Relu => "relu",
                Activation::Log1pRelu => "log1p_relu",
            }
            .to_owned(),
            max_active_dims,
            query_encoder: if query.is_some() { "static" } else { "mlm" }.to_owned(),
            query_max_tokens: query.as_ref().map(|q| q.max_tokens),
            files,
            prompts: prompts
                .iter()
                .map(|(role, prompt)| {
                    (
                        match role {
                            Role::Query => "query",
                            Role::Document => "document",
                        }
                        .to_owned(),
                        prompt.clone(),
                    )
                })
                .collect(),
            lower_case: mlm.lower_case,
            backend: BACKEND.to_owned(),
            backend_version: BACKEND_VERSION.to_owned(),
        };
        Ok(SparseEncoder {
            default_is_query: modules.default_is_query,
            mlm,
            query,
            reduce,
            activation,
            max_active_dims,
            prompts,
            identity,
            batch_size: 32,
        })
    }

    /// What this encoder is.
    pub fn identity(&self) -> &SparseIdentity {
        &self.identity
    }

    /// The prompt the checkpoint declares for `role` (empty when none).
    pub fn prompt(&self, role: Role) -> &str {
        self.prompts.get(&role).map_or("", String::as_str)
    }

    /// Sets how many texts run through the encoder together (default 32): speed and memory, never bits.
    pub fn set_batch_size(&mut self, batch_size: usize) {
        self.batch_size = batch_size.max(1);
    }

    /// Encodes `texts` in `role` as sentence-transformers' `encode_query` and `encode_document` do: the role's
    /// prompt before each text, a Router's query side for queries; with no role, each text as given, on the
    /// encoder a Router sends texts of no role to. `done(n)` after each batch of `n`.
    ///
    /// # Errors
    /// [`Error::Tokenizer`] for a text the tokenizer refuses; [`Error::Model`] for a text the model cannot take.
    pub fn encode(
        &self,
        role: Option<Role>,
        texts: &[&str],
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<SparseEmbedding>> {
        let prompt = role.map_or("", |role| self.prompt(role));
        let prompted: Vec<String> = texts.iter().map(|text| format!("{prompt}{text}")).collect();
        let to_query = role == Some(Role::Query) || (role.is_none() && self.default_is_query);
        match &self.query {
            Some(query) if to_query => {
                let encoded = prompted
                    .par_iter()
                    .map(|text| query.encode(text, self.max_active_dims))
                    .collect::<Result<Vec<_>>>()?;
                done(texts.len());
                Ok(encoded)
            }
            _ => self.encode_mlm(&prompted, done),
        }
    }

    fn encode_mlm(&self, texts: &[String], done: &(dyn Fn(usize) + Sync)) -> Result<Vec<SparseEmbedding>> {
        let encoded: Vec<Vec<u32>> =
            texts.par_iter().map(|text| self.mlm.input_ids(text)).collect::<Result<_>>()?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&index| (std::cmp::Reverse(encoded[index].len()), index));
        let mut vectors: Vec<Option<SparseVector>> = vec![None; texts.len()];
        let mut buffers = Buffers::default();
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&index| encoded[index].as_slice()).collect();
            let lengths: Vec<usize> = batch.iter().map(|ids| ids.len()).collect();
            let hidden = self.mlm.bert.hidden_states(&batch, &mut buffers)?;
            let pooled = self.mlm.head.pooled(&hidden, &lengths, self.reduce, self.activation);
            for (&index, values) in chunk.iter().zip(pooled) {
                if let Some(at) = values.iter().position(|v| !v.is_finite()) {
                    return Err(Error::InvalidEmbedding {
                        index,
                        reason: format!("vocabulary entry {at} is {}", values[at]),
                    });
                }
                let (indices, values) = crate::bert::mlm::sparsify(&values, self.max_active_dims);
                vectors[index] = Some(SparseVector { indices, values });
            }
            done(chunk.len());
        }
        Ok(vectors
            .into_iter()
            .zip(encoded)
            .map(|(vector, ids)| SparseEmbedding {
                vector: vector.unwrap_or(SparseVector { indices: Vec::new(), values: Vec::new() }),
                tokens: ids.len(),
            })
            .collect())
    }
}

impl MlmEncoder {
    fn input_ids(&self, text: &str) -> Result<Vec<u32>> {
        let lowered;
        let text = if self.lower_case {
            lowered = crate::sentence_bert::python_lower(text);
            lowered.as_str()
        } else {
            text
        };
        let encoding =
            self.tokenizer.encode(text, true).map_err(|error| Error::Tokenizer(error.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }
}

impl StaticEncoder {
    /// A query's vector: the weight of every vocabulary entry among its tokens (no special tokens; a token
    /// present twice counts once), as `SparseStaticEmbedding` gives it.
    fn encode(&self, text: &str, keep: Option<usize>) -> Result<SparseEmbedding> {
        let encoding =
            self.tokenizer.encode(text, false).map_err(|error| Error::Tokenizer(error.to_string()))?;
        let present: BTreeSet<u32> = encoding.get_ids().iter().copied().collect();
        let mut values = vec![0.0f32; self.weight.len()];
        for id in &present {
            let slot = values.get_mut(*id as usize).ok_or_else(|| {
                Error::Model(format!(
                    "token id {id} is beyond the query weights' {} entries",
                    self.weight.len()
                ))
            })?;
            *slot = self.weight[*id as usize];
        }
        let (indices, values) = crate::bert::mlm::sparsify(&values, keep);
        Ok(SparseEmbedding { vector: SparseVector { indices, values }, tokens: encoding.get_ids().len() })
    }
}

/// The modules a directory declares, as one of the four layouts.
fn read_modules(model_dir: &ModelDir, dir: &Path, files: &mut BTreeMap<String, String>) -> Result<Modules> {
    let modules_path = dir.join("modules.json");
    let Some((bytes, modules)) = optional_json(model_dir, &modules_path, "modules.json")? else {
        return Ok(Modules {
            layout: SparseLayout::BareMaskedLm,
            encoder: String::new(),
            pooling: None,
            query: None,
            default_is_query: false,
        });
    };
    files.insert("modules.json".to_owned(), sha256_hex(&bytes));
    let Some(list) = modules.as_array() else {
        return Err(invalid(&modules_path, "not a list of modules"));
    };
    let entry = |index: usize| -> Result<(&str, String)> {
        let module = &list[index];
        let kind = module["type"].as_str().unwrap_or("");
        let class = class_of(kind).unwrap_or("");
        let path = module["path"]
            .as_str()
            .ok_or_else(|| invalid(&modules_path, format!("module {index}: no path")))?;
        Ok((class, folder(&modules_path, &format!("module {index}'s path"), path)?))
    };
    match list.len() {
        1 => {
            let (class, path) = entry(0)?;
            if class != "Router" {
                return Err(invalid(
                    &modules_path,
                    format!(
                        "one module of class {class:?}: a sparse checkpoint is a Router, or an MLM encoder and SpladePooling"
                    ),
                ));
            }
            read_router(model_dir, dir, &path, files)
        }
        2 => {
            let ((encoder_class, encoder), (pooling_class, pooling)) = (entry(0)?, entry(1)?);
            let layout = match encoder_class {
                "MLMTransformer" => SparseLayout::MlmTransformer,
                "Transformer" => SparseLayout::FillMask,
                other => {
                    return Err(invalid(
                        &modules_path,
                        format!("module 0 is {other:?}, not a Transformer (fill-mask) or an MLMTransformer"),
                    ));
                }
            };
            if pooling_class != "SpladePooling" {
                return Err(invalid(
                    &modules_path,
                    format!("module 1 is {pooling_class:?}, not SpladePooling"),
                ));
            }
            Ok(Modules { layout, encoder, pooling: Some(pooling), query: None, default_is_query: false })
        }
        count => Err(invalid(
            &modules_path,
            format!("{count} modules: a sparse checkpoint is a Router, or an MLM encoder and SpladePooling"),
        )),
    }
}

/// A Router's two routes: `query` a `SparseStaticEmbedding`, `document` an MLM encoder and `SpladePooling`.
fn read_router(
    model_dir: &ModelDir,
    dir: &Path,
    at: &str,
    files: &mut BTreeMap<String, String>,
) -> Result<Modules> {
    let name = inside(at, "router_config.json");
    let path = dir.join(&name);
    let (bytes, config) = optional_json(model_dir, &path, &name)?
        .ok_or_else(|| invalid(&path, "missing (the Router's config)"))?;
    files.insert(name, sha256_hex(&bytes));
    let types = config["types"].as_object().ok_or_else(|| invalid(&path, "types is not an object"))?;
    let route = |key: &str| -> Result<Vec<(String, String)>> {
        let names = config["structure"][key].as_array().ok_or_else(|| {
            invalid(&path, format!("structure.{key} is missing: a Router needs a {key} side"))
        })?;
        names
            .iter()
            .map(|name| {
                let name = name
                    .as_str()
                    .ok_or_else(|| invalid(&path, format!("structure.{key} holds a non-string")))?;
                let class = types.get(name).and_then(Value::as_str).and_then(class_of).ok_or_else(|| {
                    invalid(&path, format!("types.{name} is missing or not a sentence-transformers class"))
                })?;
                Ok((class.to_owned(), folder(&path, &format!("structure.{key}"), &inside(at, name))?))
            })
            .collect()
    };
    let query = route("query")?;
    let document = route("document")?;
    let [(query_class, query_folder)] = query.as_slice() else {
        return Err(invalid(
            &path,
            format!("structure.query has {} modules, not one SparseStaticEmbedding", query.len()),
        ));
    };
    if query_class != "SparseStaticEmbedding" {
        return Err(invalid(
            &path,
            format!("the query side is {query_class:?}, not a SparseStaticEmbedding"),
        ));
    }
    let [(encoder_class, encoder), (pooling_class, pooling)] = document.as_slice() else {
        return Err(invalid(
            &path,
            format!(
                "structure.document has {} modules, not an MLM encoder and SpladePooling",
                document.len()
            ),
        ));
    };
    let layout_ok = matches!(encoder_class.as_str(), "MLMTransformer" | "Transformer");
    if !layout_ok || pooling_class != "SpladePooling" {
        return Err(invalid(
            &path,
            format!(
                "the document side is {encoder_class:?} and {pooling_class:?}, not an MLM encoder and SpladePooling"
            ),
        ));
    }
    let default = config["parameters"]["default_route"].as_str().unwrap_or("document");
    Ok(Modules {
        layout: SparseLayout::Router,
        encoder: encoder.clone(),
        pooling: Some(pooling.clone()),
        query: Some(query_folder.clone()),
        default_is_query: default == "query",
    })
}

/// The MLM encoder in `folder`: its configuration, window, tokenizer, weights and head; with the encoder
/// weights' sha256.
fn read_mlm(
    model_dir: &ModelDir,
    dir: &Path,
    folder: &str,
    layout: SparseLayout,
    kernels: Kernels,
    files: &mut BTreeMap<String, String>,
) -> Result<(MlmEncoder, String)> {
    let config_name = inside(folder, "config.json");
    let config_path = dir.join(&config_name);
    let config_bytes = model_dir.read(&config_name, MAX_CONFIG_BYTES)?;
    let raw: Value = serde_json::from_slice(&config_bytes)
        .map_err(|error| invalid(&config_path, format!("not JSON: {error}")))?;
    check_architecture(&config_path, &raw)?;
    if raw.get("model_type").and_then(Value::as_str).unwrap_or("bert") != "bert" {
        return Err(invalid(
            &config_path,
            "model_type is not \"bert\": only BERT's masked-language-model head runs here",
        ));
    }
    let tied = match raw.get("tie_word_embeddings") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(flag)) => *flag,
        Some(other) => {
            return Err(invalid(&config_path, format!("tie_word_embeddings {other} is not a boolean")));
        }
    };
    let config: Config = serde_json::from_value(raw).map_err(|error| invalid(&config_path, error))?;
    check_sizes(&config_path, &config)?;
    if config.hidden_act != "gelu" {
        return Err(invalid(&config_path, format!("hidden_act {:?} is not \"gelu\"", config.hidden_act)));
    }
    files.insert(config_name.clone(), sha256_hex(&config_bytes));

    let mut max_tokens = None;
    let mut lower_case = false;
    let bert_name = inside(folder, "sentence_bert_config.json");
    let bert_path = dir.join(&bert_name);
    if let Some((bytes, value)) = optional_json(model_dir, &bert_path, &bert_name)? {
        files.insert(bert_name, sha256_hex(&bytes));
        if let Some(task) = value.get("transformer_task").filter(|v| !v.is_null())
            && task.as_str() != Some("fill-mask")
        {
            return Err(invalid(
                &bert_path,
                format!("transformer_task {task} is not \"fill-mask\": no MLM logits"),
            ));
        }
        if layout == SparseLayout::FillMask
            && value.get("transformer_task").and_then(Value::as_str) != Some("fill-mask")
        {
            return Err(invalid(
                &bert_path,
                "a Transformer without \"transformer_task\": \"fill-mask\" gives no MLM logits",
            ));
        }
        if let Some(length) = value.get("max_seq_length").filter(|v| !v.is_null()) {
            max_tokens = Some(length.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                invalid(&bert_path, format!("max_seq_length {length} is not a positive count"))
            })? as usize);
        }
        if let Some(flag) = value.get("do_lower_case").filter(|v| !v.is_null()) {
            lower_case = flag
                .as_bool()
                .ok_or_else(|| invalid(&bert_path, format!("do_lower_case {flag} is not a boolean")))?;
        }
    } else if layout == SparseLayout::FillMask {
        return Err(invalid(&bert_path, "missing: a Transformer module says its task (fill-mask) there"));
    }
    let tokenizer_config_name = inside(folder, "tokenizer_config.json");
    let tokenizer_config_path = dir.join(&tokenizer_config_name);
    if let Some((bytes, value)) = optional_json(model_dir, &tokenizer_config_path, &tokenizer_config_name)? {
        if value.get("tokenizer_class").and_then(Value::as_str).is_some_and(|c| c.starts_with("XLMRoberta")) {
            return Err(invalid(
                &tokenizer_config_path,
                "an XLM-RoBERTa tokenizer: only BERT's WordPiece runs with the MLM head here",
            ));
        }
        if max_tokens.is_none() {
            files.insert(tokenizer_config_name, sha256_hex(&bytes));
            max_tokens = model_max_length(&tokenizer_config_path, &value)?;
        }
    }
    let max_tokens = max_tokens.unwrap_or(usize::MAX).min(config.max_sequence());

    let tokenizer_name = inside(folder, "tokenizer.json");
    let tokenizer_path = dir.join(&tokenizer_name);
    let tokenizer_bytes = model_dir.read(&tokenizer_name, MAX_TOKENIZER_BYTES)?;
    files.insert(tokenizer_name, sha256_hex(&tokenizer_bytes));
    let mut tokenizer =
        Tokenizer::from_bytes(&tokenizer_bytes).map_err(|error| invalid(&tokenizer_path, error))?;
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
            direction: TruncationDirection::Right,
        }))
        .map_err(|error| invalid(&tokenizer_path, error))?;
    tokenizer.with_padding(None);
    let tokenizer_vocab = tokenizer.get_vocab_size(true);
    if tokenizer_vocab != config.vocab_size {
        return Err(invalid(
            &tokenizer_path,
            format!(
                "holds {tokenizer_vocab} tokens, {config_name}'s vocab_size (the decoder's vocabulary) is {}: every token must have its weight",
                config.vocab_size
            ),
        ));
    }

    let weights_name = inside(folder, "model.safetensors");
    let weights_path = dir.join(&weights_name);
    let weights = match model_dir.read(&weights_name, MAX_WEIGHTS_BYTES) {
        Ok(weights) => weights,
        Err(Error::Io { .. }) if dir.join(inside(folder, "pytorch_model.bin")).exists() => {
            return Err(invalid(
                &weights_path,
                format!(
                    "missing: the checkpoint ships only pytorch_model.bin, which is a pickle (reading one runs code, \
                     so it is not read here). Convert it once where you trust it: python3 -c \"import torch; \
                     from safetensors.torch import save_file; s = torch.load('{bin}', weights_only=True); \
                     save_file({{k: v.contiguous() for k, v in s.items()}}, '{out}')\"",
                    bin = dir.join(inside(folder, "pytorch_model.bin")).display(),
                    out = weights_path.display(),
                ),
            ));
        }
        Err(error) => return Err(error),
    };
    let weights_sha256 = sha256_hex(&weights);
    files.insert(weights_name, weights_sha256.clone());
    if let Some(reason) = crate::bert::first_non_finite(&weights) {
        return Err(invalid(&weights_path, reason));
    }
    let head =
        crate::bert::read_mlm(&config, &weights, tied).map_err(|error| invalid(&weights_path, error))?;
    let bert = Bert::load(config, &weights, kernels).map_err(|error| invalid(&weights_path, error))?;
    let head = MlmHead::pack(head, kernels);
    Ok((MlmEncoder { bert, head, tokenizer, max_tokens, lower_case }, weights_sha256))
}

/// `SpladePooling`'s configuration in `folder`: the reduction and the activation.
fn read_pooling(
    model_dir: &ModelDir,
    dir: &Path,
    folder: &str,
    vocab: usize,
    files: &mut BTreeMap<String, String>,
) -> Result<(Reduce, Activation)> {
    let name = inside(folder, "config.json");
    let path = dir.join(&name);
    let (bytes, config) = optional_json(model_dir, &path, &name)?
        .ok_or_else(|| invalid(&path, "missing (SpladePooling's config)"))?;
    files.insert(name, sha256_hex(&bytes));
    let reduce = match config.get("pooling_strategy").and_then(Value::as_str).unwrap_or("max") {
        "max" => Reduce::Max,
        "sum" => Reduce::Sum,
        other => return Err(invalid(&path, format!("pooling_strategy {other:?} is not \"max\" or \"sum\""))),
    };
    let activation = match config.get("activation_function").and_then(Value::as_str).unwrap_or("relu") {
        "relu" => Activation::Relu,
        "log1p_relu" => Activation::Log1pRelu,
        other => {
            return Err(invalid(
                &path,
                format!("activation_function {other:?} is not \"relu\" or \"log1p_relu\""),
            ));
        }
    };
    for key in ["embedding_dimension", "word_embedding_dimension"] {
        if let Some(dims) = config.get(key).and_then(Value::as_u64)
            && dims as usize != vocab
        {
            return Err(invalid(&path, format!("{key} {dims} is not the vocabulary's {vocab}")));
        }
    }
    Ok((reduce, activation))
}

/// A `SparseStaticEmbedding` in `folder`: its tokenizer and its weight per vocabulary entry (`weight` in its
/// `model.safetensors`, or an `idf.json` of token to weight).
fn read_static(
    model_dir: &ModelDir,
    dir: &Path,
    folder: &str,
    vocab: usize,
    files: &mut BTreeMap<String, String>,
) -> Result<StaticEncoder> {
    let tokenizer_name = inside(folder, "tokenizer.json");
    let tokenizer_path = dir.join(&tokenizer_name);
    let tokenizer_bytes = model_dir.read(&tokenizer_name, MAX_TOKENIZER_BYTES)?;
    files.insert(tokenizer_name, sha256_hex(&tokenizer_bytes));
    let mut tokenizer =
        Tokenizer::from_bytes(&tokenizer_bytes).map_err(|error| invalid(&tokenizer_path, error))?;
    let tokenizer_config_name = inside(folder, "tokenizer_config.json");
    let tokenizer_config_path = dir.join(&tokenizer_config_name);
    let mut max_tokens = usize::MAX;
    if let Some((bytes, value)) = optional_json(model_dir, &tokenizer_config_path, &tokenizer_config_name)? {
        files.insert(tokenizer_config_name, sha256_hex(&bytes));
        max_tokens = model_max_length(&tokenizer_config_path, &value)?.unwrap_or(usize::MAX);
    }
    tokenizer
        .with_truncation(if max_tokens == usize::MAX {
            None
        } else {
            Some(TruncationParams {
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            })
        })
        .map_err(|error| invalid(&tokenizer_path, error))?;
    tokenizer.with_padding(None);
    let config_name = inside(folder, "config.json");
    let config_path = dir.join(&config_name);
    let config = optional_json(model_dir, &config_path, &config_name)?;
    if let Some((bytes, _)) = &config {
        files.insert(config_name.clone(), sha256_hex(bytes));
    }
    let idf =
        config.as_ref().and_then(|(_, value)| value.get("path").and_then(Value::as_str).map(str::to_owned));
    let weight = match idf {
        Some(idf) if idf.ends_with(".json") => {
            let name = inside(folder, &folder_name(&config_path, &idf)?);
            let path = dir.join(&name);
            let bytes = model_dir.read(&name, MAX_TOKENIZER_BYTES)?;
            files.insert(name, sha256_hex(&bytes));
            let table: BTreeMap<String, f64> = serde_json::from_slice(&bytes)
                .map_err(|error| invalid(&path, format!("not a JSON object of token to weight: {error}")))?;
            let mut weight = vec![0.0f32; tokenizer.get_vocab_size(true)];
            for (token, value) in table {
                let id = tokenizer
                    .token_to_id(&token)
                    .unwrap_or_else(|| tokenizer.token_to_id("[UNK]").unwrap_or(0));
                if let Some(slot) = weight.get_mut(id as usize) {
                    *slot = value as f32;
                }
            }
            weight
        }
        _ => {
            let name = inside(folder, "model.safetensors");
            let path = dir.join(&name);
            let bytes = model_dir.read(&name, MAX_WEIGHTS_BYTES)?;
            files.insert(name, sha256_hex(&bytes));
            let file =
                safetensors::SafeTensors::deserialize(&bytes).map_err(|error| invalid(&path, error))?;
            let view =
                file.tensor("weight").map_err(|_| invalid(&path, "no tensor weight (the query weights)"))?;
            if view.dtype() != safetensors::Dtype::F32 || view.shape().len() != 1 {
                return Err(invalid(
                    &path,
                    format!(
                        "weight is {:?} of shape {:?}, not F32 of one dimension",
                        view.dtype(),
                        view.shape()
                    ),
                ));
            }
            view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
        }
    };
    if weight.len() != vocab {
        return Err(invalid(
            &dir.join(folder),
            format!(
                "the query weights hold {} entries, the document encoder's vocabulary {vocab}",
                weight.len()
            ),
        ));
    }
    if let Some(at) = weight.iter().position(|w| !w.is_finite()) {
        return Err(invalid(&dir.join(folder), format!("query weight {at} is {}: not finite", weight[at])));
    }
    Ok(StaticEncoder { weight, tokenizer, max_tokens })
}

/// The prompt of each role as sentence-transformers 6.3's `encode_query` and `encode_document` take it:
/// `prompts.query` and `prompts.document`, nothing else. Its models start with an empty prompt of each (a
/// saved one replaces it), so neither `passage`, `corpus` nor `default_prompt_name` reaches those calls.
fn read_role_prompts(path: &Path, value: &Value) -> Result<BTreeMap<Role, String>> {
    let mut prompts = BTreeMap::new();
    let Some(declared) = value.get("prompts").filter(|v| !v.is_null()) else { return Ok(prompts) };
    let declared =
        declared.as_object().ok_or_else(|| invalid(path, "prompts is not an object of names to texts"))?;
    for (name, text) in declared {
        let Some(text) = text.as_str() else {
            return Err(invalid(path, format!("prompts.{name} is not a string")));
        };
        let role = match name.as_str() {
            "query" => Role::Query,
            "document" => Role::Document,
            _ => continue,
        };
        if !text.is_empty() {
            prompts.insert(role, text.to_owned());
        }
    }
    Ok(prompts)
}

/// A file name a configuration gives (an `idf.json`), inside its folder.
fn folder_name(path: &Path, name: &str) -> Result<String> {
    let name = Path::new(name).file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.is_empty() {
        return Err(invalid(path, "path names no file"));
    }
    Ok(name.to_owned())
}
