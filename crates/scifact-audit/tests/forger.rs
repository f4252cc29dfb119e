//! A hostile signer's toolkit: a copy of a signed bundle that can be edited, then repaired as a forger who
//! knows every format would repair it (every receipt's RFC 8785 digest, the rolling digest, the rows digests in
//! the aggregates, the TREC lines and their ir_metadata digests, the SLSA subjects, the ledger, the freeze and
//! the statistics' digests, the test-result subjects, the manifest's subjects and predicate) and signed again
//! with the signer's own key. What is left to catch a forgery is only what the verifier recomputes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub(crate) fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect::<String>())
}

fn hex(tagged: &str) -> String {
    tagged.trim_start_matches("sha256:").to_owned()
}

pub(crate) fn pretty(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap();
    bytes.push(b'\n');
    bytes
}

/// An editable copy of a bundle.
pub(crate) struct Forgery {
    pub(crate) dir: PathBuf,
    _keep: tempfile::TempDir,
}

impl Forgery {
    /// Copies `bundle` into a fresh directory.
    pub(crate) fn of(bundle: &Path) -> Forgery {
        let keep = tempfile::tempdir().unwrap();
        let dir = keep.path().join("bundle");
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(bundle).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
        Forgery { dir, _keep: keep }
    }

    pub(crate) fn bytes(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.dir.join(name)).unwrap()
    }

    pub(crate) fn set_bytes(&self, name: &str, bytes: &[u8]) {
        std::fs::write(self.dir.join(name), bytes).unwrap();
    }

    pub(crate) fn json(&self, name: &str) -> Value {
        serde_json::from_slice(&self.bytes(name)).unwrap()
    }

    pub(crate) fn set_json(&self, name: &str, value: &Value) {
        self.set_bytes(name, &pretty(value));
    }

    pub(crate) fn edit_json(&self, name: &str, edit: impl FnOnce(&mut Value)) {
        let mut value = self.json(name);
        edit(&mut value);
        self.set_json(name, &value);
    }

    /// Every aggregate's file name, sorted.
    pub(crate) fn aggregates(&self) -> Vec<String> {
        crate::forge::aggregate_names(&self.dir)
    }

    /// The aggregate of `mode` and `split` under the baseline (no label) or the selected configuration.
    pub(crate) fn aggregate(&self, mode: &str, split: &str, selected: bool) -> String {
        let baseline = format!("tiny-{mode}-{split}.aggregate.json");
        if !selected {
            return baseline;
        }
        self.aggregates()
            .into_iter()
            .find(|n| n.starts_with(&format!("tiny-{mode}-{split}-c")))
            .unwrap_or(baseline)
    }

    pub(crate) fn rows(&self, aggregate: &str) -> Vec<Value> {
        let file = self.json(aggregate)["rows"]["file"].as_str().unwrap().to_owned();
        String::from_utf8(self.bytes(&file))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub(crate) fn set_rows(&self, aggregate: &str, rows: &[Value]) {
        let file = self.json(aggregate)["rows"]["file"].as_str().unwrap().to_owned();
        let mut bytes = Vec::new();
        for row in rows {
            bytes.extend(serde_json::to_vec(row).unwrap());
            bytes.push(b'\n');
        }
        self.set_bytes(&file, &bytes);
    }

    pub(crate) fn edit_rows(&self, aggregate: &str, edit: impl FnOnce(&mut Vec<Value>)) {
        let mut rows = self.rows(aggregate);
        edit(&mut rows);
        self.set_rows(aggregate, &rows);
    }

    /// Repairs every digest a forger can repair, in the order they bind each other, and signs the manifest
    /// (and the pre-registration, when it changed) with `secret_key`.
    pub(crate) fn repair_and_sign(&self, secret_key: &Path) {
        let key = receipt_verify::load_secret_key(secret_key, None).unwrap();
        // The pre-registration, its signature, and what names its digest.
        let prereg_bytes = self.bytes("preregistration.json");
        let prereg_sha256 = sha256(&prereg_bytes);
        let signature = receipt_verify::sign_document(&key, &prereg_bytes, "preregistration").unwrap();
        let signed_before = self.json("selection.json")["preregistration_signature_sha256"].is_string();
        if signed_before {
            self.set_bytes("preregistration.json.minisig", signature.as_bytes());
        }
        // Rows: receipt digests, then the aggregate's bindings of them; TREC and its metadata; provenance.
        let mut digests: BTreeMap<String, (String, String)> = BTreeMap::new();
        for aggregate in self.aggregates() {
            let mut rows = self.rows(&aggregate);
            for row in &mut rows {
                if row["receipt"].is_object() {
                    let mut body = row["receipt"].clone();
                    body.as_object_mut().unwrap().remove("digest");
                    row["receipt"]["digest"] =
                        Value::from(receipt_verify::canonical::canonical_digest(&body));
                }
            }
            self.set_rows(&aggregate, &rows);
            let chain = scifact_eval::rolling_digest(
                rows.iter()
                    .filter(|r| r["receipt"].is_object())
                    .map(|r| r["receipt"]["digest"].as_str().unwrap()),
            );
            let file = self.json(&aggregate)["rows"]["file"].as_str().unwrap().to_owned();
            let rows_sha256 = sha256(&self.bytes(&file));
            self.edit_json(&aggregate, |a| {
                a["rows"]["sha256"] = Value::from(rows_sha256.clone());
                a["rows"]["count"] = Value::from(rows.len());
                a["receipts"]["rolling_digest"] = Value::from(chain);
            });
            let stem = aggregate.trim_end_matches(".aggregate.json").to_owned();
            let trec = trec(&self.json(&aggregate), &rows);
            self.set_bytes(&format!("{stem}.trec"), trec.as_bytes());
            let metadata = String::from_utf8(self.bytes(&format!("{stem}.ir_metadata.yml"))).unwrap();
            let repaired: Vec<String> = metadata
                .lines()
                .map(|line| {
                    if line.starts_with("  sha256: ") {
                        format!("  sha256: \"{}\"", sha256(trec.as_bytes()))
                    } else {
                        line.to_owned()
                    }
                })
                .collect();
            self.set_bytes(
                &format!("{stem}.ir_metadata.yml"),
                format!("{}\n", repaired.join("\n")).as_bytes(),
            );
            let aggregate_sha256 = sha256(&self.bytes(&aggregate));
            self.edit_json(&format!("{stem}.provenance.json"), |p| {
                p["subject"][0]["digest"]["sha256"] = Value::from(hex(&rows_sha256));
                p["subject"][1]["digest"]["sha256"] = Value::from(hex(&aggregate_sha256));
            });
            digests.insert(aggregate, (aggregate_sha256, rows_sha256));
        }
        // The ledger, then the freeze that names it, then the statistics.
        self.edit_json("selection.json", |ledger| {
            ledger["preregistration_sha256"] = Value::from(prereg_sha256.clone());
            if signed_before {
                ledger["preregistration_signature_sha256"] = Value::from(sha256(signature.as_bytes()));
            }
            for trial in ledger["trials"].as_array_mut().unwrap() {
                let (aggregate, rows) = &digests[trial["aggregate"].as_str().unwrap()];
                trial["aggregate_sha256"] = Value::from(aggregate.clone());
                trial["rows_sha256"] = Value::from(rows.clone());
            }
        });
        let ledger_sha256 = sha256(&self.bytes("selection.json"));
        self.edit_json("effective-config.json", |freeze| {
            freeze["selection_sha256"] = Value::from(ledger_sha256);
            freeze["preregistration_sha256"] = Value::from(prereg_sha256.clone());
        });
        self.edit_json("statistics.json", |statistics| {
            statistics["preregistration_sha256"] = Value::from(prereg_sha256.clone());
            for run in statistics["runs"].as_array_mut().unwrap() {
                let (_, rows) = &digests[run["aggregate"].as_str().unwrap()];
                run["rows_sha256"] = Value::from(rows.clone());
            }
        });
        // The test result over the runs, then the manifest over everything, signed.
        let runs = self.runs();
        let statement = receipt_verify::test_result_statement(
            &receipt_verify::subjects_of(&runs),
            &self.bytes("verification.json"),
        );
        self.set_json("verification.intoto.json", &statement);
        self.sign_manifest(&key);
    }

    /// The runs as the verifier reads them.
    pub(crate) fn runs(&self) -> Vec<receipt_verify::Run> {
        self.aggregates()
            .iter()
            .map(|name| {
                let aggregate = self.bytes(name);
                let file = self.json(name)["rows"]["file"].as_str().unwrap().to_owned();
                receipt_verify::Run::from_bytes(name, &aggregate, Ok(self.bytes(&file))).unwrap()
            })
            .collect()
    }

    /// Rewrites the manifest's subjects and predicate from the files as they are, and signs it.
    pub(crate) fn sign_manifest(&self, key: &minisign::SecretKey) {
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for entry in std::fs::read_dir(&self.dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name != "manifest.json" && !name.starts_with("manifest.json.minisig") {
                files.insert(name.clone(), self.bytes(&name));
            }
        }
        let verification = self.json("verification.json");
        let mut manifest = self.json("manifest.json");
        manifest["subject"] = Value::Array(
            files
                .iter()
                .map(|(name, bytes)| serde_json::json!({"name": name, "digest": {"sha256": hex(&sha256(bytes))}}))
                .collect(),
        );
        // The claim functions take the vectors by digest, never their bytes.
        let vectors = files
            .remove(receipt_verify::VECTORS_FILE)
            .map(|bytes| format!("sha256:{}", hex(&sha256(&bytes))));
        manifest["predicate"] = if manifest["predicateType"] == receipt_verify::PREDICATE_TYPE_V4 {
            receipt_verify::claim_v4(&self.runs(), &verification["verdict"], &files, vectors.as_deref())
        } else if manifest["predicateType"] == receipt_verify::PREDICATE_TYPE_V5 {
            receipt_verify::claim_v5(&self.runs(), &verification, &files, vectors.as_deref())
        } else if manifest["predicateType"] == receipt_verify::PREDICATE_TYPE_V6 {
            receipt_verify::claim_v6(&self.runs(), &verification, &files, vectors.as_deref())
        } else if manifest["predicateType"] == receipt_verify::PREDICATE_TYPE_V7 {
            receipt_verify::claim_v7(&self.runs(), &verification, &files, vectors.as_deref())
        } else {
            receipt_verify::claim_v8(&self.runs(), &verification, &files, vectors.as_deref())
        };
        self.set_json("manifest.json", &manifest);
        self.sign_manifest_bytes(key);
    }

    /// Rewrites only the manifest's subject digests (for files a parser trick makes unparseable, whose claim
    /// cannot be derived again) and signs it.
    pub(crate) fn resign_subjects(&self, key: &minisign::SecretKey) {
        let mut manifest = self.json("manifest.json");
        for subject in manifest["subject"].as_array_mut().unwrap() {
            let name = subject["name"].as_str().unwrap().to_owned();
            subject["digest"]["sha256"] = Value::from(hex(&sha256(&self.bytes(&name))));
        }
        self.set_json("manifest.json", &manifest);
        self.sign_manifest_bytes(key);
    }

    /// Signs `manifest.json` as it is (for forgeries of the manifest's own bytes).
    pub(crate) fn sign_manifest_bytes(&self, key: &minisign::SecretKey) {
        let signature = receipt_verify::sign_bytes(key, &self.bytes("manifest.json")).unwrap();
        self.set_bytes("manifest.json.minisig", signature.as_bytes());
    }
}

