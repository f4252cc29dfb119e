//! What a forger who knows every format can do to a run: rewrite rows and aggregates with their hashes
//! repaired, and rewrite a receipt with its digest, the rolling digest, the stored copy in the database and
//! the database's recorded digest all made consistent again. The checks must still catch what changed.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::scifact_audit;

pub(crate) fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

pub(crate) fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect::<String>())
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

pub(crate) fn edit_aggregate(dir: &Path, aggregate: &str, edit: impl FnOnce(&mut Value)) {
    let path = dir.join(aggregate);
    let mut value = read_json(&path);
    edit(&mut value);
    write_json(&path, &value);
}

fn read_rows(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn write_rows(path: &Path, rows: &[Value]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for row in rows {
        bytes.extend(serde_json::to_vec(row).unwrap());
        bytes.push(b'\n');
    }
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// Rewrites the rows of `aggregate` with `edit`, then repairs the aggregate's row hash and count.
pub(crate) fn forge_rows(dir: &Path, aggregate: &str, edit: impl FnOnce(&mut Vec<Value>)) {
    let aggregate_path = dir.join(aggregate);
    let mut aggregate_json = read_json(&aggregate_path);
    let rows_path = dir.join(aggregate_json["rows"]["file"].as_str().unwrap());
    let mut rows = read_rows(&rows_path);
    edit(&mut rows);
    let bytes = write_rows(&rows_path, &rows);
    aggregate_json["rows"]["sha256"] = Value::from(sha256(&bytes));
    aggregate_json["rows"]["count"] = Value::from(rows.len());
    aggregate_json["queries"]["selected"] = Value::from(rows.len());
    write_json(&aggregate_path, &aggregate_json);
}

/// Edits the receipt of row `index` of `aggregate`, then makes everything that binds it consistent again:
/// the receipt's digest, the rows file and its hash, the rolling digest, the receipt stored in the database
/// at `db`, and the newest aggregate's digest of that database.
pub(crate) fn forge_receipt(
    dir: &Path,
    db: &Path,
    aggregate: &str,
    index: usize,
    edit: impl FnOnce(&mut Value),
) {
    let mut new_receipt = Value::Null;
    forge_rows(dir, aggregate, |rows| {
        let row = &mut rows[index];
        edit(row);
        let mut body = row["receipt"].clone();
        body.as_object_mut().unwrap().remove("digest");
        row["receipt"]["digest"] = Value::from(receipt_verify::canonical::canonical_digest(&body));
        new_receipt = row["receipt"].clone();
    });
    let rows_path = dir.join(read_json(&dir.join(aggregate))["rows"]["file"].as_str().unwrap());
    let rows = read_rows(&rows_path);
    let chain = scifact_eval::rolling_digest(
        rows.iter().filter(|r| !r["receipt"].is_null()).map(|r| r["receipt"]["digest"].as_str().unwrap()),
    );
    edit_aggregate(dir, aggregate, |a| a["receipts"]["rolling_digest"] = Value::from(chain));
    let conn = rusqlite::Connection::open(db).unwrap();
    let updated = conn
        .execute(
            "UPDATE receipts SET digest = ?1, receipt = ?2 WHERE request_id = ?3",
            rusqlite::params![
                new_receipt["digest"].as_str().unwrap(),
                serde_json::to_string(&new_receipt).unwrap(),
                new_receipt["request_id"].as_str().unwrap()
            ],
        )
        .unwrap();
    assert_eq!(updated, 1);
    drop(conn);
    let live = sha256(&std::fs::read(db).unwrap());
    let newest = newest_aggregate(dir);
    edit_aggregate(dir, &newest, |a| a["store"]["db_sha256_after_run"] = Value::from(live));
}

/// Every aggregate's file name in `dir`, sorted.
pub(crate) fn aggregate_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".aggregate.json"))
        .collect();
    names.sort();
    names
}

/// The aggregate written last (the most receipts after its run).
pub(crate) fn newest_aggregate(dir: &Path) -> String {
    let mut by_receipts = BTreeMap::new();
    for name in aggregate_names(dir) {
        let receipts = read_json(&dir.join(&name))["store"]["receipts_after_run"].as_u64().unwrap();
        by_receipts.insert(receipts, name);
    }
    by_receipts.into_values().next_back().unwrap()
}

/// A report's outcome per (scope, check), from a command's `--json` output.
pub(crate) type Outcomes = BTreeMap<(String, String), String>;

/// Runs a report command with `--json` and returns its exit code and outcomes.
pub(crate) fn outcomes(args: &[&str]) -> (Option<i32>, Outcomes) {
    let mut args = args.to_vec();
    args.push("--json");
    let output = scifact_audit(&args, "");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!("{args:?}: no JSON report ({error}): {}", String::from_utf8_lossy(&output.stderr))
    });
    let checks = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap().to_owned();
            ((field("scope"), field("name")), field("status"))
        })
        .collect();
    (output.status.code(), checks)
}

/// The checks that fail in `after` but did not in `before`.
pub(crate) fn newly_failed(before: &Outcomes, after: &Outcomes) -> Vec<(String, String)> {
    after
        .iter()
        .filter(|(key, status)| *status == "fail" && before.get(*key).is_none_or(|s| s != "fail"))
        .map(|(key, _)| key.clone())
        .collect()
}
