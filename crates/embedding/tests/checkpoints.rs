//! Any BERT sentence-transformers checkpoint, run with what it declares: the project's parity checkpoints
//! (`fixtures/checkpoints/`, written by `testing::parity_checkpoints`) held to sentence-transformers' own
//! vectors (`reference.json`, made by `scripts/st-reference.py`), to the same bits on every kernel, with an
//! identity that binds every file; and every checkpoint this crate cannot run exactly refused by name.

use std::path::{Path, PathBuf};

use embedding::testing::{PARITY_TEXTS, parity_checkpoints, write_sentence_transformers};
use embedding::{Checkpoint, Embedder, Error, Kernels, Pooling, Role, SentenceBert, WeightPin};
use serde_json::Value;

fn checkpoints_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/checkpoints")
}

/// Every file under `dir`, relative path to bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push((path.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_committed_checkpoints_are_the_generators_bytes() {
    let regenerate = std::env::var_os("SCIFACT_REGENERATE_FIXTURES").is_some();
    for (name, shape, seed, layout) in parity_checkpoints() {
        let fresh = tempfile::tempdir().unwrap();
        write_sentence_transformers(fresh.path(), &shape, seed, &layout).unwrap();
        let committed = checkpoints_dir().join(name);
        if regenerate {
            let _ = std::fs::remove_dir_all(&committed);
            std::fs::create_dir_all(&committed).unwrap();
            for (relative, bytes) in files(fresh.path()) {
                let path = committed.join(relative);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, bytes).unwrap();
            }
        }
        assert_eq!(
            files(&committed),
            files(fresh.path()),
            "{name}: rerun with SCIFACT_REGENERATE_FIXTURES=1"
        );
    }
    if regenerate {
        let texts = serde_json::json!({"texts": PARITY_TEXTS});
        std::fs::write(
            checkpoints_dir().join("texts.json"),
            serde_json::to_string_pretty(&texts).unwrap() + "\n",
        )
        .unwrap();
    }
    let texts: Value =
        serde_json::from_slice(&std::fs::read(checkpoints_dir().join("texts.json")).unwrap()).unwrap();
    assert_eq!(texts["texts"], serde_json::json!(PARITY_TEXTS), "texts.json is the generator's PARITY_TEXTS");
}

fn load(name: &str) -> SentenceBert {
    SentenceBert::load(&checkpoints_dir().join(name), name, WeightPin::Unpinned).unwrap()
}

fn role_of(name: &str) -> Role {
    if name == "query" { Role::Query } else { Role::Document }
}

