//! The Ollama client against a fake server on 127.0.0.1 that speaks `/api/embed`'s documented shapes.

use std::sync::{Arc, Mutex};

use embedding::{Embedder, Error, Ollama, normalize_host};

use crate::http::{Request, serve};

/// A fake Ollama: knows one model, refuses inputs longer than 400 chars with HTTP 400, and embeds a text as
/// a vector built from its length. Logs the inputs of every request.
fn fake_ollama(log: Arc<Mutex<Vec<Vec<String>>>>) -> String {
    serve(move |request: &Request| {
        if request.path != "/api/embed" {
            return (404, "text/plain", b"404 page not found".to_vec());
        }
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        if body["model"] != "all-minilm:latest" {
            let error = serde_json::json!({"error": format!("model \"{}\" not found, try pulling it first", body["model"].as_str().unwrap_or(""))});
            return (404, "application/json", error.to_string().into_bytes());
        }
        let inputs: Vec<String> = serde_json::from_value(body["input"].clone()).unwrap();
        log.lock().unwrap().push(inputs.clone());
        if inputs.iter().any(|input| input.chars().count() > 400) {
            let error = serde_json::json!({"error": "the input length exceeds the context length"});
            return (400, "application/json", error.to_string().into_bytes());
        }
        let embeddings: Vec<Vec<f32>> =
            inputs.iter().map(|input| vec![input.chars().count() as f32, 3.0, 4.0]).collect();
        let response = serde_json::json!({"model": "all-minilm:latest", "embeddings": embeddings});
        (200, "application/json", response.to_string().into_bytes())
    })
}

#[test]
fn embeds_a_batch_in_one_request_and_normalises() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let host = fake_ollama(log.clone());
    let client = Ollama::new(Some(&host), "all-minilm:latest", 3).unwrap();
    let embeddings = client.embed(&["ab", "abcd"]).unwrap();
    assert_eq!(log.lock().unwrap().len(), 1, "one request for the batch");
    let expected = |n: f32| {
        let norm = (n * n + 25.0).sqrt();
        vec![n / norm, 3.0 / norm, 4.0 / norm]
    };
    assert_eq!(embeddings[0].vector, expected(2.0));
    assert_eq!(embeddings[1].vector, expected(4.0));
    assert_eq!(embeddings[0].shortened_to, None);
    assert_eq!(client.identity().backend, "ollama");
    assert!(client.identity().overlong_policy.contains("500"));
}

#[test]
fn an_overlong_prompt_is_retried_at_500_300_120_chars_and_disclosed() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let host = fake_ollama(log.clone());
    let client = Ollama::new(Some(&host), "all-minilm:latest", 3).unwrap();
    let long = "x".repeat(700);
    let embeddings = client.embed(&["short", long.as_str()]).unwrap();
    assert_eq!(embeddings[0].shortened_to, None);
    assert_eq!(embeddings[1].shortened_to, Some(300), "500 is still refused by the fake, 300 is accepted");
    let lengths: Vec<Vec<usize>> =
        log.lock().unwrap().iter().map(|inputs| inputs.iter().map(|i| i.chars().count()).collect()).collect();
    // The batch, then one by one: "short", the full long text, 500, 300.
    assert_eq!(lengths, vec![vec![5, 700], vec![5], vec![700], vec![500], vec![300]]);
}

#[test]
fn an_unknown_model_is_a_clear_error() {
    let host = fake_ollama(Arc::new(Mutex::new(Vec::new())));
    let client = Ollama::new(Some(&host), "nomic-embed-text", 3).unwrap();
    match client.embed(&["a"]) {
        Err(Error::OllamaModelMissing { model, .. }) => assert_eq!(model, "nomic-embed-text"),
        other => panic!("expected OllamaModelMissing, got {other:?}"),
    }
    let message = client.embed(&["a"]).unwrap_err().to_string();
    assert!(message.contains("ollama pull nomic-embed-text"), "{message}");
}

#[test]
fn an_absent_server_is_a_clear_error() {
    // Bind then drop a listener, so the port is (almost certainly) closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let client = Ollama::new(Some(&format!("127.0.0.1:{port}")), "all-minilm:latest", 3).unwrap();
    match client.embed(&["a"]) {
        Err(Error::OllamaUnavailable { host, .. }) => assert_eq!(host, format!("http://127.0.0.1:{port}")),
        other => panic!("expected OllamaUnavailable, got {other:?}"),
    }
}

#[test]
fn a_wrong_dimension_is_refused() {
    let host = fake_ollama(Arc::new(Mutex::new(Vec::new())));
    let client = Ollama::new(Some(&host), "all-minilm:latest", 384).unwrap();
    assert!(matches!(client.embed(&["a"]), Err(Error::InvalidEmbedding { index: 0, .. })));
}

#[test]
fn ollama_host_forms_are_normalised() {
    assert_eq!(normalize_host("127.0.0.1:11434"), "http://127.0.0.1:11434");
    assert_eq!(normalize_host("http://localhost:11434/"), "http://localhost:11434");
    assert_eq!(normalize_host(" https://gpu-box:443 "), "https://gpu-box:443");
}
