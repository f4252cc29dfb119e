//! `SentenceBert`: a BERT sentence-transformers checkpoint run in-process by this crate's own forward pass
//! (`bert`), with what the checkpoint itself declares ([`Checkpoint`]): its shape, truncation, lower-casing,
//! pooling (CLS, mean, max, last token, weighted mean or √length mean, a prompt's tokens left out when it says
//! so), normalisation and prompts. A text's vector does not depend on what it is batched with.
//!
//! all-MiniLM-L6-v2 is the documented default, pinned by name: every file that shapes its vectors must have
//! its published digest, and its identity is the one its fixtures have always recorded.

use crate::model_dir::{MAX_TOKENIZER_BYTES, MAX_WEIGHTS_BYTES, ModelDir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::bert::{BACKEND, BACKEND_VERSION, Bert, Buffers, Kernels};
use crate::checkpoint::{Checkpoint, Pooling};
use crate::error::{Error, Result};
use crate::gpu::{Device, DeviceError, DeviceRequest, GpuModel};
use crate::identity::{Embedder, EmbedderIdentity, Embedding, normalizable, normalize};
use crate::sha256_hex;

/// The model name recorded in identities.
pub const ALL_MINILM_L6_V2: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// sha256 of all-MiniLM-L6-v2's `model.safetensors`, as published by sentence-transformers.
pub const ALL_MINILM_L6_V2_WEIGHTS_SHA256: &str =
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
/// sentence-transformers' `max_seq_length` for this model.
pub const MAX_TOKENS: usize = 256;

/// all-MiniLM-L6-v2's published files that shape a vector, with their sha256: a directory holding its
/// weights must hold these (the ones present), or it is not the model its name says.
pub const ALL_MINILM_L6_V2_FILES: [(&str, &str); 6] = [
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    ("modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
    ("1_Pooling/config.json", "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
    ("sentence_bert_config.json", "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"),
    ("config_sentence_transformers.json", "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"),
];

/// Which weights a directory must hold before they are used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightPin {
    /// all-MiniLM-L6-v2's published digest ([`ALL_MINILM_L6_V2_WEIGHTS_SHA256`]).
    AllMiniLmL6V2,
    /// Another digest (lowercase hex), for another BERT checkpoint.
    Sha256(String),
    /// Any weights; the digest is still measured and recorded.
    Unpinned,
}

/// The most device memory one GPU batch takes (its activations): larger batches are no faster, and a batch's
/// work stays short enough to show progress.
const GPU_BATCH_BYTES: usize = 4 << 30;

/// A BERT sentence embedder on this crate's forward pass (the CPU's, or the same operations on a GPU that has
/// passed its self-check).
pub struct SentenceBert {
    model: Bert,
    pub(crate) checkpoint: Checkpoint,
    pub(crate) weights: Vec<u8>,
    tokenizer: Tokenizer,
    identity: EmbedderIdentity,
    digests: crate::registry::Digests,
    batch_size: usize,
    /// The Dense modules after the pooling (`Checkpoint::dense`), with their weights.
    dense: Vec<crate::dense::Dense>,
    /// The forward pass on a GPU (or the emulator), when one was asked for and found.
    pub(crate) gpu: Option<Gpu>,
}

/// A text's vector, once embedded.
type Slot = Option<Vec<f32>>;

/// A model on a GPU, and which.
pub(crate) struct Gpu {
    model: GpuModel,
    device: Device,
}

impl Gpu {
    pub(crate) fn new(model: GpuModel, device: Device) -> Gpu {
        Gpu { model, device }
    }
}

/// The device [`SentenceBert::use_device`] chose, and, when `auto` found no usable GPU, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceChoice {
    /// Where the forward pass runs now.
    pub device: Device,
    /// Why `auto` runs on the CPU: the GPU that was looked for and what was missing.
    pub no_gpu: Option<String>,
}

/// Every file that shapes a checkpoint's vectors, by name, with its hex sha256.
fn digests_of(
    checkpoint: &Checkpoint,
    weights_sha256: &str,
    tokenizer_sha256: &str,
) -> crate::registry::Digests {
    let mut digests = checkpoint.files.clone();
    digests.insert("model.safetensors".to_owned(), weights_sha256.to_owned());
    digests.insert("tokenizer.json".to_owned(), tokenizer_sha256.to_owned());
    digests
}

fn invalid(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::InvalidModelFile { path: path.to_path_buf(), reason: reason.to_string() }
}

impl SentenceBert {
    /// Loads the checkpoint in `dir` (`model.safetensors`, `tokenizer.json`, `config.json`, and the
    /// sentence-transformers files when present), checking the weights against `pin` before anything else
    /// reads them. `model` is the name recorded in the identity.
    ///
    /// # Errors
    /// [`Error::Io`] for a missing file, [`Error::WeightDigestMismatch`], [`Error::InvalidModelFile`] naming the
    /// file and field the checkpoint declares and this crate cannot run, or a file of all-MiniLM-L6-v2 that is
    /// not its published one.
    pub fn load(dir: &Path, model: &str, pin: WeightPin) -> Result<Self> {
        let model_dir = ModelDir::open(dir)?;
        let weights = model_dir.read("model.safetensors", MAX_WEIGHTS_BYTES)?;
        let weights_sha256 = sha256_hex(&weights);
        SentenceBert::from_weights(dir, &model_dir, (weights, weights_sha256), model, pin)
    }

    /// [`SentenceBert::load`] once the weights are read and hashed, so that a caller that hashed them to choose
    /// the name reads and hashes them once.
    fn from_weights(
        dir: &Path,
        model_dir: &ModelDir,
        (weights, weights_sha256): (Vec<u8>, String),
        model: &str,
        pin: WeightPin,
    ) -> Result<Self> {
        let weights_path = dir.join("model.safetensors");
        let expected = match &pin {
            WeightPin::AllMiniLmL6V2 => Some(ALL_MINILM_L6_V2_WEIGHTS_SHA256.to_owned()),
            WeightPin::Sha256(hex) => Some(hex.to_lowercase()),
            WeightPin::Unpinned => None,
        };
        if let Some(expected) = expected
            && expected != weights_sha256
        {
            return Err(Error::WeightDigestMismatch { path: weights_path, expected, actual: weights_sha256 });
        }
        let mut checkpoint = Checkpoint::read(dir)?;
        let mut dense = Vec::with_capacity(checkpoint.dense.len());
        for spec in checkpoint.dense.clone() {
            let (module, digest) = crate::dense::Dense::load(model_dir, dir, &spec)?;
            checkpoint.files.insert(format!("{}/model.safetensors", spec.path), digest);
            dense.push(module);
        }
        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer_bytes = model_dir.read("tokenizer.json", MAX_TOKENIZER_BYTES)?;
        let tokenizer_sha256 = sha256_hex(&tokenizer_bytes);
        let all_minilm = weights_sha256 == ALL_MINILM_L6_V2_WEIGHTS_SHA256;
        if all_minilm {
            let found: BTreeMap<&str, &str> = checkpoint
                .files
                .iter()
                .map(|(name, digest)| (name.as_str(), digest.as_str()))
                .chain([("tokenizer.json", tokenizer_sha256.as_str())])
                .collect();
            for (name, published) in ALL_MINILM_L6_V2_FILES {
                if let Some(digest) = found.get(name)
                    && *digest != published
                {
                    return Err(invalid(
                        &dir.join(name),
                        format!(
                            "has sha256 {digest}, not all-MiniLM-L6-v2's published {published}: the weights are that model's, this file is not"
                        ),
                    ));
                }
            }
        }
        let mut tokenizer =
            Tokenizer::from_bytes(&tokenizer_bytes).map_err(|error| invalid(&tokenizer_path, error))?;
        if let Some(add_prefix_space) = checkpoint.sentencepiece {
            as_transformers_runs_it(&mut tokenizer, &tokenizer_bytes, add_prefix_space)
                .map_err(|reason| invalid(&tokenizer_path, reason))?;
        }
        if let Some(add_prefix_space) = checkpoint.qwen2 {
            as_qwen2_runs_it(&mut tokenizer, add_prefix_space)
                .map_err(|reason| invalid(&tokenizer_path, reason))?;
        }
        // tokenizer.json may ship with another truncation (all-MiniLM-L6-v2's says 128) and fixed padding;
        // sentence-transformers truncates at max_seq_length and pads per batch. Padding is done here, per
        // length-sorted batch.
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: checkpoint.max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|error| invalid(&tokenizer_path, error))?;
        tokenizer.with_padding(None);
        let specials = tokenizer.encode("", true).map_err(|error| invalid(&tokenizer_path, error))?.len();
        if specials >= checkpoint.max_tokens {
            return Err(invalid(
                &dir.join("sentence_bert_config.json"),
                format!(
                    "max_seq_length {} leaves no room for a text beside the tokenizer's {specials} special tokens",
                    checkpoint.max_tokens
                ),
            ));
        }
        if checkpoint.config.is_qwen3() && checkpoint.pooling == crate::checkpoint::Pooling::LastToken {
            appends_an_end_token(&tokenizer).map_err(|reason| invalid(&tokenizer_path, reason))?;
        }
        let bert = Bert::load(checkpoint.config.clone(), &weights, Kernels::best())
            .map_err(|error| invalid(&weights_path, error))?;
        let digests = digests_of(&checkpoint, &weights_sha256, &tokenizer_sha256);
        let identity = identity(model, &checkpoint, &weights_sha256, &tokenizer_sha256, all_minilm);
        // A registry name is a claim about these bytes and how they are read: it is refused beside any other.
        if let Some(known) = crate::registry::known_models()?.into_iter().find(|known| known.name == model)
            && let Some(reason) = crate::registry::mismatch(&known, &digests)
                .or_else(|| crate::registry::unmet(&known, &identity))
        {
            return Err(invalid(dir, format!("is not {model}: {reason}")));
        }
        Ok(SentenceBert {
            model: bert,
            checkpoint,
            weights,
            tokenizer,
            identity,
            digests,
            batch_size: 64,
            dense,
            gpu: None,
        })
    }

    /// The digest (lowercase hex sha256) of every file that shapes this checkpoint's vectors, by file name.
    pub fn digests(&self) -> &crate::registry::Digests {
        &self.digests
    }

    /// Loads whatever checkpoint `dir` holds, its digests measured and recorded, and names it by them: the
    /// registry's name (`configs/models.json`) when every file that shapes its vectors has the digest the
    /// registry lists, else `bert-sha256-<hex of the weights>`. all-MiniLM-L6-v2's weights are held to its
    /// published files (a directory with its weights and another file is refused, not renamed).
    ///
    /// # Errors
    /// As [`SentenceBert::load`].
    pub fn load_measured(dir: &Path) -> Result<Self> {
        let model_dir = ModelDir::open(dir)?;
        let weights = model_dir.read("model.safetensors", MAX_WEIGHTS_BYTES)?;
        let digest = sha256_hex(&weights);
        if digest == ALL_MINILM_L6_V2_WEIGHTS_SHA256 {
            return SentenceBert::from_weights(
                dir,
                &model_dir,
                (weights, digest),
                ALL_MINILM_L6_V2,
                WeightPin::AllMiniLmL6V2,
            );
        }
        let name = crate::registry::digest_name(&digest);
        let pin = WeightPin::Sha256(digest.clone());
        let mut model = SentenceBert::from_weights(dir, &model_dir, (weights, digest), &name, pin)?;
        if let Some(name) = crate::registry::name_of(&model.digests, &model.identity)? {
            model.identity.model = name;
        }
        Ok(model)
    }

    /// Runs the forward pass with `kernels` instead of the fastest this CPU has. Every kind gives the same
    /// bits; this exists to show it.
    ///
    /// # Errors
    /// [`Error::InvalidModelFile`] when this CPU cannot run `kernels`.
    pub fn use_kernels(&mut self, kernels: Kernels) -> Result<()> {
        if !Kernels::available().contains(&kernels) {
            return Err(Error::InvalidModelFile {
                path: PathBuf::from("model.safetensors"),
                reason: format!("this CPU cannot run the {kernels:?} kernels"),
            });
        }
        self.model = Bert::load(self.checkpoint.config.clone(), &self.weights, kernels)
            .map_err(|reason| Error::InvalidModelFile { path: PathBuf::from("model.safetensors"), reason })?;
        Ok(())
    }

    /// The kernels the CPU forward pass runs on.
    pub fn kernels(&self) -> Kernels {
        self.model.kernels()
    }

    /// Runs the forward pass on the device `request` asks for: the CPU, an NVIDIA GPU (`cuda`; `auto` when one
    /// is found and passes the self-check) or the GPU kernels under the emulator. Each is designed to give the
    /// CPU's bits, which the emulator shows in CI and the self-check on the GPU found; only speed is meant to
    /// differ.
    ///
    /// # Errors
    /// [`Error::Device`] when `cuda` finds no usable GPU (what is missing named, or what its self-check found
    /// differing), or the weights cannot be put
    /// on it.
    pub fn use_device(&mut self, request: DeviceRequest) -> Result<DeviceChoice> {
        let pooling = self.checkpoint.pooling;
        if !self.checkpoint.config.runs_on_gpu() || pooling.gpu_mode().is_none() || !self.dense.is_empty() {
            // The GPU kernels mirror the learned-position encoders, CLS, mean and max pooling and nothing after
            // the pooling but the normalisation: rotary positions, gated feed-forwards, pre-norm blocks, bands,
            // the other poolings and Dense modules run on the CPU until kernels.cu has them too.
            let why = if !self.checkpoint.config.runs_on_gpu() {
                "the GPU kernels run BERT, XLM-RoBERTa and MPNet; a NomicBert, ModernBERT or Qwen3 checkpoint \
                 runs on the CPU"
                    .to_owned()
            } else if pooling.gpu_mode().is_none() {
                format!(
                    "the GPU kernels pool by CLS, mean or max; {} pooling runs on the CPU",
                    pooling.name()
                )
            } else {
                "the GPU kernels have no Dense module; a checkpoint with one runs on the CPU".to_owned()
            };
            return match request {
                DeviceRequest::Cpu => Ok(DeviceChoice { device: self.device(), no_gpu: None }),
                DeviceRequest::Auto => {
                    self.gpu = None;
                    Ok(DeviceChoice { device: self.device(), no_gpu: Some(why.to_owned()) })
                }
                DeviceRequest::Cuda | DeviceRequest::Emulated => {
                    Err(Error::Device(format!("{why} (--device cpu)")))
                }
            };
        }
        let (opened, no_gpu) = crate::gpu::open(request)?;
        self.gpu = match opened {
            None => None,
            Some(opened) => {
                let weights = crate::bert::Weights::read(self.checkpoint.config.clone(), &self.weights)
                    .map_err(|reason| invalid(Path::new("model.safetensors"), reason))?;
                let model = GpuModel::upload(opened.backend, &weights).map_err(|error| {
                    Error::Device(format!("putting the weights on {}: {error}", opened.device.describe()))
                })?;
                Some(Gpu::new(model, opened.device))
            }
        };
        Ok(DeviceChoice { device: self.device(), no_gpu })
    }

    /// Where the forward pass runs.
    pub fn device(&self) -> Device {
        match &self.gpu {
            Some(gpu) => gpu.device.clone(),
            None => Device::Cpu(self.kernels()),
        }
    }

    /// What the checkpoint declares.
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// Loads all-MiniLM-L6-v2 from `dir`, pinned to its published files.
    ///
    /// # Errors
    /// As [`SentenceBert::load`].
    pub fn all_minilm_l6_v2(dir: &Path) -> Result<Self> {
        SentenceBert::load(dir, ALL_MINILM_L6_V2, WeightPin::AllMiniLmL6V2)
    }

    /// Sets how many texts run through the model together (default 64). Results do not depend on it, to the
    /// bit: only speed and memory do.
    pub fn set_batch_size(&mut self, batch_size: usize) {
        self.batch_size = batch_size.max(1);
    }

    /// The model input ids for `text` (lower-cased first when the checkpoint says so), after truncation,
    /// special tokens included.
    ///
    /// # Errors
    /// [`Error::Tokenizer`].
    pub fn input_ids(&self, text: &str) -> Result<Vec<u32>> {
        let lowered: String;
        let text = if self.checkpoint.lower_case {
            lowered = python_lower(text);
            lowered.as_str()
        } else {
            text
        };
        let encoding =
            self.tokenizer.encode(text, true).map_err(|error| Error::Tokenizer(error.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Embeds each text with `prompt` before it, as sentence-transformers' `encode(prompt=...)` does: the
    /// prompt and the text are one string, and when the pooling leaves the prompt out (`include_prompt`
    /// false) the prompt's tokens (`[CLS]` and the prompt, as the prompt alone tokenizes) are left out of it.
    ///
    /// # Errors
    /// As [`Embedder::embed`].
    pub fn embed_prompted(
        &self,
        prompt: &str,
        texts: &[&str],
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Embedding>> {
        let prompt_ids = self.input_ids(prompt)?.len();
        // `[CLS] prompt [SEP]` already fills the window: every text would be cut away entirely.
        if prompt_ids >= self.checkpoint.max_tokens {
            return Err(Error::PromptFillsWindow {
                prompt: prompt.chars().take(60).collect(),
                tokens: prompt_ids,
                max_tokens: self.checkpoint.max_tokens,
            });
        }
        let skip = if prompt.is_empty() || self.checkpoint.include_prompt { 0 } else { prompt_ids - 1 };
        let prompted: Vec<String> = texts.iter().map(|text| format!("{prompt}{text}")).collect();
        let refs: Vec<&str> = prompted.iter().map(String::as_str).collect();
        self.embed_skipping(&refs, skip, done)
    }

    /// [`Embedder::embed`], calling `done(n)` after each batch of `n` texts: for a progress bar over a long
    /// call. The vectors are the same bits either way.
    ///
    /// # Errors
    /// As [`Embedder::embed`].
    pub fn embed_reporting(&self, texts: &[&str], done: &(dyn Fn(usize) + Sync)) -> Result<Vec<Embedding>> {
        self.embed_skipping(texts, 0, done)
    }

    /// Embeds `texts`, leaving each sequence's first `skip` tokens out of the pooling.
    fn embed_skipping(
        &self,
        texts: &[&str],
        skip: usize,
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Embedding>> {
        // On every thread: one thread alone left the other idle for 1-2 % of the time.
        let encoded: Vec<Vec<u32>> =
            texts.par_iter().map(|text| self.input_ids(text)).collect::<Result<_>>()?;
        // Batches of similar length keep the work per batch even; results go back to the caller's order.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&index| (std::cmp::Reverse(encoded[index].len()), index));
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        // On a GPU each text comes back pooled and, when the checkpoint normalises, normalised there too.
        let mut normalized: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        match &self.gpu {
            None => {
                let mut buffers = Buffers::default();
                for chunk in order.chunks(self.batch_size) {
                    let batch: Vec<&[u32]> = chunk.iter().map(|&index| encoded[index].as_slice()).collect();
                    let pooled = self.model.pooled(&batch, &mut buffers, self.checkpoint.pooling, skip)?;
                    for (&index, vector) in chunk.iter().zip(pooled) {
                        vectors[index] = Some(vector);
                    }
                    done(chunk.len());
                }
            }
            Some(gpu) => self.embed_on(gpu, &encoded, &order, skip, (&mut vectors, &mut normalized), done)?,
        }
        vectors
            .into_iter()
            .zip(normalized)
            .zip(encoded)
            .enumerate()
            .map(|(index, ((vector, normalized), ids))| {
                let mut vector = vector.unwrap_or_default();
                for dense in &self.dense {
                    vector = dense.apply(&vector);
                }
                if self.checkpoint.normalize {
                    match normalized {
                        Some(normalized) => {
                            normalizable(&vector)
                                .map_err(|reason| Error::InvalidEmbedding { index, reason })?;
                            vector = normalized;
                        }
                        None => normalize(&mut vector)
                            .map_err(|reason| Error::InvalidEmbedding { index, reason })?,
                    }
                }
                // sentence-transformers cuts after the whole pipeline; a checkpoint that normalises is
                // normalised again, as its `encode(normalize_embeddings=True)` does and as its cosine
                // similarity scores the cut vectors.
                if let Some(dims) = self.checkpoint.truncate_dim {
                    vector.truncate(dims);
                    if self.checkpoint.normalize {
                        normalize(&mut vector).map_err(|reason| Error::InvalidEmbedding { index, reason })?;
                    }
                }
                Ok(Embedding { vector, tokens: ids.len(), shortened_to: None })
            })
            .collect()
    }

    /// The GPU's share of [`SentenceBert::embed_skipping`]: batches of `order` (longest first) as large as a
    /// share of the GPU's free memory allows, each batch halved when the GPU runs out of memory mid-run.
    fn embed_on(
        &self,
        gpu: &Gpu,
        encoded: &[Vec<u32>],
        order: &[usize],
        skip: usize,
        (vectors, normalized): (&mut [Slot], &mut [Slot]),
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<()> {
        let device_error = |error: DeviceError| Error::Device(format!("{}: {error}", gpu.device.describe()));
        let lengths: Vec<usize> = order.iter().map(|&index| encoded[index].len()).collect();
        let free = gpu.model.free_memory().map_err(device_error)?;
        let mut budget = (free / 4 * 3).min(GPU_BATCH_BYTES);
        let mut at = 0;
        while at < order.len() {
            let take = gpu.model.batch_within(&lengths[at..], budget);
            let chunk = &order[at..at + take];
            let batch: Vec<&[u32]> = chunk.iter().map(|&index| encoded[index].as_slice()).collect();
            self.checkpoint.config.check(&batch)?;
            match gpu.model.pooled(&batch, self.checkpoint.pooling, skip, self.checkpoint.normalize) {
                Ok(pooled) => {
                    let mut fresh = pooled.normalized.map(|n| n.into_iter().map(Some).collect::<Vec<_>>());
                    for (slot, (&index, vector)) in chunk.iter().zip(pooled.pooled).enumerate() {
                        vectors[index] = Some(vector);
                        if let Some(fresh) = fresh.as_mut() {
                            normalized[index] = fresh[slot].take();
                        }
                    }
                    at += take;
                    done(take);
                }
                Err(DeviceError::OutOfMemory { .. }) if take > 1 => {
                    budget = gpu.model.batch_bytes(&lengths[at..at + take / 2]);
                }
                Err(DeviceError::OutOfMemory { bytes }) => {
                    return Err(Error::Device(format!(
                        "{}: out of memory for one text of {} tokens ({} more wanted, {} free)",
                        gpu.device.describe(),
                        lengths[at],
                        crate::gpu::human_bytes(bytes as u64),
                        crate::gpu::human_bytes(gpu.model.free_memory().unwrap_or(0) as u64),
                    )));
                }
                Err(error) => return Err(device_error(error)),
            }
        }
        Ok(())
    }
}

impl Embedder for SentenceBert {
    fn identity(&self) -> &EmbedderIdentity {
        &self.identity
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        self.embed_reporting(texts, &|_| {})
    }

    fn declared_prompt(&self, role: crate::Role) -> String {
        self.checkpoint.prompt(role).to_owned()
    }

    fn has_own_text_policy(&self) -> bool {
        let all_minilm = self.identity.weights_sha256.as_deref().map(|d| d.trim_start_matches("sha256:"))
            == Some(ALL_MINILM_L6_V2_WEIGHTS_SHA256);
        self.checkpoint.sentence_transformers && !all_minilm
    }

    fn embed_prompted(&self, prompt: &str, texts: &[&str]) -> Result<Vec<Embedding>> {
        SentenceBert::embed_prompted(self, prompt, texts, &|_| {})
    }

    fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }
}

/// The identity a checkpoint's vectors carry: the digest of every file that shapes a vector, so that a change in
/// any of them is a different model and a verifier sees every byte the name stands for. A sentence-transformers
/// checkpoint other than all-MiniLM-L6-v2 adds its prompts and its lower-casing (all-MiniLM-L6-v2 declares
/// neither, and a bare directory is read with the defaults).
fn identity(
    model: &str,
    checkpoint: &Checkpoint,
    weights_sha256: &str,
    tokenizer_sha256: &str,
    all_minilm: bool,
) -> EmbedderIdentity {
    let max_tokens = checkpoint.max_tokens;
    let described = checkpoint.sentence_transformers && !all_minilm;
    let pooling = match (checkpoint.pooling, checkpoint.include_prompt) {
        (Pooling::Mean, false) => "mean without the prompt's tokens".to_owned(),
        (Pooling::Max, false) => "max without the prompt's tokens".to_owned(),
        (Pooling::Cls, false) => "cls, the first token after the prompt's".to_owned(),
        (Pooling::WeightedMean, false) => "weightedmean without the prompt's tokens".to_owned(),
        (Pooling::MeanSqrtLen, false) => "mean_sqrt_len_tokens without the prompt's tokens".to_owned(),
        (pooling, _) => pooling.name().to_owned(),
    };
    EmbedderIdentity {
        model: model.to_owned(),
        dims: checkpoint.dims(),
        weights_sha256: Some(format!("sha256:{weights_sha256}")),
        tokenizer_sha256: Some(format!("sha256:{tokenizer_sha256}")),
        max_tokens,
        pooling,
        normalization: if checkpoint.normalize { "l2" } else { "none" }.into(),
        backend: BACKEND.into(),
        backend_version: BACKEND_VERSION.into(),
        overlong_policy: format!("truncate to {max_tokens} tokens"),
        files: Some(
            checkpoint
                .files
                .iter()
                .map(|(name, digest)| (name.clone(), format!("sha256:{digest}")))
                .collect(),
        ),
        prompts: (described && !checkpoint.prompts.is_empty()).then(|| {
            checkpoint.prompts.iter().map(|(role, prompt)| (role.name().to_owned(), prompt.clone())).collect()
        }),
        lower_case: (described && checkpoint.lower_case).then_some(true),
    }
}

/// The files a model directory must hold.
pub const MODEL_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Returns true if and only if `dir` holds every file of [`MODEL_FILES`].
pub fn is_model_dir(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|file| dir.join(file).is_file())
}

/// The directory to load the model from: `explicit` (a `--model-dir` flag), else `SCIFACT_MODEL_DIR`, else
/// the user cache directory when it holds the model. `None` when none of them does.
pub fn find_model_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = explicit {
        return Some(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os("SCIFACT_MODEL_DIR").filter(|dir| !dir.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    crate::acquire::model_cache_dir().filter(|dir| is_model_dir(dir))
}

/// Gives a SentencePiece tokenizer.json the pipeline transformers' `XLMRobertaTokenizer` builds around its
/// Unigram vocabulary, which is not the file's own: the file's precompiled SentencePiece normalizer alone (any
/// other normalizer dropped), whitespace split then `▁` prepended (`add_prefix_space`), and `<s> $A </s>`.
/// Read as the file says, a text with a ligature or doubled spaces gets other tokens than sentence-transformers
/// gives it.
fn as_transformers_runs_it(
    tokenizer: &mut Tokenizer,
    bytes: &[u8],
    add_prefix_space: bool,
) -> std::result::Result<(), String> {
    use tokenizers::normalizers::NormalizerWrapper;
    use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
    use tokenizers::pre_tokenizers::sequence::Sequence;
    use tokenizers::pre_tokenizers::whitespace::WhitespaceSplit;
    use tokenizers::processors::template::TemplateProcessing;
    let raw: serde_json::Value = serde_json::from_slice(bytes).map_err(|error| error.to_string())?;
    let normalizers = match &raw["normalizer"] {
        serde_json::Value::Object(n) if n.get("type").and_then(|t| t.as_str()) == Some("Sequence") => {
            n.get("normalizers").and_then(|list| list.as_array()).cloned().unwrap_or_default()
        }
        serde_json::Value::Null => Vec::new(),
        other => vec![other.clone()],
    };
    let precompiled = normalizers
        .into_iter()
        .find(|n| n["type"] == "Precompiled" && n.get("precompiled_charsmap").is_some())
        .map(serde_json::from_value::<NormalizerWrapper>)
        .transpose()
        .map_err(|error| format!("the precompiled normalizer: {error}"))?;
    tokenizer.with_normalizer(precompiled).map_err(|error| error.to_string())?;
    let scheme = if add_prefix_space { PrependScheme::Always } else { PrependScheme::Never };
    tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![
        WhitespaceSplit.into(),
        Metaspace::new('\u{2581}', scheme, true).into(),
    ])));
    let id = |token: &str| tokenizer.token_to_id(token).ok_or_else(|| format!("no {token} token"));
    let (bos, eos) = (id("<s>")?, id("</s>")?);
    let template = TemplateProcessing::builder()
        .try_single("<s> $A </s>")
        .map_err(|error| error.to_string())?
        .special_tokens(vec![("<s>", bos), ("</s>", eos)])
        .build()
        .map_err(|error| error.to_string())?;
    tokenizer.with_post_processor(Some(template));
    Ok(())
}

/// The pipeline transformers' `Qwen2Tokenizer` (Qwen3's) runs over tokenizer.json's byte-level BPE: its
/// vocabulary, merges, added tokens and post-processor are the file's, but the normaliser (NFC) and the
/// pre-tokenizer (the class's split regex, isolated, then ByteLevel without its own regex) are rebuilt from the
/// class's code (`tokenization_qwen2.py`), whatever the file says.
fn as_qwen2_runs_it(tokenizer: &mut Tokenizer, add_prefix_space: bool) -> std::result::Result<(), String> {
    use tokenizers::normalizers::unicode::NFC;
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::pre_tokenizers::sequence::Sequence;
    use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
    use tokenizers::tokenizer::SplitDelimiterBehavior;
    const PRETOKENIZE_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    tokenizer.with_normalizer(Some(NFC)).map_err(|error| error.to_string())?;
    let split =
        Split::new(SplitPattern::Regex(PRETOKENIZE_REGEX.into()), SplitDelimiterBehavior::Isolated, false)
            .map_err(|error| format!("the pre-tokenizer's regex: {error}"))?;
    tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![
        split.into(),
        ByteLevel::new(add_prefix_space, true, false).into(),
    ])));
    Ok(())
}

