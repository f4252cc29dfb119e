//! The bundle in the ecosystem's formats, read by the ecosystem's own tools: pytrec_eval, ranx and
//! ir-measures give every aggregate metric from the TREC run files and qrels (`scripts/check-trec-tools.py`),
//! and the `in-toto-attestation` package parses and validates the manifest, the SLSA provenance and the
//! test-result statements (`scripts/check-intoto.py`).

use std::path::{Path, PathBuf};

use crate::forge::read_json;
use crate::selection::evaluated;

fn script(name: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
        .join("../../scripts")
        .join(name)
}

fn python(script_name: &str, dir: &Path) -> String {
    let output = std::process::Command::new("python3").arg(script(script_name)).arg(dir).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{script_name}: {text}");
    text
}

#[test]
#[ignore = "needs python3 with pytrec_eval, ranx, ir-measures and in-toto-attestation; CI installs them"]
fn trec_runs_and_statements_read_by_the_ecosystems_tools() {
    let e = evaluated();
    let manifest = read_json(&e.bundle.join("manifest.json"));
    assert_eq!(manifest["predicateType"], "urn:scifact-audit:claim:v8");
    let subjects: Vec<&str> =
        manifest["subject"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    let aggregates: Vec<&str> = subjects.iter().copied().filter(|n| n.ends_with(".aggregate.json")).collect();
    assert!(aggregates.len() >= 6, "{aggregates:?}");
    for aggregate in &aggregates {
        let stem = aggregate.trim_end_matches(".aggregate.json");
        for suffix in [".trec", ".ir_metadata.yml", ".provenance.json"] {
            assert!(
                subjects.contains(&format!("{stem}{suffix}").as_str()),
                "{stem}{suffix} is not a subject"
            );
        }
    }
    for name in ["scifact-test.qrels", "verification.intoto.json"] {
        assert!(subjects.contains(&name), "{name} is not a subject");
    }
    let tools = python("check-trec-tools.py", &e.bundle);
    assert!(tools.contains("largest difference"), "{tools}");
    let statements = python("check-intoto.py", &e.bundle);
    assert!(
        statements.contains(&format!("{} https://slsa.dev/provenance/v1", aggregates.len())),
        "{statements}"
    );
    assert!(statements.contains("1 https://in-toto.io/attestation/test-result/v0.1"), "{statements}");

    // Scores that say the reverse of the ranks make the tools disagree: the check is not vacuous.
    let broken = e.bundle.with_file_name("reversed");
    crate::forge::copy_dir(&e.bundle, &broken);
    for aggregate in &aggregates {
        let run = broken.join(format!("{}.trec", aggregate.trim_end_matches(".aggregate.json")));
        let text = std::fs::read_to_string(&run).unwrap();
        let reversed: String = text
            .lines()
            .map(|line| {
                let mut fields: Vec<&str> = line.split(' ').collect();
                fields[4] = fields[3];
                fields.join(" ") + "\n"
            })
            .collect();
        std::fs::write(&run, reversed).unwrap();
    }
    let output = std::process::Command::new("python3")
        .arg(script("check-trec-tools.py"))
        .arg(&broken)
        .output()
        .unwrap();
    assert!(!output.status.success(), "a reversed ranking must change some metric");
    let _ = e.public;
}
