//! `Ollama`: embeddings from a local Ollama server (`POST /api/embed`), for users who already run one.
//!
//! Over-long prompts follow the evaluation contract: when Ollama refuses a text (HTTP 400), that text alone is
//! retried with its prompt cut to 500, then 300, then 120 Unicode scalar values, and the length used is
//! reported in [`Embedding::shortened_to`] and disclosed in the identity.

use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::identity::{Embedder, EmbedderIdentity, Embedding, normalize};

/// The contract's default Ollama model.
pub const DEFAULT_OLLAMA_MODEL: &str = "all-minilm:latest";
/// Where Ollama listens when `OLLAMA_HOST` is unset.
pub const DEFAULT_OLLAMA_HOST: &str = "http://127.0.0.1:11434";
/// Prompt lengths (in chars) tried, in order, for a text Ollama refuses.
pub const SHORTENED_PROMPT_LENGTHS: [usize; 3] = [500, 300, 120];

/// A client for one model on one Ollama server.
pub struct Ollama {
    host: String,
    client: reqwest::blocking::Client,
    identity: EmbedderIdentity,
    transient_retries: u32,
}

#[derive(Deserialize)]
struct EmbedResponse {
    embeddings: Vec<Vec<f32>>,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
}

enum Refusal {
    /// HTTP 400: this input cannot be embedded as it is.
    BadInput(String),
    Fatal(Error),
}

/// Turns `OLLAMA_HOST`'s forms (`host:port`, `http://host:port/`) into a base URL without trailing slash.
pub fn normalize_host(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    if host.starts_with("http://") || host.starts_with("https://") {
        host.to_owned()
    } else {
        format!("http://{host}")
    }
}

impl Ollama {
    /// A client for `model` at `host` (a base URL or `host:port`), or at `OLLAMA_HOST`, or at
    /// [`DEFAULT_OLLAMA_HOST`]. `dims` is checked against every vector returned.
    ///
    /// # Errors
    /// [`Error::OllamaUnavailable`] when the HTTP client cannot be built.
    pub fn new(host: Option<&str>, model: &str, dims: usize) -> Result<Self> {
        let host = host
            .map(str::to_owned)
            .or_else(|| std::env::var("OLLAMA_HOST").ok().filter(|h| !h.trim().is_empty()))
            .map_or_else(|| DEFAULT_OLLAMA_HOST.to_owned(), |h| normalize_host(&h));
        let client = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(300))
            .build()
            .map_err(|error| Error::OllamaUnavailable { host: host.clone(), reason: error.to_string() })?;
        let identity = EmbedderIdentity {
            model: model.to_owned(),
            dims,
            weights_sha256: None,
            tokenizer_sha256: None,
            max_tokens: 0,
            pooling: "server-defined".into(),
            normalization: "l2 (re-applied by the client)".into(),
            backend: "ollama".into(),
            backend_version: "api/embed".into(),
            overlong_policy: format!(
                "on HTTP 400 retry that prompt cut to {:?} Unicode scalar values, in order",
                SHORTENED_PROMPT_LENGTHS
            ),
            files: None,
            prompts: None,
            lower_case: None,
        };
        Ok(Ollama { host, client, identity, transient_retries: 3 })
    }

    /// The base URL in use.
    pub fn host(&self) -> &str {
        &self.host
    }

    fn request(&self, inputs: &[&str]) -> std::result::Result<Vec<Vec<f32>>, Refusal> {
        let url = format!("{}/api/embed", self.host);
        let body = serde_json::json!({ "model": self.identity.model, "input": inputs });
        let mut attempt = 0;
        loop {
            attempt += 1;
            let response = match self.client.post(&url).json(&body).send() {
                Ok(response) => response,
                Err(error) if attempt <= self.transient_retries && !error.is_connect() => {
                    std::thread::sleep(Duration::from_millis(250 << attempt));
                    continue;
                }
                Err(error) => {
                    return Err(Refusal::Fatal(Error::OllamaUnavailable {
                        host: self.host.clone(),
                        reason: error.to_string(),
                    }));
                }
            };
            let status = response.status().as_u16();
            let text = response.text().unwrap_or_default();
            let message =
                || serde_json::from_str::<ErrorResponse>(&text).map_or_else(|_| text.clone(), |e| e.error);
            return match status {
                200 => serde_json::from_str::<EmbedResponse>(&text).map(|r| r.embeddings).map_err(|error| {
                    Refusal::Fatal(Error::OllamaResponse {
                        host: self.host.clone(),
                        status,
                        message: format!("unexpected body: {error}"),
                    })
                }),
                404 => Err(Refusal::Fatal(Error::OllamaModelMissing {
                    host: self.host.clone(),
                    model: self.identity.model.clone(),
                })),
                400 => Err(Refusal::BadInput(message())),
                500..=599 if attempt <= self.transient_retries => {
                    std::thread::sleep(Duration::from_millis(250 << attempt));
                    continue;
                }
                _ => Err(Refusal::Fatal(Error::OllamaResponse {
                    host: self.host.clone(),
                    status,
                    message: message(),
                })),
            };
        }
    }

    fn embed_one_with_shortening(&self, text: &str) -> Result<(Vec<f32>, Option<usize>)> {
        let mut last_refusal = String::new();
        let full = std::iter::once(None).chain(SHORTENED_PROMPT_LENGTHS.iter().copied().map(Some));
        for limit in full {
            let prompt: String = match limit {
                None => text.to_owned(),
                Some(limit) => text.chars().take(limit).collect(),
            };
            match self.request(&[prompt.as_str()]) {
                Ok(mut vectors) if vectors.len() == 1 => return Ok((vectors.remove(0), limit)),
                Ok(vectors) => {
                    return Err(Error::OllamaResponse {
                        host: self.host.clone(),
                        status: 200,
                        message: format!("{} embeddings for 1 input", vectors.len()),
                    });
                }
                Err(Refusal::BadInput(message)) => last_refusal = message,
                Err(Refusal::Fatal(error)) => return Err(error),
            }
        }
        Err(Error::OllamaResponse {
            host: self.host.clone(),
            status: 400,
            message: format!("refused even at {} chars: {last_refusal}", SHORTENED_PROMPT_LENGTHS[2]),
        })
    }
}

impl Embedder for Ollama {
    fn identity(&self) -> &EmbedderIdentity {
        &self.identity
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let raw: Vec<(Vec<f32>, Option<usize>)> = match self.request(texts) {
            Ok(vectors) if vectors.len() == texts.len() => vectors.into_iter().map(|v| (v, None)).collect(),
            Ok(vectors) => {
                return Err(Error::OllamaResponse {
                    host: self.host.clone(),
                    status: 200,
                    message: format!("{} embeddings for {} inputs", vectors.len(), texts.len()),
                });
            }
            // One text of the batch was refused: find it by embedding one at a time.
            Err(Refusal::BadInput(_)) => {
                texts.iter().map(|text| self.embed_one_with_shortening(text)).collect::<Result<_>>()?
            }
            Err(Refusal::Fatal(error)) => return Err(error),
        };
        raw.into_iter()
            .enumerate()
            .map(|(index, (mut vector, shortened_to))| {
                if vector.len() != self.identity.dims {
                    return Err(Error::InvalidEmbedding {
                        index,
                        reason: format!("{} dimensions, expected {}", vector.len(), self.identity.dims),
                    });
                }
                normalize(&mut vector).map_err(|reason| Error::InvalidEmbedding { index, reason })?;
                Ok(Embedding { vector, tokens: 0, shortened_to })
            })
            .collect()
    }
}
