//! The sparse encoder (SPLADE) against sentence-transformers' own vectors for the checkpoints it saved
//! (fixtures/sparse/, scripts/st-sparse.py): every layout, both roles, every index equal and every value within
//! 1e-5; the same bits on every kernel; and each kind of bad checkpoint refused by name.

use std::path::{Path, PathBuf};

use embedding::{Kernels, Role, SparseEncoder, SparseLayout};
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sparse")
}

fn reference() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("reference.json")).unwrap()).unwrap()
}

fn texts(reference: &Value) -> Vec<String> {
    reference["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect()
}

#[test]
fn every_layout_gives_sentence_transformers_sparse_vectors() {
    let reference = reference();
    let texts = texts(&reference);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut layouts = Vec::new();
    let mut compared = 0;
    for (name, roles) in reference["checkpoints"].as_object().unwrap() {
        let encoder = SparseEncoder::load(&fixtures().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        layouts.push(encoder.identity().layout);
        for (role, key) in [(Role::Query, "query"), (Role::Document, "document")] {
            let ours = encoder.encode(Some(role), &refs, &|_| {}).unwrap();
            for (i, (ours, theirs)) in ours.iter().zip(roles[key].as_array().unwrap()).enumerate() {
                let indices: Vec<u32> = theirs["indices"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as u32)
                    .collect();
                assert_eq!(ours.vector.indices, indices, "{name} {key} text {i}: other indices");
                for (a, b) in ours.vector.values.iter().zip(theirs["values"].as_array().unwrap()) {
                    let b = b.as_f64().unwrap();
                    assert!((f64::from(*a) - b).abs() <= 1e-5, "{name} {key} text {i}: {a} against {b}");
                    compared += 1;
                }
            }
        }
    }
    for layout in [
        SparseLayout::FillMask,
        SparseLayout::MlmTransformer,
        SparseLayout::Router,
        SparseLayout::BareMaskedLm,
    ] {
        assert!(layouts.contains(&layout), "no checkpoint of the {layout:?} layout");
    }
    assert!(compared > 1000, "{compared} values");
}

/// A text past the window, prompts, lower-casing and max_active_dims all took part: otherwise the comparison
/// above could pass while ignoring them.
#[test]
fn the_fixtures_exercise_windows_prompts_and_the_top_k() {
    let reference = reference();
    let texts = texts(&reference);
    let long = texts.iter().map(String::len).max().unwrap();
    let encoder = SparseEncoder::load(&fixtures().join("st6-fill-mask")).unwrap();
    assert_eq!(encoder.prompt(Role::Query), "query: ");
    let encoded = encoder.encode(None, &[texts.iter().find(|t| t.len() == long).unwrap()], &|_| {}).unwrap();
    assert_eq!(encoded[0].tokens, encoder.identity().max_tokens, "the longest text is not cut at the window");
    let capped = SparseEncoder::load(&fixtures().join("st5-mlm-sum")).unwrap();
    assert_eq!(capped.identity().max_active_dims, Some(12));
    assert!(capped.identity().lower_case);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let encoded = capped.encode(Some(Role::Document), &refs, &|_| {}).unwrap();
    assert!(encoded.iter().any(|e| e.vector.indices.len() == 12), "max_active_dims never cut a vector");
    let router = SparseEncoder::load(&fixtures().join("router")).unwrap();
    assert_eq!(router.identity().query_encoder, "static");
    let query = router.encode(Some(Role::Query), &["red red planet"], &|_| {}).unwrap();
    let document = router.encode(Some(Role::Document), &["red red planet"], &|_| {}).unwrap();
    assert_ne!(query[0].vector, document[0].vector);
    let once = router.encode(Some(Role::Query), &["red planet"], &|_| {}).unwrap();
    assert_eq!(query[0].vector, once[0].vector, "a static query vector counts a repeated token once");
    // The query prompt `q: ` takes part (two tokens more than the text's own); `passage` and the default
    // prompt name never reach encode_document.
    assert_eq!(query[0].vector.indices.len(), 4);
    assert_eq!(router.prompt(Role::Query), "q: ");
    assert_eq!(router.prompt(Role::Document), "");
}

#[test]
fn every_kernel_gives_the_same_bits() {
    let reference = reference();
    let texts = texts(&reference);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for name in ["st6-fill-mask", "st5-mlm-sum", "router", "bare-masked-lm"] {
        let bits = |kernels| -> Vec<(Vec<u32>, Vec<u32>)> {
            let encoder = SparseEncoder::load_with(&fixtures().join(name), kernels).unwrap();
            [Role::Query, Role::Document]
                .into_iter()
                .flat_map(|role| encoder.encode(Some(role), &refs, &|_| {}).unwrap())
                .map(|e| (e.vector.indices, e.vector.values.iter().map(|v| v.to_bits()).collect()))
                .collect()
        };
        let portable = bits(Kernels::Scalar);
        for kernels in Kernels::available() {
            assert_eq!(bits(kernels), portable, "{name}: {kernels:?} differs from the portable kernels");
        }
    }
}

/// A copy of a fixture checkpoint, changed by `edit`.
fn edited(name: &str, edit: impl FnOnce(&Path)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy(&fixtures().join(name), dir.path());
    edit(dir.path());
    dir
}

pub(crate) fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

pub(crate) fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

fn refused(dir: &Path) -> String {
    match SparseEncoder::load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(error) => error.to_string(),
    }
}

/// Rewrites model.safetensors of `dir` with `edit` applied to its tensors.
fn edit_tensors(dir: &Path, edit: impl FnOnce(&mut Vec<(String, Vec<usize>, Vec<f32>)>)) {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let values =
                view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            (name, view.shape().to_vec(), values)
        })
        .collect();
    edit(&mut tensors);
    let data: Vec<(String, Vec<u8>, Vec<usize>)> = tensors
        .into_iter()
        .map(|(name, shape, values)| (name, values.iter().flat_map(|v| v.to_le_bytes()).collect(), shape))
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = data
        .iter()
        .map(|(name, bytes, shape)| {
            (
                name.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes).unwrap(),
            )
        })
        .collect();
    let written = safetensors::tensor::serialize(views, None).unwrap();
    std::fs::write(dir.join("model.safetensors"), written).unwrap();
}