/// Every text of `reference.json`, in each role it records for checkpoint `name`, embedded by `model` with the
/// role's prompt: within 1e-5 of sentence-transformers' vector, component by component.
fn assert_within_reference(model: &SentenceBert, name: &str) {
    let reference: Value =
        serde_json::from_slice(&std::fs::read(checkpoints_dir().join("reference.json")).unwrap()).unwrap();
    let texts: Vec<&str> =
        reference["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let roles = reference["checkpoints"][name].as_object().unwrap();
    assert!(!roles.is_empty(), "{name} has no reference vectors");
    for (role, entry) in roles {
        let prompt = model.checkpoint().prompt(role_of(role));
        let ours = model.embed_prompted(prompt, &texts, &|_| {}).unwrap();
        for (text, (mine, theirs)) in texts.iter().zip(ours.iter().zip(entry["vectors"].as_array().unwrap()))
        {
            let worst = mine
                .vector
                .iter()
                .zip(theirs.as_array().unwrap())
                .map(|(a, b)| (f64::from(*a) - b.as_f64().unwrap()).abs())
                .fold(0.0, f64::max);
            assert!(worst <= 1e-5, "{name} {role} {text:?}: a component differs by {worst:e}");
        }
    }
}

#[test]
fn every_component_is_within_1e_5_of_sentence_transformers() {
    let reference: Value =
        serde_json::from_slice(&std::fs::read(checkpoints_dir().join("reference.json")).unwrap()).unwrap();
    let texts: Vec<&str> =
        reference["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let mut compared = 0;
    for (name, _, _, _) in parity_checkpoints() {
        let model = load(name);
        for (role, entry) in reference["checkpoints"][name].as_object().unwrap() {
            let role = role_of(role);
            let expected_prompt = entry["prompt_name"].as_str().map(|_| model.checkpoint().prompt(role));
            let prompt = model.checkpoint().prompt(role);
            assert_eq!(
                expected_prompt.unwrap_or(""),
                prompt,
                "{name} {role:?}: the prompt sentence-transformers used"
            );
            let ours = model.embed_prompted(prompt, &texts, &|_| {}).unwrap();
            for (text, (mine, theirs)) in
                texts.iter().zip(ours.iter().zip(entry["vectors"].as_array().unwrap()))
            {
                let theirs: Vec<f64> =
                    theirs.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
                assert_eq!(mine.vector.len(), theirs.len());
                let worst = mine
                    .vector
                    .iter()
                    .zip(&theirs)
                    .map(|(a, b)| (f64::from(*a) - b).abs())
                    .fold(0.0, f64::max);
                assert!(worst <= 1e-5, "{name} {role:?} {text:?}: a component differs by {worst:e}");
                compared += 1;
            }
        }
    }
    assert_eq!(compared, parity_checkpoints().len() * 2 * PARITY_TEXTS.len());
}

#[test]
fn each_checkpoint_is_read_as_it_declares_and_its_identity_binds_every_file() {
    let read = |name: &str| Checkpoint::read(&checkpoints_dir().join(name)).unwrap();
    let cls = read("cls-normalize-instruction");
    assert_eq!(
        (cls.pooling, cls.normalize, cls.include_prompt, cls.max_tokens),
        (Pooling::Cls, true, true, 64)
    );
    assert_eq!((cls.prompt(Role::Query), cls.prompt(Role::Document)), ("search the document : ", ""));
    let mean = read("mean-two-prompts");
    assert_eq!((mean.pooling, mean.normalize, mean.include_prompt), (Pooling::Mean, false, false));
    assert_eq!(mean.prompt(Role::Document), "the document : ", "passage is a document prompt");
    let max = read("max-short-lowercase");
    assert_eq!((max.pooling, max.max_tokens, max.lower_case), (Pooling::Max, 12, true));

    let model = load("mean-two-prompts");
    let identity = serde_json::to_value(model.identity()).unwrap();
    assert_eq!(identity["pooling"], "mean without the prompt's tokens");
    assert_eq!(identity["normalization"], "none");
    assert_eq!(identity["prompts"], serde_json::json!({"document": "the document : ", "query": "query : "}));
    let bound: Vec<&str> = identity["files"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        bound,
        [
            "1_Pooling/config.json",
            "config.json",
            "config_sentence_transformers.json",
            "modules.json",
            "sentence_bert_config.json"
        ]
    );
    // A change in any file that shapes a vector is a different model.
    let copy = tempfile::tempdir().unwrap();
    for (relative, bytes) in files(&checkpoints_dir().join("mean-two-prompts")) {
        let path = copy.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let prompts = copy.path().join("config_sentence_transformers.json");
    let text = std::fs::read_to_string(&prompts).unwrap().replace("query : ", "query: ");
    std::fs::write(&prompts, text).unwrap();
    let changed = SentenceBert::load(copy.path(), "mean-two-prompts", WeightPin::Unpinned).unwrap();
    assert_ne!(changed.identity(), model.identity());
    assert_ne!(changed.identity().files, model.identity().files);
}

#[test]
fn every_kernel_gives_every_checkpoint_the_same_bits() {
    for (name, _, _, _) in parity_checkpoints() {
        let mut model = load(name);
        let prompt = model.checkpoint().prompt(Role::Query).to_owned();
        let best = model.embed_prompted(&prompt, &PARITY_TEXTS, &|_| {}).unwrap();
        for kernels in Kernels::available() {
            model.use_kernels(kernels).unwrap();
            let again = model.embed_prompted(&prompt, &PARITY_TEXTS, &|_| {}).unwrap();
            for (a, b) in best.iter().zip(&again) {
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a.vector), bits(&b.vector), "{name} on {kernels:?}");
            }
        }
    }
}

/// A copy of a parity checkpoint with `edit` applied to one of its files; what loading it says.
fn refused(name: &str, file: &str, edit: impl FnOnce(&str) -> String) -> String {
    let (_copy, loaded) = loaded_copy(name, |dir| {
        let path = dir.join(file);
        std::fs::write(&path, edit(&std::fs::read_to_string(&path).unwrap())).unwrap();
    });
    match loaded {
        Ok(_) => panic!("{name} with {file} edited loaded"),
        Err(error @ Error::InvalidModelFile { .. }) => error.to_string(),
        Err(other) => panic!("{name}: not a refusal naming the file: {other}"),
    }
}

#[test]
fn what_cannot_be_run_exactly_is_refused_naming_the_file_and_the_field() {
    // (checkpoint, file, replace this, by this, the refusal says)
    let cases = [
        (
            "cls-normalize-instruction",
            "1_Pooling/config.json",
            "\"cls\"",
            "\"cls_then_mean\"",
            "pooling_mode \"cls_then_mean\"",
        ),
        (
            "mean-two-prompts",
            "1_Pooling/config.json",
            "\"pooling_mode_mean_sqrt_len_tokens\": false",
            "\"pooling_mode_mean_sqrt_len_tokens\": true",
            "more than one pooling mode",
        ),
        (
            "mean-two-prompts",
            "1_Pooling/config.json",
            "\"pooling_mode_cls_token\": false",
            "\"pooling_mode_cls_token\": true",
            "more than one pooling mode",
        ),
        ("cls-normalize-instruction", "config.json", "\"bert\"", "\"mpnet\"", "model_type \"mpnet\""),
        ("cls-normalize-instruction", "config.json", "\"gelu\"", "\"gelu_new\"", "hidden_act \"gelu_new\""),
        // A padding index that wraps when one is added, and a position table that would ask 16 GiB of attention
        // scores a sequence: refused, never run.
        (
            "xlmr-mean-multilingual",
            "config.json",
            "\"pad_token_id\":1",
            "\"pad_token_id\":18446744073709551615",
            "pad_token_id 18446744073709551615 is not below vocab_size",
        ),
        (
            "xlmr-mean-multilingual",
            "config.json",
            "\"max_position_embeddings\":66",
            "\"max_position_embeddings\":65536",
            "max_position_embeddings 65536 is not within 1..=8196",
        ),
        (
            "max-short-lowercase",
            "config_sentence_transformers.json",
            "}",
            "",
            "config_sentence_transformers.json: not JSON",
        ),
        (
            "max-short-lowercase",
            "modules.json",
            "models.Normalize",
            "models.LayerNorm",
            "sentence_transformers.models.LayerNorm",
        ),
    ];
    for (name, file, from, to, says) in cases {
        let message = refused(name, file, |text| text.replace(from, to));
        assert!(message.contains(file) && message.contains(says), "{name} {file}: {message}");
    }
    let message = refused("max-short-lowercase", "config_sentence_transformers.json", |_| {
        "{\"prompts\": {\"query\": 7}}".into()
    });
    assert!(message.contains("prompts.query is not a string"), "{message}");
}

#[test]
fn a_bare_bert_directory_keeps_all_minilm_s_defaults_and_lists_its_config() {
    let dir = tempfile::tempdir().unwrap();
    embedding::testing::write_tiny_bert(dir.path(), 9).unwrap();
    let checkpoint = Checkpoint::read(dir.path()).unwrap();
    assert!(!checkpoint.sentence_transformers);
    assert_eq!((checkpoint.pooling, checkpoint.normalize, checkpoint.max_tokens), (Pooling::Mean, true, 64));
    let model = SentenceBert::load(dir.path(), "tiny", WeightPin::Unpinned).unwrap();
    let identity = serde_json::to_value(model.identity()).unwrap();
    // Its one file besides the weights and tokenizer is listed: a verifier judges the name from every byte.
    assert_eq!(identity["files"].as_object().map(|files| files.len()), Some(1), "{identity}");
    assert!(
        identity["files"]["config.json"].as_str().is_some_and(|d| d.starts_with("sha256:")),
        "{identity}"
    );
    assert!(identity.get("prompts").is_none(), "{identity}");
    assert_eq!(
        (identity["pooling"].as_str(), identity["normalization"].as_str()),
        (Some("mean"), Some("l2"))
    );
}

#[test]
fn a_window_that_holds_no_text_is_refused_at_load_or_before_embedding() {
    let message = refused("max-short-lowercase", "sentence_bert_config.json", |text| {
        text.replace("\"max_seq_length\": 12", "\"max_seq_length\": 1")
    });
    assert!(message.contains("max_seq_length 1 leaves no room"), "{message}");
    let model = load("max-short-lowercase");
    // [CLS] and 11 prompt tokens fill a window of 12: the text would be cut away entirely.
    let long = "alpha ".repeat(40);
    match model.embed_prompted(&long, &["a text"], &|_| {}) {
        Err(Error::PromptFillsWindow { tokens: 12, max_tokens: 12, .. }) => {}
        other => panic!("a prompt filling the window: {:?}", other.map(|v| v.len())),
    }
    // A megabyte of prompt is tokenized once and refused, not prepended to every text.
    let huge = "beta ".repeat(200_000);
    assert!(matches!(model.embed_prompted(&huge, &["a"; 64], &|_| {}), Err(Error::PromptFillsWindow { .. })));
    assert!(model.embed_prompted("alpha ", &["a text"], &|_| {}).is_ok(), "a short prompt leaves room");
}

#[cfg(unix)]
#[test]
fn a_hostile_model_directory_is_refused_naming_the_file() {
    use std::os::unix::fs::symlink;
    fn replace_by_link(dir: &Path, file: &str, target: &str) {
        std::fs::remove_file(dir.join(file)).unwrap();
        symlink(target, dir.join(file)).unwrap();
    }
    let name = "max-short-lowercase";
    type Edit = Box<dyn FnOnce(&Path)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "config.json -> /dev/zero",
            Box::new(|d| replace_by_link(d, "config.json", "/dev/zero")),
            "config.json",
        ),
        (
            "model.safetensors -> /dev/urandom",
            Box::new(|d| replace_by_link(d, "model.safetensors", "/dev/urandom")),
            "model.safetensors",
        ),
        (
            "tokenizer.json a FIFO",
            Box::new(|d| {
                std::fs::remove_file(d.join("tokenizer.json")).unwrap();
                let fifo = std::process::Command::new("mkfifo").arg(d.join("tokenizer.json")).status();
                assert!(fifo.unwrap().success());
            }),
            "tokenizer.json",
        ),
        (
            "a dangling prompts file",
            Box::new(|d| replace_by_link(d, "config_sentence_transformers.json", "gone.json")),
            "config_sentence_transformers.json",
        ),
        (
            "a pooling config out of the directory",
            Box::new(|d| {
                std::fs::write(d.parent().unwrap().join("outside.json"), b"{}").unwrap();
                replace_by_link(d, "1_Pooling/config.json", "../../outside.json");
            }),
            "1_Pooling/config.json",
        ),
        (
            "an empty Pooling path",
            Box::new(|d| {
                let modules = std::fs::read_to_string(d.join("modules.json")).unwrap();
                std::fs::write(d.join("modules.json"), modules.replace("\"1_Pooling\"", "\"\"")).unwrap();
            }),
            "the Pooling path \"\"",
        ),
    ];
    for (what, edit, says) in cases {
        match loaded_copy(name, edit).1 {
            Ok(_) => panic!("{what}: loaded"),
            Err(error) => {
                let message = error.to_string();
                assert!(message.contains(says), "{what}: {message}");
            }
        }
    }
}

