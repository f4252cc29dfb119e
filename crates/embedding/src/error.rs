//! The one error type of the crate.

use std::path::PathBuf;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while loading a model or embedding text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A model file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A prompt that, with the special tokens, fills the model's window: no token of any text would be seen.
    #[error(
        "the prompt {prompt:?} takes {tokens} tokens with the special ones, and the model keeps {max_tokens} \
         (max_seq_length): no text would be embedded; shorten the prompt or raise max_seq_length"
    )]
    PromptFillsWindow {
        /// The prompt's first characters.
        prompt: String,
        /// Its tokens, special tokens included (at most the window, as truncated).
        tokens: usize,
        /// The window.
        max_tokens: usize,
    },
    /// A model file exists but its content is not what it must be.
    #[error("invalid model file {path}: {reason}")]
    InvalidModelFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The weights' sha256 differs from the pinned digest.
    #[error(
        "{path} has sha256 {actual}, but the pinned digest is {expected}: refusing to embed with unknown weights"
    )]
    WeightDigestMismatch {
        /// The weights file.
        path: PathBuf,
        /// The pinned digest.
        expected: String,
        /// The file's digest.
        actual: String,
    },
    /// The tokenizer failed on a text.
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// A model file could not be written (test support).
    #[error("model error: {0}")]
    Model(String),
    /// The model produced a vector that cannot be normalised (zero, NaN or infinite).
    #[error("text {index} of the batch embedded to an invalid vector: {reason}")]
    InvalidEmbedding {
        /// Position of the text in the batch given.
        index: usize,
        /// What is wrong with the vector.
        reason: String,
    },
    /// The device asked for cannot run the forward pass (no driver, no GPU, no NVRTC, out of memory), or a
    /// launch on it failed.
    #[error("GPU: {0}")]
    Device(String),
    /// No Ollama server answered at the configured host.
    #[error("no Ollama server at {host} ({reason}); start it with `ollama serve` or set OLLAMA_HOST")]
    OllamaUnavailable {
        /// The base URL tried.
        host: String,
        /// The connection error.
        reason: String,
    },
    /// Ollama does not have the model.
    #[error("Ollama at {host} does not have model {model:?}; run `ollama pull {model}`")]
    OllamaModelMissing {
        /// The base URL.
        host: String,
        /// The model asked for.
        model: String,
    },
    /// Ollama answered with an error or an unexpected body.
    #[error("Ollama at {host} answered {status}: {message}")]
    OllamaResponse {
        /// The base URL.
        host: String,
        /// HTTP status.
        status: u16,
        /// The error text or what was wrong with the body.
        message: String,
    },
    /// A model file could not be downloaded.
    #[error("download of {url} failed: {reason}")]
    Download {
        /// What was fetched.
        url: String,
        /// Why it failed.
        reason: String,
    },
}
