//! The 2024-2026 encoders (`fixtures/modern/`, made by `scripts/st-modern.py` over transformers' native classes):
//! each checkpoint held to sentence-transformers' own vectors (`reference.json`), to the same bits on every
//! kernel this CPU has, kept off the GPU kernels that do not mirror it, and a tampered table or spelling caught.

use std::path::{Path, PathBuf};

use embedding::{DeviceRequest, Error, Kernels, Role, SentenceBert, WeightPin};
use serde_json::Value;

fn modern_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/modern")
}

fn reference() -> Value {
    serde_json::from_slice(&std::fs::read(modern_dir().join("reference.json")).unwrap()).unwrap()
}

fn load(dir: &Path) -> SentenceBert {
    SentenceBert::load(dir, "modern", WeightPin::Unpinned)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// The largest difference between `model`'s vectors of every reference text, in both roles with the role's
/// prompt, and sentence-transformers' vectors for checkpoint `name`.
fn largest_difference(model: &SentenceBert, name: &str) -> f64 {
    let reference = reference();
    let texts: Vec<&str> =
        reference["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let mut worst = 0.0f64;
    for (role, rows) in reference["checkpoints"][name].as_object().unwrap() {
        let role = if role == "query" { Role::Query } else { Role::Document };
        let ours = model.embed_prompted(model.checkpoint().prompt(role), &texts, &|_| {}).unwrap();
        for (mine, theirs) in ours.iter().zip(rows.as_array().unwrap()) {
            let theirs = theirs.as_array().unwrap();
            assert_eq!(mine.vector.len(), theirs.len(), "{name}: dimensions");
            for (a, b) in mine.vector.iter().zip(theirs) {
                worst = worst.max((f64::from(*a) - b.as_f64().unwrap()).abs());
            }
        }
    }
    worst
}

fn names() -> Vec<String> {
    let names: Vec<String> = reference()["checkpoints"].as_object().unwrap().keys().cloned().collect();
    assert!(names.iter().any(|n| n.starts_with("nomic")), "no NomicBert checkpoint in {names:?}");
    assert!(names.iter().any(|n| n.starts_with("modernbert")), "no ModernBERT checkpoint in {names:?}");
    assert!(names.iter().any(|n| n.starts_with("qwen3")), "no Qwen3 checkpoint in {names:?}");
    names
}

#[test]
fn every_component_is_within_1e_5_of_sentence_transformers() {
    for name in names() {
        let model = load(&modern_dir().join(&name));
        let worst = largest_difference(&model, &name);
        assert!(worst <= 1e-5, "{name}: a component differs by {worst:e}");
    }
}

#[test]
fn every_kernel_gives_the_same_bits() {
    let reference = reference();
    let texts: Vec<&str> =
        reference["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for name in names() {
        let mut model = load(&modern_dir().join(&name));
        let mut seen: Vec<(Kernels, Vec<Vec<u32>>)> = Vec::new();
        for kernels in Kernels::available() {
            model.use_kernels(kernels).unwrap();
            let prompt = model.checkpoint().prompt(Role::Document).to_owned();
            let bits = model
                .embed_prompted(&prompt, &texts, &|_| {})
                .unwrap()
                .iter()
                .map(|e| e.vector.iter().map(|x| x.to_bits()).collect())
                .collect();
            seen.push((kernels, bits));
        }
        for (kernels, bits) in &seen[1..] {
            assert!(bits == &seen[0].1, "{name}: {kernels:?} differs from {:?}", seen[0].0);
        }
        // Alone or in a batch, the same bits.
        let alone = model.embed_prompted("", &texts[4..5], &|_| {}).unwrap();
        let together = model.embed_prompted("", &texts, &|_| {}).unwrap();
        assert_eq!(alone[0].vector, together[4].vector, "{name}: batch companions changed a vector");
    }
}

#[test]
fn what_the_gpu_kernels_do_not_mirror_stays_off_them() {
    for (name, family) in [
        ("nomic-native", "NomicBert"),
        ("modernbert-cls", "ModernBERT"),
        ("qwen3-mqa", "Qwen3"),
        ("pool-lasttoken", "lasttoken pooling"),
        ("dense-two", "Dense module"),
    ] {
        let mut model = load(&modern_dir().join(name));
        let choice = model.use_device(DeviceRequest::Auto).unwrap();
        assert!(matches!(choice.device, embedding::Device::Cpu(_)), "{:?}", choice.device);
        assert!(choice.no_gpu.unwrap_or_default().contains(family));
        for request in [DeviceRequest::Emulated, DeviceRequest::Cuda] {
            match model.use_device(request) {
                Err(Error::Device(reason)) => assert!(reason.contains(family), "{reason}"),
                other => panic!("{name} {request:?}: {other:?}"),
            }
        }
    }
}

/// A copy of checkpoint `name` with its config.json edited by `edit`.
fn edited(name: &str, edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    let from = modern_dir().join(name);
    let mut stack = vec![PathBuf::new()];
    while let Some(relative) = stack.pop() {
        for entry in std::fs::read_dir(from.join(&relative)).unwrap() {
            let entry = entry.unwrap();
            let inner = relative.join(entry.file_name());
            if entry.path().is_dir() {
                std::fs::create_dir_all(copy.path().join(&inner)).unwrap();
                stack.push(inner);
            } else {
                std::fs::copy(entry.path(), copy.path().join(&inner)).unwrap();
            }
        }
    }
    let path = copy.path().join("config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    copy
}

/// What loading a copy of checkpoint `name` whose config.json takes `change`'s keys says: the reason of the
/// refusal, which must name config.json.
fn config_refusal(name: &str, change: &Value) -> String {
    let copy = edited(name, |config| {
        for (key, value) in change.as_object().unwrap() {
            config[key] = value.clone();
        }
    });
    match SentenceBert::load(copy.path(), "modern", WeightPin::Unpinned) {
        Err(Error::InvalidModelFile { path, reason }) => {
            assert!(path.ends_with("config.json"), "{}", path.display());
            reason
        }
        Err(other) => panic!("{change}: {other}"),
        Ok(_) => panic!("{change}: loaded"),
    }
}

#[test]
fn nomic_knobs_not_run_here_are_refused_naming_file_and_key() {
    let cases: [(&str, Value, &str); 4] = [
        ("nomic-original", serde_json::json!({"prenorm": true}), "prenorm"),
        ("nomic-original", serde_json::json!({"rotary_emb_fraction": 0.5}), "rotary_emb_fraction"),
        ("nomic-original", serde_json::json!({"n_embd": 48, "hidden_size": 32}), "disagree"),
        ("nomic-native", serde_json::json!({"architectures": ["BertModel"]}), "architectures"),
    ];
    for (name, change, expected) in cases {
        let reason = config_refusal(name, &change);
        assert!(reason.contains(expected), "{change}: {reason}");
    }
}

#[test]
fn modernbert_knobs_not_run_here_are_refused_naming_file_and_key() {
    let cases: [(&str, Value, &str); 6] = [
        ("modernbert-cls", serde_json::json!({"norm_bias": true}), "norm_bias"),
        (
            "modernbert-cls",
            serde_json::json!({"hidden_activation": "gelu_pytorch_tanh"}),
            "hidden_activation",
        ),
        (
            "modernbert-cls",
            serde_json::json!({"layer_types": ["full_attention", "sliding_attention"]}),
            "layer_types",
        ),
        (
            "modernbert-cls",
            serde_json::json!({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
            "rope_scaling",
        ),
        (
            "modernbert-legacy",
            serde_json::json!({"global_attn_every_n_layers": 0}),
            "global_attn_every_n_layers",
        ),
        ("modernbert-cls", serde_json::json!({"model_type": "gemma3_text"}), "model_type"),
    ];
    for (name, change, expected) in cases {
        let reason = config_refusal(name, &change);
        assert!(reason.contains(expected), "{change}: {reason}");
    }
}

/// The legacy spelling (`global_rope_theta`, `local_rope_theta`, `global_attn_every_n_layers`) and the one
/// transformers 5 writes (`rope_parameters`, `layer_types`) of one configuration give the same bits.
#[test]
fn both_spellings_of_a_modernbert_configuration_give_the_same_bits() {
    let texts =
        ["Protein expression in Human cells is Increased by the drug, in mice with the mutation.", "a"];
    let legacy = load(&modern_dir().join("modernbert-legacy"));
    let respelled = edited("modernbert-legacy", |config| {
        let map = config.as_object_mut().unwrap();
        let (global, local) =
            (map.remove("global_rope_theta").unwrap(), map.remove("local_rope_theta").unwrap());
        map.remove("global_attn_every_n_layers");
        map.insert(
            "layer_types".into(),
            serde_json::json!(["full_attention", "sliding_attention", "full_attention"]),
        );
        map.insert(
            "rope_parameters".into(),
            serde_json::json!({"full_attention": {"rope_type": "default", "rope_theta": global},
                               "sliding_attention": {"rope_type": "default", "rope_theta": local}}),
        );
    });
    let respelled = load(respelled.path());
    let bits = |model: &SentenceBert| -> Vec<Vec<u32>> {
        let vectors = model.embed_prompted("", &texts, &|_| {}).unwrap();
        vectors.iter().map(|e| e.vector.iter().map(|x| x.to_bits()).collect()).collect()
    };
    assert_eq!(bits(&legacy), bits(&respelled));
}

/// What loading a copy of checkpoint `name` whose file `file` `edit` rewrote says: the refusal's file and reason.
fn refusal(name: &str, file: &str, edit: impl FnOnce(&str) -> String) -> (PathBuf, String) {
    let copy = edited(name, |_| {});
    let path = copy.path().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, edit(&text)).unwrap();
    match SentenceBert::load(copy.path(), "modern", WeightPin::Unpinned) {
        Err(Error::InvalidModelFile { path, reason }) => (path, reason),
        Err(other) => panic!("{file}: {other}"),
        Ok(_) => panic!("{file}: loaded"),
    }
}

#[test]
fn dense_modules_set_the_dimension_bind_their_files_and_what_is_not_run_is_refused_by_file() {
    let model = load(&modern_dir().join("dense-two"));
    assert_eq!(model.checkpoint().dims(), 24);
    assert_eq!(model.checkpoint().dense.len(), 2);
    let bound: Vec<&String> = model.digests().keys().collect();
    for file in ["2_Dense/config.json", "2_Dense/model.safetensors", "3_Dense/model.safetensors"] {
        assert!(bound.iter().any(|f| f.as_str() == file), "{file} not bound: {bound:?}");
    }
    let (path, reason) = refusal("dense-two", "2_Dense/config.json", |t| {
        t.replace("\"in_features\": 32", "\"in_features\": 31")
    });
    assert!(path.ends_with("2_Dense/config.json") && reason.contains("in_features 31"), "{reason}");
    let (path, reason) = refusal("dense-two", "3_Dense/config.json", |t| {
        t.replace("torch.nn.modules.linear.Identity", "torch.nn.modules.activation.GELU")
    });
    assert!(path.ends_with("3_Dense/config.json") && reason.contains("GELU"), "{reason}");
    // A Dense module after the Normalize is not the pipeline run here.
    let (path, reason) = refusal("dense-two", "modules.json", |t| {
        let mut list: Value = serde_json::from_str(t).unwrap();
        list.as_array_mut().unwrap().swap(3, 4);
        serde_json::to_string(&list).unwrap()
    });
    assert!(
        path.ends_with("modules.json") && reason.contains("between the Pooling and the Normalize"),
        "{reason}"
    );
}

#[test]
fn qwen3_knobs_not_run_here_are_refused_naming_file_and_key() {
    let cases: [(&str, Value, &str); 7] = [
        ("qwen3-lasttoken", serde_json::json!({"attention_bias": true}), "attention_bias"),
        ("qwen3-lasttoken", serde_json::json!({"use_sliding_window": true}), "use_sliding_window"),
        (
            "qwen3-lasttoken",
            serde_json::json!({"layer_types": ["full_attention", "sliding_attention", "full_attention"]}),
            "layer_types[1]",
        ),
        ("qwen3-lasttoken", serde_json::json!({"num_key_value_heads": 3}), "does not divide"),
        ("qwen3-lasttoken", serde_json::json!({"head_dim": 7}), "head_dim 7"),
        ("qwen3-mqa", serde_json::json!({"hidden_act": "gelu"}), "hidden_act"),
        ("qwen3-mqa", serde_json::json!({"architectures": ["LlamaModel"]}), "architectures"),
    ];
    for (name, change, expected) in cases {
        let reason = config_refusal(name, &change);
        assert!(reason.contains(expected), "{change}: {reason}");
    }
}

/// Last-token pooling reads the end token tokenizer.json's post-processor appends: a file without one (the
/// published files before it was added) is refused naming tokenizer.json; so is a checkpoint that renders texts
/// through a chat template (sentence-transformers' `message` modality), naming sentence_bert_config.json.
#[test]
fn a_qwen3_tokenizer_without_its_end_token_or_with_a_chat_modality_is_refused() {
    let (path, reason) = refusal("qwen3-lasttoken", "tokenizer.json", |text| {
        let mut tokenizer: Value = serde_json::from_str(text).unwrap();
        tokenizer["post_processor"] = Value::Null;
        serde_json::to_string(&tokenizer).unwrap()
    });
    assert!(path.ends_with("tokenizer.json") && reason.contains("<|endoftext|>"), "{reason}");
    let (path, reason) = refusal("qwen3-lasttoken", "sentence_bert_config.json", |text| {
        let mut config: Value = serde_json::from_str(text).unwrap();
        config["modality_config"]["message"] = serde_json::json!({"method": "forward"});
        serde_json::to_string(&config).unwrap()
    });
    assert!(
        path.ends_with("sentence_bert_config.json") && reason.contains("modality_config.message"),
        "{reason}"
    );
}

/// transformers' `Qwen2Tokenizer` rebuilds the normaliser and the pre-tokenizer from its own code whatever
/// tokenizer.json says (checked against transformers 5.25): a file whose pipeline says lower-case and split on
/// whitespace gives the same bits as the original.
#[test]
fn a_qwen3_tokenizer_runs_qwen2_s_pipeline_whatever_the_file_says() {
    let texts = ["Protein EXPRESSION in  Human cells's drug, 2024!\nNew line", "x"];
    let respelled = edited("qwen3-mqa", |_| {});
    let path = respelled.path().join("tokenizer.json");
    let mut tokenizer: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    tokenizer["pre_tokenizer"] = serde_json::json!({"type": "Whitespace"});
    tokenizer["normalizer"] = serde_json::json!({"type": "Lowercase"});
    std::fs::write(&path, serde_json::to_vec(&tokenizer).unwrap()).unwrap();
    let bits = |model: &SentenceBert| -> Vec<Vec<u32>> {
        let vectors = model.embed_prompted("", &texts, &|_| {}).unwrap();
        vectors.iter().map(|e| e.vector.iter().map(|x| x.to_bits()).collect()).collect()
    };
    let original = load(&modern_dir().join("qwen3-mqa"));
    assert_eq!(bits(&original), bits(&load(respelled.path())));
    assert_eq!(original.input_ids(texts[0]).unwrap(), load(respelled.path()).input_ids(texts[0]).unwrap());
}

/// `truncate_dim` cuts after the whole pipeline: a checkpoint that normalises gives the first d components of
/// its uncut vector normalised again (unit length), one that does not gives them as they are; the dimension is
/// d. Fails if the cut came before the Normalize, or if the cut vectors were not normalised again.
#[test]
fn truncate_dim_cuts_after_the_pipeline_and_a_normalising_checkpoint_normalises_again() {
    let texts = ["Protein expression in Human cells is Increased by the drug.", "the red planet"];
    for (name, dims, normalises) in [("truncate-normalized", 12, true), ("truncate-raw", 20, false)] {
        let cut = load(&modern_dir().join(name));
        assert_eq!(cut.checkpoint().dims(), dims);
        assert_eq!(embedding::Embedder::identity(&cut).dims, dims);
        let uncut = edited(name, |_| {});
        let settings = uncut.path().join("config_sentence_transformers.json");
        let mut value: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
        value.as_object_mut().unwrap().remove("truncate_dim");
        std::fs::write(&settings, serde_json::to_vec(&value).unwrap()).unwrap();
        let uncut = load(uncut.path());
        assert_eq!(uncut.checkpoint().dims(), 32);
        let short = cut.embed_prompted("", &texts, &|_| {}).unwrap();
        let long = uncut.embed_prompted("", &texts, &|_| {}).unwrap();
        for (short, long) in short.iter().zip(&long) {
            assert_eq!(short.vector.len(), dims);
            let prefix = &long.vector[..dims];
            let norm = prefix.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
            let own = short.vector.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
            if normalises {
                assert!((own - 1.0).abs() < 1e-6 && norm < 0.99, "{name}: {own} {norm}");
                for (a, b) in short.vector.iter().zip(prefix) {
                    assert!((f64::from(*a) - f64::from(*b) / norm).abs() < 1e-6, "{name}");
                }
            } else {
                assert_eq!(short.vector, prefix, "{name}");
            }
        }
    }
}