/// A copy of parity checkpoint `name` in `model/` of a fresh directory (so a file can stand outside it), with
/// `edit` applied to `model/`, loaded.
fn loaded_copy(name: &str, edit: impl FnOnce(&Path)) -> (tempfile::TempDir, Result<SentenceBert, Error>) {
    let copy = tempfile::tempdir().unwrap();
    let dir = copy.path().join("model");
    for (relative, bytes) in files(&checkpoints_dir().join(name)) {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    edit(&dir);
    let loaded = SentenceBert::load(&dir, name, WeightPin::Unpinned);
    (copy, loaded)
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut value: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

#[test]
fn a_checkpoint_as_later_sentence_transformers_save_it_runs_as_the_classic_one() {
    let name = "mean-two-prompts";
    let original = load(name);
    let (_copy, later) = loaded_copy(name, |dir| {
        // Later versions name each module by its class's own module path, and keep no max_seq_length in
        // sentence_bert_config.json: the window is then the tokenizer's model_max_length, bounded by the positions.
        let modules = std::fs::read_to_string(dir.join("modules.json")).unwrap();
        let modules = modules
            .replace(
                "sentence_transformers.models.Transformer",
                "sentence_transformers.base.modules.transformer.Transformer",
            )
            .replace(
                "sentence_transformers.models.Pooling",
                "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
            )
            .replace(
                "sentence_transformers.models.Normalize",
                "sentence_transformers.base.modules.normalize.Normalize",
            );
        std::fs::write(dir.join("modules.json"), modules).unwrap();
        edit_json(&dir.join("sentence_bert_config.json"), |v| {
            v.as_object_mut().unwrap().remove("max_seq_length");
            v["transformer_task"] = Value::from("feature-extraction");
        });
        std::fs::write(dir.join("tokenizer_config.json"), "{\"model_max_length\": 64}").unwrap();
    });
    let later = later.unwrap();
    assert_eq!(later.checkpoint().max_tokens, original.checkpoint().max_tokens);
    assert!(later.checkpoint().files.contains_key("tokenizer_config.json"), "the window's file is bound");
    let (a, b) = (
        original.embed_prompted("", &PARITY_TEXTS, &|_| {}).unwrap(),
        later.embed_prompted("", &PARITY_TEXTS, &|_| {}).unwrap(),
    );
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.vector, y.vector);
    }
    // And to sentence-transformers' own vectors, not only to this project's reading of the classic layout.
    assert_within_reference(&later, name);
    // transformers' "no limit" (10^30) leaves the position table as the window.
    let (_copy, unlimited) = loaded_copy(name, |dir| {
        edit_json(&dir.join("sentence_bert_config.json"), |v| {
            v.as_object_mut().unwrap().remove("max_seq_length");
        });
        std::fs::write(
            dir.join("tokenizer_config.json"),
            "{\"model_max_length\": 1000000000000000019884624838656}",
        )
        .unwrap();
    });
    let unlimited = unlimited.unwrap();
    let config: Value =
        serde_json::from_slice(&std::fs::read(checkpoints_dir().join(name).join("config.json")).unwrap())
            .unwrap();
    assert_eq!(unlimited.checkpoint().max_tokens as u64, config["max_position_embeddings"].as_u64().unwrap());
}