#[test]
fn bad_checkpoints_are_refused_naming_the_file_and_field() {
    // No MLM head: the encoder's weights alone.
    let dir = edited("bare-masked-lm", |dir| {
        edit_tensors(dir, |t| t.retain(|(name, _, _)| !name.starts_with("cls.")))
    });
    let error = refused(dir.path());
    assert!(
        error.contains("model.safetensors") && error.contains("no masked-language-model head"),
        "{error}"
    );
    // A NaN weight, named by its tensor.
    let dir = edited("bare-masked-lm", |dir| {
        edit_tensors(dir, |t| {
            let dense =
                t.iter_mut().find(|(name, _, _)| name == "cls.predictions.transform.dense.weight").unwrap();
            dense.2[7] = f32::NAN;
        })
    });
    let error = refused(dir.path());
    assert!(error.contains("cls.predictions.transform.dense.weight[7] is NaN"), "{error}");
    // A decoder whose vocabulary is not the tokenizer's.
    let dir = edited("bare-masked-lm", |dir| {
        edit_json(&dir.join("config.json"), |c| {
            c["vocab_size"] = Value::from(c["vocab_size"].as_u64().unwrap() + 8)
        });
    });
    let error = refused(dir.path());
    assert!(error.contains("tokenizer.json") && error.contains("vocab_size"), "{error}");
    // max_active_dims of 0, and beyond the vocabulary.
    for dims in [0u64, 1 << 20] {
        let dir = edited("st5-mlm-sum", |dir| {
            edit_json(&dir.join("config_sentence_transformers.json"), |c| {
                c["max_active_dims"] = Value::from(dims)
            });
        });
        let error = refused(dir.path());
        assert!(
            error.contains("config_sentence_transformers.json") && error.contains("max_active_dims"),
            "{error}"
        );
    }
    // A Router without a query side.
    let dir = edited("router", |dir| {
        edit_json(&dir.join("router_config.json"), |c| {
            c["structure"].as_object_mut().unwrap().remove("query");
        });
    });
    let error = refused(dir.path());
    assert!(error.contains("router_config.json") && error.contains("structure.query"), "{error}");
    // A pooling this crate does not run.
    let dir = edited("st6-fill-mask", |dir| {
        let pooling =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
        edit_json(&pooling.join("config.json"), |c| c["pooling_strategy"] = Value::from("mean"));
    });
    let error = refused(dir.path());
    assert!(error.contains("pooling_strategy \"mean\""), "{error}");
    // Weights only as a pickle: refused with the conversion.
    let dir = edited("bare-masked-lm", |dir| {
        std::fs::rename(dir.join("model.safetensors"), dir.join("pytorch_model.bin")).unwrap();
    });
    let error = refused(dir.path());
    assert!(error.contains("pytorch_model.bin") && error.contains("save_file"), "{error}");
    // A dense checkpoint is not sparse, and a sparse one is.
    let dense = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/checkpoints/mean-two-prompts");
    assert!(!SparseEncoder::is_sparse(&dense).unwrap());
    for name in ["st6-fill-mask", "st5-mlm-sum", "router", "bare-masked-lm"] {
        assert!(SparseEncoder::is_sparse(&fixtures().join(name)).unwrap(), "{name}");
    }
}