/// A run's TREC lines as the exporter writes them (a score not below its predecessor's in f32 is written as
/// the f32 just under it).
fn trec(aggregate: &Value, rows: &[Value]) -> String {
    let digest = hex(aggregate["retrieval"]["config_sha256"].as_str().unwrap());
    let tag = format!("scifact-audit-{}-{}", aggregate["mode"].as_str().unwrap(), &digest[..12]);
    let mut out = String::new();
    for row in rows.iter().filter(|r| r["error"].is_null()) {
        let mut previous: Option<f64> = None;
        for result in row["results"].as_array().unwrap() {
            let score = result["score"].as_f64().unwrap();
            let written = match previous {
                Some(p) if score as f32 >= p as f32 => f64::from((p as f32).next_down()),
                _ => score,
            };
            previous = Some(written);
            out.push_str(&format!(
                "{} Q0 {} {} {} {tag}\n",
                row["query_id"].as_str().unwrap(),
                result["doc_id"].as_str().unwrap(),
                result["rank"],
                written
            ));
        }
    }
    out
}

/// The metrics of one ranking against its judgements, as the runner writes them into a row.
pub(crate) fn row_metrics(row: &Value) -> Value {
    let ranked: Vec<String> =
        row["ranked_doc_ids"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_owned()).collect();
    let qrels: BTreeMap<String, i64> =
        row["qrels"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_i64().unwrap())).collect();
    serde_json::to_value(receipt_verify::metrics::metrics(&ranked, &qrels)).unwrap()
}
