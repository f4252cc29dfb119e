//! The ColBERT encoder against PyLate's own token vectors for the checkpoints it saved (fixtures/colbert/,
//! scripts/pylate-peer.py): both layouts, both roles, every token vector kept where PyLate keeps one and within
//! 1e-5 of it; the same bits on every kernel; and each kind of bad checkpoint refused by name.

use std::path::{Path, PathBuf};

use embedding::{ColbertEncoder, ColbertLayout, Kernels, Role};
use serde_json::Value;

use crate::sparse::{copy, edit_json};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/colbert")
}

fn reference() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("reference.json")).unwrap()).unwrap()
}

fn texts() -> Vec<String> {
    let value: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("texts.json")).unwrap()).unwrap();
    value["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect()
}

const CHECKPOINTS: [&str; 4] = ["pylate-attend", "pylate-biased", "pylate-default", "stanford"];

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Query => "query",
        Role::Document => "document",
    }
}

#[test]
fn every_checkpoint_gives_pylates_token_vectors() {
    let reference = reference();
    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut worst = 0.0f64;
    for name in CHECKPOINTS {
        let encoder = ColbertEncoder::load(&fixtures().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let layout = if name == "stanford" { ColbertLayout::Stanford } else { ColbertLayout::Pylate };
        assert_eq!(encoder.identity().layout, layout, "{name}");
        for role in [Role::Query, Role::Document] {
            let expected = reference["checkpoints"][name][role_name(role)].as_array().unwrap();
            let encoded = encoder.encode(role, &refs, &|_| {}).unwrap();
            assert_eq!(encoded.len(), expected.len());
            for (index, (mine, theirs)) in encoded.iter().zip(expected).enumerate() {
                let theirs = theirs.as_array().unwrap();
                assert_eq!(mine.rows(), theirs.len(), "{name} {role:?} text {index}: token vectors kept");
                for (row, want) in mine.vectors().zip(theirs) {
                    let want = want.as_array().unwrap();
                    assert_eq!(row.len(), want.len(), "{name}: width");
                    for (a, b) in row.iter().zip(want) {
                        worst = worst.max((f64::from(*a) - b.as_f64().unwrap()).abs());
                    }
                }
            }
        }
    }
    assert!(worst <= 1e-5, "largest difference {worst:e}");
}

/// What the fixtures exercise is what they are said to: queries padded to their length (or not), documents
/// shortened by the skiplist, lengths cut, the Stanford markers.
#[test]
fn the_fixtures_exercise_expansion_skiplists_lengths_and_markers() {
    let default = ColbertEncoder::load(&fixtures().join("pylate-default")).unwrap();
    let identity = default.identity();
    assert_eq!((identity.query_length, identity.document_length, identity.dims), (32, 180, 128));
    assert!(identity.query_expansion && !identity.attend_to_expansion);
    assert_eq!(identity.query_marker.0, "[Q] ");
    let (ids, attended) = default.input_ids(Role::Query, "what causes aging fast?").unwrap();
    assert_eq!(ids.len(), 32, "padded to the query length");
    assert_eq!(ids[1], identity.query_marker.1, "the marker after [CLS]");
    assert!(attended < 32, "the padding is not attended");
    let (ids, _) = default.input_ids(Role::Document, &"protein ".repeat(400)).unwrap();
    assert_eq!(ids.len(), 180, "cut to the document length");
    let punctuated = default.encode(Role::Document, &["cells, genes; (tumor)!"], &|_| {}).unwrap();
    assert_eq!(punctuated[0].tokens - punctuated[0].rows(), 5, "five punctuation tokens dropped");

    let biased = ColbertEncoder::load(&fixtures().join("pylate-biased")).unwrap();
    assert!(!biased.identity().query_expansion);
    let short = biased.encode(Role::Query, &["the red planet"], &|_| {}).unwrap();
    assert_eq!(short[0].rows(), short[0].tokens, "no expansion: the query's own tokens");
    let skipped = biased.encode(Role::Document, &["the red planet, of the"], &|_| {}).unwrap();
    assert_eq!(skipped[0].tokens - skipped[0].rows(), 4, "its own skiplist: the, ',', of, the");

    let attend = ColbertEncoder::load(&fixtures().join("pylate-attend")).unwrap();
    let (ids, attended) = attend.input_ids(Role::Query, "red").unwrap();
    assert_eq!((ids.len(), attended), (24, 24), "attends to its expansion");

    let stanford = ColbertEncoder::load(&fixtures().join("stanford")).unwrap();
    let identity = stanford.identity();
    assert_eq!(
        (identity.query_marker.0.as_str(), identity.document_marker.0.as_str()),
        ("[unused0]", "[unused1]")
    );
    assert_eq!((identity.query_length, identity.document_length, identity.dims), (20, 48, 20));
}

#[test]
fn every_kernel_gives_the_same_bits() {
    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for name in CHECKPOINTS {
        for role in [Role::Query, Role::Document] {
            let mut seen: Option<Vec<u32>> = None;
            for kernels in Kernels::available() {
                let encoder = ColbertEncoder::load_with(&fixtures().join(name), kernels).unwrap();
                let bits: Vec<u32> = encoder
                    .encode(role, &refs, &|_| {})
                    .unwrap()
                    .iter()
                    .flat_map(|t| t.values.iter().map(|v| v.to_bits()))
                    .collect();
                match &seen {
                    None => seen = Some(bits),
                    Some(first) => assert!(first == &bits, "{name} {role:?}: {kernels:?} differs"),
                }
            }
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

fn refused(dir: &Path) -> String {
    match ColbertEncoder::load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(error) => error.to_string(),
    }
}

#[test]
fn bad_checkpoints_are_refused_naming_the_file_and_field() {
    // A projection whose input is not the encoder's width.
    let dir = edited("pylate-biased", |dir| {
        edit_json(&dir.join("1_Dense/config.json"), |c| c["in_features"] = Value::from(31))
    });
    let error = refused(dir.path());
    assert!(error.contains("1_Dense/config.json") && error.contains("in_features 31"), "{error}");
    // A marker the vocabulary lacks.
    let dir = edited("pylate-biased", |dir| {
        edit_json(&dir.join("config_sentence_transformers.json"), |c| c["query_prefix"] = Value::from("[X] "))
    });
    let error = refused(dir.path());
    assert!(error.contains("config_sentence_transformers.json") && error.contains("query marker"), "{error}");
    let dir = edited("stanford", |dir| {
        edit_json(&dir.join("artifact.metadata"), |c| c["doc_token_id"] = Value::from("[unused9]"))
    });
    let error = refused(dir.path());
    assert!(error.contains("artifact.metadata") && error.contains("document marker"), "{error}");
    // A query length of 0, and one beyond the positions.
    for length in [0u64, 1000] {
        let dir = edited("pylate-biased", |dir| {
            edit_json(&dir.join("config_sentence_transformers.json"), |c| {
                c["query_length"] = Value::from(length)
            })
        });
        let error = refused(dir.path());
        assert!(
            error.contains("config_sentence_transformers.json")
                && error.contains(&format!("query length {length}")),
            "{error}"
        );
    }
    let dir = edited("stanford", |dir| {
        edit_json(&dir.join("artifact.metadata"), |c| c["doc_maxlen"] = Value::from(65))
    });
    let error = refused(dir.path());
    assert!(error.contains("document length 65") && error.contains("64 positions"), "{error}");
    // No projection after the encoder: PyLate would add an untrained one.
    let dir = edited("pylate-default", |dir| {
        edit_json(&dir.join("modules.json"), |m| {
            m.as_array_mut().unwrap().truncate(1);
        })
    });
    let error = refused(dir.path());
    assert!(error.contains("modules.json") && error.contains("no Dense module"), "{error}");
    // A colbert-ai checkpoint whose projection reads another width.
    let dir =
        edited("stanford", |dir| edit_json(&dir.join("config.json"), |c| c["hidden_size"] = Value::from(16)));
    assert!(ColbertEncoder::load(dir.path()).is_err());
    // Which directories are ColBERT checkpoints.
    for name in CHECKPOINTS {
        assert!(ColbertEncoder::is_colbert(&fixtures().join(name)).unwrap(), "{name}");
    }
    let dense = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/checkpoints/mean-two-prompts");
    assert!(!ColbertEncoder::is_colbert(&dense).unwrap());
}