#[test]
fn default_prompt_name_and_a_bad_truncate_dim_are_applied_or_refused_by_name() {
    let name = "mean-two-prompts";
    let (_copy, loaded) = loaded_copy(name, |dir| {
        std::fs::write(
            dir.join("config_sentence_transformers.json"),
            "{\"prompts\": {\"query\": \"q : \", \"instruction\": \"i : \"}, \"default_prompt_name\": \"instruction\"}",
        )
        .unwrap();
    });
    let loaded = loaded.unwrap();
    assert_eq!(loaded.checkpoint().prompt(Role::Query), "q : ");
    assert_eq!(
        loaded.checkpoint().prompt(Role::Document),
        "i : ",
        "a role without its own takes the default"
    );
    for (config, says) in [
        ("{\"prompts\": {\"query\": \"q : \"}, \"default_prompt_name\": \"missing\"}", "names no prompt"),
        ("{\"prompts\": {}, \"truncate_dim\": 0}", "truncate_dim 0"),
        ("{\"prompts\": {}, \"truncate_dim\": 100000}", "truncate_dim 100000"),
        ("{\"prompts\": {}, \"truncate_dim\": \"16\"}", "truncate_dim \"16\""),
    ] {
        let (_copy, loaded) = loaded_copy(name, |dir| {
            std::fs::write(dir.join("config_sentence_transformers.json"), config).unwrap();
        });
        let message = loaded.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("config_sentence_transformers.json") && message.contains(says), "{message}");
    }
}