/// Last-token pooling reads the token the post-processor appends (Qwen3-Embedding's `<|endoftext|>`): a
/// tokenizer.json whose post-processor appends no special token would pool a text's last word instead, so it
/// is refused. (The token was added to the published files after their release: an older revision lacks it.)
fn appends_an_end_token(tokenizer: &Tokenizer) -> std::result::Result<(), String> {
    let encoding = tokenizer.encode("a", true).map_err(|error| error.to_string())?;
    if encoding.get_special_tokens_mask().last() == Some(&1) {
        return Ok(());
    }
    Err("its post-processor appends no end token (<|endoftext|>) for last-token pooling to read: take \
         tokenizer.json from a revision whose post-processor appends it (QwenLM/Qwen3-Embedding#54)"
        .into())
}

/// Lower-cases as Python's `str.lower`, which sentence-transformers applies for `do_lower_case`: full Unicode
/// mappings, and a capital sigma ending a word becomes the final sigma (ς), not the σ character-by-character
/// lower-casing gives.
pub(crate) fn python_lower(text: &str) -> String {
    text.to_lowercase()
}

#[cfg(test)]
mod tests {
    /// The largest difference between `model`'s document vectors of fixtures/modern's texts and
    /// sentence-transformers' for checkpoint `name` there.
    fn largest_difference(model: &super::SentenceBert, name: &str) -> f64 {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/modern");
        let reference: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join("reference.json")).unwrap()).unwrap();
        let texts: Vec<&str> =
            reference["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        let expected = reference["checkpoints"][name]["document"].as_array().unwrap();
        let prompt = model.checkpoint.prompt(crate::Role::Document).to_owned();
        let ours = model.embed_prompted(&prompt, &texts, &|_| {}).unwrap();
        let mut worst = 0.0f64;
        for (mine, theirs) in ours.iter().zip(expected) {
            for (a, b) in mine.vector.iter().zip(theirs.as_array().unwrap()) {
                worst = worst.max((f64::from(*a) - b.as_f64().unwrap()).abs());
            }
        }
        worst
    }

    fn modern(name: &str) -> super::SentenceBert {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/modern");
        super::SentenceBert::load(&root.join(name), name, super::WeightPin::Unpinned).unwrap()
    }

    /// The modern parity reference notices a rotary table one off: each frequency taking the next one's place
    /// moves a component of nomic-native's vectors beyond the tolerance, which the right tables keep. (Shifting
    /// every position by one would not: attention sees only the positions' differences.)
    #[test]
    fn a_rotary_table_one_off_leaves_the_tolerance() {
        let mut model = modern("nomic-native");
        assert!(largest_difference(&model, "nomic-native") <= 1e-5);
        model.model.put_rotary_frequencies_one_off();
        let shifted = largest_difference(&model, "nomic-native");
        assert!(shifted > 1e-4, "frequencies one off moved no component beyond {shifted:e}");
    }

    /// The same for ModernBERT's local bands: one key more on each side moves a component beyond it.
    #[test]
    fn a_local_band_one_wider_leaves_the_tolerance() {
        let mut model = modern("modernbert-cls");
        assert!(largest_difference(&model, "modernbert-cls") <= 1e-5);
        model.model.put_bands_one_wider();
        let widened = largest_difference(&model, "modernbert-cls");
        assert!(widened > 1e-4, "a band one wider moved no component beyond {widened:e}");
    }

    /// The same for a decoder's causal rows: each query seeing one key after its own moves a component of
    /// qwen3-lasttoken's vectors beyond it, and so does a rotary table one off.
    #[test]
    fn a_causal_row_one_further_or_a_rotary_table_one_off_leaves_the_tolerance() {
        let mut model = modern("qwen3-lasttoken");
        assert!(largest_difference(&model, "qwen3-lasttoken") <= 1e-5);
        model.model.put_causal_rows_one_further();
        let peeked = largest_difference(&model, "qwen3-lasttoken");
        assert!(peeked > 1e-4, "a causal row one further moved no component beyond {peeked:e}");
        let mut model = modern("qwen3-lasttoken");
        model.model.put_rotary_frequencies_one_off();
        let shifted = largest_difference(&model, "qwen3-lasttoken");
        assert!(shifted > 1e-4, "frequencies one off moved no component beyond {shifted:e}");
    }

    #[test]
    fn lower_casing_is_python_s() {
        // Each expected string is what Python 3's str.lower gives.
        assert_eq!(super::python_lower("ΟΔΟΣ ΣΑΣ. ΣΑ Σ"), "οδος σας. σα σ");
        assert_eq!(super::python_lower("İSTANBUL"), "i\u{307}stanbul");
        assert_eq!(super::python_lower("ΌΣΟΣ"), "όσος");
    }
}