/// A BERT whose tokenizer is SentencePiece (multilingual-e5-small's shape) is tokenized as transformers'
/// `XLMRobertaTokenizer` rebuilds it because its config.json names that class: without the name, the file's own
/// pipeline runs and the multilingual text gets another vector (which sentence-transformers would not give).
#[test]
fn a_bert_with_a_sentencepiece_tokenizer_is_read_as_its_config_names_it() {
    let name = "bert-sentencepiece-mean";
    let dir = checkpoints_dir().join(name);
    assert_eq!(Checkpoint::read(&dir).unwrap().sentencepiece, Some(true));
    let copy = tempfile::tempdir().unwrap();
    for (relative, bytes) in files(&dir) {
        let path = copy.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let config = copy.path().join("config.json");
    let mut value: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    value.as_object_mut().unwrap().remove("tokenizer_class");
    std::fs::write(&config, value.to_string()).unwrap();
    assert_eq!(Checkpoint::read(copy.path()).unwrap().sentencepiece, None);
    let multilingual = PARITY_TEXTS[6];
    let as_named =
        SentenceBert::load(&dir, name, WeightPin::Unpinned).unwrap().embed(&[multilingual]).unwrap();
    let as_file =
        SentenceBert::load(copy.path(), name, WeightPin::Unpinned).unwrap().embed(&[multilingual]).unwrap();
    assert_ne!(as_named[0].vector, as_file[0].vector);
}
