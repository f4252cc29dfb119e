//! Hostile inputs for `verify-bundle` and `verify`: every case ends in its expected outcome (a named failed
//! check, or a clean error), within a time bound and under a memory bound, and prints nothing raw from the
//! input.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::audit::{Signed, signed_run};
use crate::forge::{aggregate_names, copy_dir, edit_aggregate, read_json, sha256, write_json};
use crate::path_str;

/// Each case must finish within this.
const TIME_BOUND: Duration = Duration::from_secs(20);
/// And within this much address space.
const MEMORY_BOUND: u64 = 1 << 30;

struct Bounded {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs the binary with its address space capped at [`MEMORY_BOUND`], killing it past [`TIME_BOUND`].
fn bounded(args: &[&str]) -> Bounded {
    let mut command = Command::new(env!("CARGO_BIN_EXE_scifact-audit"));
    command
        .args(args)
        .env_remove("SCIFACT_MODEL_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe and touches only the child about to exec.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: MEMORY_BOUND, rlim_max: MEMORY_BOUND };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = command.spawn().unwrap();
    // The pipes are read while the child runs: a child that writes more than a pipe holds would otherwise block
    // on its write and read as a time-out.
    let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TIME_BOUND {
            child.kill().unwrap();
            panic!("{args:?} ran past {TIME_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output =
        std::process::Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !stdout.contains('\u{1b}') && !stderr.contains('\u{1b}'),
        "{args:?} printed a raw escape character:\n{stdout}\n{stderr}"
    );
    assert!(output.status.signal_free(), "{args:?} died: {:?}\n{stderr}", output.status);
    Bounded { code: output.status.code(), stdout, stderr }
}

trait SignalFree {
    fn signal_free(&self) -> bool;
}

impl SignalFree for std::process::ExitStatus {
    fn signal_free(&self) -> bool {
        use std::os::unix::process::ExitStatusExt;
        self.signal().is_none()
    }
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

fn replace_with_fifo(path: &Path) {
    std::fs::remove_file(path).unwrap();
    mkfifo(path);
}

fn replace_with_symlink(path: &Path, target: &Path) {
    std::fs::remove_file(path).unwrap();
    std::os::unix::fs::symlink(target, path).unwrap();
}

/// The failed checks of a `--json` report, as `name: evidence`.
fn failed(bounded: &Bounded) -> Vec<(String, String)> {
    let report: Value = serde_json::from_str(&bounded.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}\n{}", bounded.stdout, bounded.stderr));
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| (c["name"].as_str().unwrap().to_owned(), c["evidence"].as_str().unwrap().to_owned()))
        .collect()
}

fn resign(bundle: &Path, signed: &Signed) {
    let _ = std::fs::remove_file(bundle.join("manifest.json.minisig"));
    let output = crate::scifact_audit(
        &["sign", "--bundle-dir", path_str(bundle), "--secret-key", path_str(&signed.secret_key)],
        "",
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

const HYBRID: &str = "synthetic-hybrid-heldout.aggregate.json";
/// The mapping in a store directory.
const MAPPING: &str = "scifact.mapping.json";
/// The mapping a claim v7 bundle of the synthetic dataset carries.
const BUNDLE_MAPPING: &str = "synthetic.mapping.json";

#[test]
fn hostile_bundles_fail_fast_and_clean() {
    let signed = signed_run(41);
    let verify = |bundle: &Path, extra: &[&str]| {
        let mut args = vec![
            "verify-bundle",
            "--bundle-dir",
            path_str(bundle),
            "--public-key",
            path_str(&signed.public_key),
            "--json",
        ];
        args.extend_from_slice(extra);
        bounded(&args)
    };
    let clean = verify(&signed.bundle, &[]);
    assert_eq!(clean.code, Some(0), "{}", clean.stdout);
    assert!(clean.stdout.contains("signed by key id"), "the key id that verified is reported");

    type Case = (&'static str, &'static str, &'static str, fn(&Path, &Signed));
    let cases: Vec<Case> = vec![
        (
            "a failed signature stops everything, even beside a FIFO",
            "signature",
            "nothing else in the bundle was read",
            |b, _| {
                let path = b.join("manifest.json");
                let text = std::fs::read_to_string(&path).unwrap().replacen('{', "{ ", 1);
                std::fs::write(path, text).unwrap();
                replace_with_fifo(&b.join(HYBRID));
            },
        ),
        ("a FIFO named manifest.json", "signature", "FIFO", |b, _| {
            replace_with_fifo(&b.join("manifest.json"))
        }),
        ("a FIFO named like the signature", "signature", "FIFO", |b, _| {
            replace_with_fifo(&b.join("manifest.json.minisig"))
        }),
        ("a manifest over its cap", "signature", "exceed the cap", |b, _| {
            let file = std::fs::OpenOptions::new().append(true).open(b.join("manifest.json")).unwrap();
            file.set_len(5 << 20).unwrap();
        }),
        ("an extra line in the signature file", "signature", "lines", |b, _| {
            let path = b.join("manifest.json.minisig");
            let text = std::fs::read_to_string(&path).unwrap() + "trailing junk\n";
            std::fs::write(path, text).unwrap();
        }),
        ("a signed manifest whose subject is a FIFO", "subjects", "FIFO", |b, _| {
            replace_with_fifo(&b.join(HYBRID))
        }),
        ("a subject that is a symlink to /dev/zero", "subjects", "symbolic link", |b, _| {
            replace_with_symlink(&b.join(BUNDLE_MAPPING), Path::new("/dev/zero"))
        }),
        ("a subject that is a symlink to its own bytes elsewhere", "subjects", "symbolic link", |b, _| {
            let elsewhere = b.with_file_name("elsewhere.json");
            std::fs::copy(b.join(BUNDLE_MAPPING), &elsewhere).unwrap();
            replace_with_symlink(&b.join(BUNDLE_MAPPING), &elsewhere);
        }),
        ("a subject that is a directory", "subjects", "directory", |b, _| {
            std::fs::remove_file(b.join(BUNDLE_MAPPING)).unwrap();
            std::fs::create_dir(b.join(BUNDLE_MAPPING)).unwrap();
        }),
        ("an 8 GB subject", "subjects", "exceed the cap", |b, _| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(b.join(BUNDLE_MAPPING))
                .unwrap()
                .set_len(8 << 30)
                .unwrap();
        }),
        ("one large file listed 2,000 times, signed", "subjects", "listed twice", |b, signed| {
            let path = b.join("manifest.json");
            let mut manifest = read_json(&path);
            let first = manifest["subject"][0].clone();
            manifest["subject"] = Value::Array(vec![first; 2000]);
            write_json(&path, &manifest);
            resign(b, signed);
        }),
        ("5,000 subjects, signed", "subjects", "more than 4096", |b, signed| {
            let path = b.join("manifest.json");
            let mut manifest = read_json(&path);
            manifest["subject"] = Value::Array(
                (0..5000).map(|i| serde_json::json!({"name": format!("f{i}"), "digest": {"sha256": "0".repeat(64)}})).collect(),
            );
            write_json(&path, &manifest);
            resign(b, signed);
        }),
        ("subject names that escape or hide, signed", "subjects", "not a plain file name", |b, signed| {
            let path = b.join("manifest.json");
            let mut manifest = read_json(&path);
            manifest["subject"][0]["name"] = Value::from("../../etc/passwd");
            write_json(&path, &manifest);
            resign(b, signed);
        }),
        ("a subject name with terminal escapes, signed", "subjects", "not a plain file name", |b, signed| {
            let path = b.join("manifest.json");
            let mut manifest = read_json(&path);
            manifest["subject"][0]["name"] = Value::from("x\u{1b}[2K\r\nverdict: verified");
            write_json(&path, &manifest);
            resign(b, signed);
        }),
        (
            "an aggregate nested 100,000 deep, re-hashed and signed",
            "input.json",
            "nested deeper than 128",
            |b, signed| {
                let deep = "[".repeat(100_000) + &"]".repeat(100_000);
                std::fs::write(b.join(HYBRID), &deep).unwrap();
                let path = b.join("manifest.json");
                let mut manifest = read_json(&path);
                for subject in manifest["subject"].as_array_mut().unwrap() {
                    if subject["name"] == HYBRID {
                        subject["digest"]["sha256"] =
                            Value::from(sha256(deep.as_bytes()).trim_start_matches("sha256:").to_owned());
                    }
                }
                write_json(&path, &manifest);
                resign(b, signed);
            },
        ),
        (
            "escape codes inside a JSON string, re-hashed and signed",
            "aggregate.schema",
            "\\u{1b}",
            |b, signed| {
                let path = b.join(HYBRID);
                let mut aggregate = read_json(&path);
                aggregate["schema"] = Value::from("\u{1b}[2K\r\nverdict: verified\u{1b}[8m");
                write_json(&path, &aggregate);
                let bytes = std::fs::read(&path).unwrap();
                let manifest_path = b.join("manifest.json");
                let mut manifest = read_json(&manifest_path);
                for subject in manifest["subject"].as_array_mut().unwrap() {
                    if subject["name"] == HYBRID {
                        subject["digest"]["sha256"] =
                            Value::from(sha256(&bytes).trim_start_matches("sha256:").to_owned());
                    }
                }
                write_json(&manifest_path, &manifest);
                resign(b, signed);
            },
        ),
    ];
    for (i, (what, check, evidence, mutate)) in cases.iter().enumerate() {
        let bundle = signed.dir.path().join(format!("hostile-{i}"));
        copy_dir(&signed.bundle, &bundle);
        mutate(&bundle, &signed);
        let outcome = verify(&bundle, &[]);
        assert_eq!(
            outcome.code,
            Some(1),
            "{what}: exit {:?}\n{}\n{}",
            outcome.code,
            outcome.stdout,
            outcome.stderr
        );
        let failures = failed(&outcome);
        assert!(
            failures.iter().any(|(name, text)| name == check && text.contains(evidence)),
            "{what}: expected {check} failing with {evidence:?}, got {failures:?}"
        );
        if *check == "signature" {
            assert_eq!(failures.len(), 1, "{what}: nothing past the signature is checked");
        }
        // The human summary of the same bundle escapes what it prints.
        let summary = bounded(&[
            "verify-bundle",
            "--bundle-dir",
            path_str(&bundle),
            "--public-key",
            path_str(&signed.public_key),
        ]);
        assert_eq!(
            summary.stdout.lines().filter(|l| l.starts_with("verdict:")).count(),
            1,
            "{what}: {}",
            summary.stdout
        );
        assert!(
            !summary.stdout.contains(['\u{1b}', '\r']),
            "{what}: a raw control character: {}",
            summary.stdout
        );
    }

    // Keys parsed strictly: an extra line is a clean error, not a silently ignored one.
    let key = signed.dir.path().join("extra-line.pub");
    std::fs::write(&key, std::fs::read_to_string(&signed.public_key).unwrap() + "another key\n").unwrap();
    let outcome =
        bounded(&["verify-bundle", "--bundle-dir", path_str(&signed.bundle), "--public-key", path_str(&key)]);
    assert_eq!(outcome.code, Some(2), "{}", outcome.stderr);
    assert!(outcome.stderr.contains("lines"), "{}", outcome.stderr);
    let fifo = signed.dir.path().join("fifo.pub");
    mkfifo(&fifo);
    let outcome = bounded(&[
        "verify-bundle",
        "--bundle-dir",
        path_str(&signed.bundle),
        "--public-key",
        path_str(&fifo),
    ]);
    assert_eq!(outcome.code, Some(2), "{}", outcome.stderr);
    // A missing bundle directory is a clean error.
    let outcome = bounded(&[
        "verify-bundle",
        "--bundle-dir",
        "/nonexistent/bundle",
        "--public-key",
        path_str(&signed.public_key),
    ]);
    assert_eq!(outcome.code, Some(1), "{}", outcome.stdout);
    // Lower caps are honoured and stated.
    let outcome = verify(&signed.bundle, &["--max-file-bytes", "1000"]);
    assert!(failed(&outcome).iter().any(|(name, text)| name == "subjects" && text.contains("cap of 1000")));
    // The vectors are not held, so the cap on what is held does not count them: a total that every other file
    // fits in, and not the vectors beside them, verifies the whole bundle (every dense ranking recomputed from
    // the copy).
    let sizes: Vec<(String, u64)> = std::fs::read_dir(&signed.bundle)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len()))
        .filter(|(name, _)| !name.starts_with("manifest.json"))
        .collect();
    let vectors = sizes.iter().find(|(name, _)| name == "vectors.f32").expect("the bundle carries vectors").1;
    let others: u64 = sizes.iter().filter(|(name, _)| name != "vectors.f32").map(|(_, size)| *size).sum();
    assert!(vectors > 0);
    let outcome = verify(&signed.bundle, &["--max-total-bytes", &others.to_string()]);
    assert!(failed(&outcome).is_empty(), "{:?}", failed(&outcome));
    assert!(outcome.stdout.contains("vectors.f32 hashed as it was copied"), "{}", outcome.stdout);
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
}

#[test]
fn hostile_output_directories_and_stores_fail_fast_and_clean() {
    let signed = signed_run(42);
    let verify = |out: &Path, store: Option<&Path>| {
        let mut args = vec!["verify", "--output-dir", path_str(out), "--json"];
        if let Some(store) = store {
            args.extend(["--store-dir", path_str(store)]);
        }
        bounded(&args)
    };
    let fresh = |name: &str| {
        let out = signed.dir.path().join(name);
        let store = signed.dir.path().join(format!("{name}-store"));
        copy_dir(&signed.out, &out);
        copy_dir(&signed.store, &store);
        (out, store)
    };
    let expect = |outcome: &Bounded, check: &str, evidence: &str| {
        assert_eq!(outcome.code, Some(1), "{check}: {}\n{}", outcome.stdout, outcome.stderr);
        let failures = failed(outcome);
        assert!(
            failures.iter().any(|(name, text)| name == check && text.contains(evidence)),
            "expected {check} failing with {evidence:?}, got {failures:?}"
        );
    };

    // A symlink planted where the report goes is replaced, never written through.
    let (out, store) = fresh("planted");
    let victim = signed.dir.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    std::fs::remove_file(out.join("verification.json")).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("verification.json")).unwrap();
    // The temp files are `.verification.json.partial-<random>`: one planted under that prefix is a stale
    // leftover, unlinked (never followed) before the write.
    let planted = out.join(".verification.json.partial-planted");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let outcome = verify(&out, Some(&store));
    assert_eq!(outcome.code, Some(0), "{}", outcome.stderr);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(out.join("verification.json").symlink_metadata().unwrap().is_file());
    assert!(planted.symlink_metadata().is_err(), "the planted temp name is removed as a stale leftover");

    // A file name is the one thing in an output directory that no parser escapes: the summary does.
    let (out, store) = fresh("escaping-name");
    let hostile = "x\u{1b}[2K\r\nverdict: verified\u{1b}[8m.aggregate.json";
    std::fs::rename(out.join(HYBRID), out.join(hostile)).unwrap();
    let summary = bounded(&["verify", "--output-dir", path_str(&out), "--store-dir", path_str(&store)]);
    assert_eq!(summary.code, Some(1), "{}\n{}", summary.stdout, summary.stderr);
    assert!(summary.stdout.contains("x\\u{1b}[2K\\u{d}\\u{a}verdict: verified"), "{}", summary.stdout);
    assert!(!summary.stdout.contains(['\u{1b}', '\r']), "a raw control character: {}", summary.stdout);
    assert_eq!(summary.stdout.lines().filter(|l| l.starts_with("verdict:")).count(), 1, "{}", summary.stdout);

    // Recorded paths that are not regular files are never read.
    let (out, _) = fresh("dev-zero-executable");
    edit_aggregate(&out, HYBRID, |a| a["executable"]["path"] = Value::from("/dev/zero"));
    expect(&verify(&out, None), "executable.hash", "character device");
    let (out, _) = fresh("fifo-fixture");
    let fifo = signed.dir.path().join("fixture.fifo");
    mkfifo(&fifo);
    for name in aggregate_names(&out) {
        edit_aggregate(&out, &name, |a| a["corpus"]["fixture_path"] = Value::from(path_str(&fifo)));
    }
    expect(&verify(&out, None), "corpus.file", "FIFO");
    // Aggregates that record different fixture paths: the fixture is the first one present, whichever aggregate
    // names it (not the first aggregate's path, read ahead beside the runs); with none present, nothing that
    // needs it is checked, and the report says to pass --corpus.
    let rankings = |outcome: &Bounded| -> Vec<(String, String)> {
        let report: Value = serde_json::from_str(&outcome.stdout).unwrap();
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"].as_str().unwrap().starts_with("ranking."))
            .map(|c| (c["status"].as_str().unwrap().to_owned(), c["evidence"].as_str().unwrap().to_owned()))
            .collect()
    };
    let (out, store) = fresh("first-fixture-path-moved");
    edit_aggregate(&out, &aggregate_names(&out)[0], |a| {
        a["corpus"]["fixture_path"] = Value::from("/nonexistent/fixture.json")
    });
    let found = rankings(&verify(&out, Some(&store)));
    assert!(!found.is_empty() && found.iter().all(|(status, _)| status == "pass"), "{found:?}");
    let (out, store) = fresh("every-fixture-path-moved");
    for name in aggregate_names(&out) {
        edit_aggregate(&out, &name, |a| {
            a["corpus"]["fixture_path"] = Value::from("/nonexistent/fixture.json")
        });
    }
    let found = rankings(&verify(&out, Some(&store)));
    assert!(
        !found.is_empty()
            && found
                .iter()
                .all(|(status, evidence)| status == "not_checked" && evidence.contains("--corpus")),
        "{found:?}"
    );
    let (out, _) = fresh("dev-zero-database");
    for name in aggregate_names(&out) {
        edit_aggregate(&out, &name, |a| a["store"]["db_path"] = Value::from("/dev/zero"));
    }
    expect(&verify(&out, None), "store.format", "character device");

    // Crafted databases: a recursive view, WAL mode, a trigger, not SQLite at all.
    type Craft = (&'static str, &'static str, fn(&rusqlite::Connection));
    let crafts: Vec<Craft> = vec![
        ("receipts as a recursive view", "unexpected or altered", |conn| {
            conn.execute_batch(
                "DROP TABLE receipts; CREATE VIEW receipts AS WITH RECURSIVE r(request_id, digest) AS \
                 (SELECT 'a', 'b' UNION ALL SELECT request_id || 'x', digest FROM r) SELECT * FROM r;",
            )
            .unwrap()
        }),
        ("a trigger", "unexpected or altered", |conn| {
            conn.execute_batch("CREATE TRIGGER t AFTER INSERT ON meta BEGIN SELECT 1; END;").unwrap()
        }),
        ("WAL mode", "WAL", |conn| {
            let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).unwrap();
            assert_eq!(mode, "wal");
        }),
    ];
    for (what, evidence, craft) in crafts {
        let (out, store) = fresh(&format!("craft-{}", what.replace(' ', "-")));
        let db = store.join("scifact.db");
        craft(&rusqlite::Connection::open(&db).unwrap());
        let before: Vec<String> = std::fs::read_dir(&store)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        expect(&verify(&out, Some(&store)), "store.format", evidence);
        let after: Vec<String> = std::fs::read_dir(&store)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(before, after, "{what}: verifying created files beside the database");
    }
    let (out, store) = fresh("not-sqlite");
    std::fs::write(store.join("scifact.db"), vec![0x5a; 8192]).unwrap();
    expect(&verify(&out, Some(&store)), "store.format", "not a SQLite database");

    // A mapping over its cap, a rows file that is a symlink, an aggregate that is a FIFO.
    let (out, store) = fresh("huge-mapping");
    std::fs::OpenOptions::new().write(true).open(store.join(MAPPING)).unwrap().set_len(3 << 30).unwrap();
    expect(&verify(&out, Some(&store)), "mapping.hash", "exceed the cap");
    let (out, store) = fresh("symlinked-rows");
    let rows = out.join("synthetic-hybrid-heldout.jsonl");
    let elsewhere = signed.dir.path().join("rows-elsewhere.jsonl");
    std::fs::copy(&rows, &elsewhere).unwrap();
    replace_with_symlink(&rows, &elsewhere);
    expect(&verify(&out, Some(&store)), "rows.file", "symbolic link");
    let (out, store) = fresh("fifo-aggregate");
    replace_with_fifo(&out.join(HYBRID));
    let outcome = verify(&out, Some(&store));
    assert_eq!(outcome.code, Some(2), "{}", outcome.stderr);
    assert!(outcome.stderr.contains("FIFO"), "{}", outcome.stderr);
}

/// The tiny archive's three members, read from the committed zip.
fn tiny_members() -> Vec<(String, Vec<u8>)> {
    let root = crate::tiny::root();
    let file = std::fs::File::open(root.join("fixtures/tiny/scifact-tiny.zip")).unwrap();
    let mut zip = zip::ZipArchive::new(file).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut entry = zip.by_index(i).unwrap();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
            (entry.name().unwrap().replacen("tiny/", "made-up/", 1), bytes)
        })
        .collect()
}

/// A zip of `members` (name, bytes) at `path`.
fn zip_of(path: &Path, members: &[(String, Vec<u8>)]) {
    let mut writer = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, bytes) in members {
        writer.start_file(name.as_str(), zip::write::SimpleFileOptions::default()).unwrap();
        std::io::Write::write_all(&mut writer, bytes).unwrap();
    }
    writer.finish().unwrap();
}

/// The tiny members with `member`'s bytes edited.
fn edited(member: &str, edit: impl FnOnce(&str) -> String) -> Vec<(String, Vec<u8>)> {
    let mut members = tiny_members();
    let (_, bytes) = members.iter_mut().find(|(name, _)| name.ends_with(member)).unwrap();
    *bytes = edit(std::str::from_utf8(bytes).unwrap()).into_bytes();
    members
}

#[test]
fn hostile_archives_dataset_directories_and_model_directories_end_with_a_named_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = crate::tiny::root().join("fixtures/tiny/model");
    let inputs = dir.path().join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    // (what, the --dataset-archive, the --model-dir, what stderr must say)
    let mut cases: Vec<(String, std::path::PathBuf, std::path::PathBuf, String)> = Vec::new();
    let mut archive_case = |what: &str, members: Vec<(String, Vec<u8>)>, says: &str| {
        let path = inputs.join(format!("{}.zip", cases.len()));
        zip_of(&path, &members);
        cases.push((what.into(), path, model.clone(), says.into()));
    };
    archive_case(
        "a corpus line that is a JSON array",
        edited("corpus.jsonl", |t| format!("[\"d-arr\",\"A title\",\"some text\"]\n{t}")),
        "made-up/corpus.jsonl line 1: not a JSON object",
    );
    archive_case(
        "a query id holding a space",
        edited("queries.jsonl", |t| {
            t.replacen("\"_id\": \"", "\"_id\": \"a ", 1).replacen("\"_id\":\"", "\"_id\":\"a ", 1)
        }),
        "made-up/queries.jsonl line 1: _id \"a ",
    );
    archive_case(
        "a qrels file with its header only",
        edited("qrels/test.tsv", |t| format!("{}\n", t.lines().next().unwrap())),
        "judges no query",
    );
    archive_case(
        "a grade of 2^63 - 1",
        edited("qrels/test.tsv", |t| {
            let mut lines: Vec<String> = t.lines().map(str::to_owned).collect();
            let fields: Vec<&str> = lines[1].split('\t').collect();
            lines[1] = format!("{}\t{}\t9223372036854775807", fields[0], fields[1]);
            lines.join("\n") + "\n"
        }),
        "made-up/qrels/test.tsv line 2: score \"9223372036854775807\" is not an integer within ±2^53",
    );
    let mut members = tiny_members();
    members.push(("made-up/extra.bin".into(), b"x".to_vec()));
    archive_case("a member BEIR's layout has no place for", members, "made-up/extra.bin");

    let linked = inputs.join("linked-member.zip");
    let mut writer = zip::ZipWriter::new(std::fs::File::create(&linked).unwrap());
    for (name, bytes) in tiny_members() {
        let options = zip::write::SimpleFileOptions::default();
        if name.ends_with("corpus.jsonl") {
            writer.add_symlink(name.as_str(), "/dev/zero", options).unwrap();
        } else {
            writer.start_file(name.as_str(), options).unwrap();
            std::io::Write::write_all(&mut writer, &bytes).unwrap();
        }
    }
    writer.finish().unwrap();
    cases.push((
        "a corpus member that is a link to /dev/zero".into(),
        linked,
        model.clone(),
        "\"made-up/corpus.jsonl\" refused: symbolic link".into(),
    ));
    let fifo = inputs.join("fifo.zip");
    mkfifo(&fifo);
    cases.push(("a FIFO for an archive".into(), fifo, model.clone(), "is a FIFO".into()));
    let zero = inputs.join("zero.zip");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    cases.push(("an archive that links to /dev/zero".into(), zero, model.clone(), "zero.zip".into()));

    // A dataset directory whose corpus links to /dev/zero.
    let directory = inputs.join("directory").join("made-up");
    std::fs::create_dir_all(directory.join("qrels")).unwrap();
    for (name, bytes) in tiny_members() {
        std::fs::write(directory.join(name.trim_start_matches("made-up/")), bytes).unwrap();
    }
    std::fs::remove_file(directory.join("corpus.jsonl")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", directory.join("corpus.jsonl")).unwrap();
    cases.push((
        "a dataset directory whose corpus links to /dev/zero".into(),
        directory,
        model.clone(),
        "corpus.jsonl".into(),
    ));

    // Model directories, beside a good archive.
    let good = inputs.join("good.zip");
    zip_of(&good, &tiny_members());
    let mut model_case = |what: &str, edit: &dyn Fn(&Path), says: &str| {
        let copy = inputs.join(format!("model-{}", cases.len()));
        copy_dir(&model, &copy);
        edit(&copy);
        cases.push((what.into(), good.clone(), copy, says.into()));
    };
    let link = |dir: &Path, file: &str, target: &str| {
        std::fs::remove_file(dir.join(file)).unwrap();
        std::os::unix::fs::symlink(target, dir.join(file)).unwrap();
    };
    model_case("config.json linking to /dev/zero", &|d| link(d, "config.json", "/dev/zero"), "config.json");
    model_case(
        "model.safetensors linking to /dev/urandom",
        &|d| link(d, "model.safetensors", "/dev/urandom"),
        "model.safetensors",
    );
    model_case("tokenizer.json a FIFO", &|d| replace_with_fifo(&d.join("tokenizer.json")), "tokenizer.json");
    model_case(
        "a hidden size of 2^62",
        &|d| {
            let config = std::fs::read_to_string(d.join("config.json")).unwrap();
            let mut value: Value = serde_json::from_str(&config).unwrap();
            value["hidden_size"] = Value::from(1u64 << 62);
            std::fs::write(d.join("config.json"), value.to_string()).unwrap();
        },
        "hidden_size",
    );
    model_case(
        "a sparse 5 GB weights file",
        &|d| {
            let file = std::fs::File::create(d.join("model.safetensors")).unwrap();
            file.set_len(5 << 30).unwrap();
        },
        "model.safetensors",
    );

    for (index, (what, archive, model_dir, says)) in cases.iter().enumerate() {
        let work = dir.path().join(format!("work-{index}"));
        let out = work.join("fixture.json");
        let outcome = bounded(&[
            "build",
            "--dataset-archive",
            path_str(archive),
            "--qrels-split",
            "test",
            "--model-dir",
            path_str(model_dir),
            "--work-dir",
            path_str(&work),
            "--out",
            path_str(&out),
        ]);
        assert_ne!(outcome.code, Some(0), "{what}: accepted\n{}", outcome.stdout);
        assert!(
            outcome.stderr.contains(says.as_str()),
            "{what}: the error does not say {says:?}:\n{}",
            outcome.stderr
        );
        assert!(!outcome.stderr.contains("panicked"), "{what}: {}", outcome.stderr);
        assert!(!out.exists(), "{what}: a fixture was written");
    }
    assert!(cases.len() >= 14, "{} cases", cases.len());

    // What sentence-transformers accepts is accepted: a checkpoint in a Hugging Face cache snapshot, each file a
    // link into the repository's blobs, builds.
    let repo = inputs.join("models--made--tiny");
    let snapshot = repo.join("snapshots").join("0123abcd");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    for entry in std::fs::read_dir(&model).unwrap() {
        let entry = entry.unwrap();
        let blob =
            repo.join("blobs").join(sha256(&std::fs::read(entry.path()).unwrap()).replace("sha256:", ""));
        std::fs::copy(entry.path(), &blob).unwrap();
        let target = Path::new("../../blobs").join(blob.file_name().unwrap());
        std::os::unix::fs::symlink(target, snapshot.join(entry.file_name())).unwrap();
    }
    let work = dir.path().join("work-cache");
    let out = work.join("fixture.json");
    let outcome = bounded(&[
        "build",
        "--dataset-archive",
        path_str(&good),
        "--qrels-split",
        "test",
        "--model-dir",
        path_str(&snapshot),
        "--work-dir",
        path_str(&work),
        "--out",
        path_str(&out),
    ]);
    assert_eq!(outcome.code, Some(0), "a cache snapshot: {}", outcome.stderr);
    assert!(out.exists());
}

/// The harness reads a child's pipes while it runs: a report larger than a pipe holds (64 KiB) comes back whole,
/// instead of the child blocking on its write until the time bound reads it as a hang.
#[test]
fn the_harness_takes_more_output_than_a_pipe_holds() {
    let attestations = crate::tiny::root().join("attestations");
    let run = bounded(&[
        "verify-bundle",
        "--bundle-dir",
        path_str(&attestations.join("scifact-fdfc890")),
        "--public-key",
        path_str(&attestations.join("scifact-audit-3.pub")),
        "--json",
    ]);
    assert!(run.stdout.len() > 1 << 16, "{} bytes", run.stdout.len());
    assert!(serde_json::from_str::<serde_json::Value>(&run.stdout).is_ok(), "{}", run.stderr);
}

/// An archive linked into place (`ln -s` to a zip on shared storage) is read through the link and gives the
/// fixture the file itself gives; a link to a device is refused saying so; a dataset directory whose corpus is a
/// link to a device says what it is, not that the corpus is absent.
#[test]
fn a_linked_archive_is_followed_to_its_file_and_a_link_to_anything_else_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = crate::tiny::root().join("fixtures/tiny");
    let build = |archive: &Path, out: &str| {
        bounded(&[
            "build",
            "--profile",
            "tiny",
            "--archive",
            path_str(archive),
            "--model-dir",
            path_str(&fixtures.join("model")),
            "--device",
            "cpu",
            "--out",
            path_str(&dir.path().join(out)),
            "--work-dir",
            path_str(&dir.path().join(format!("{out}.work"))),
        ])
    };
    let direct = build(&fixtures.join("scifact-tiny.zip"), "direct.json");
    assert_eq!(direct.code, Some(0), "{}", direct.stderr);
    let link = dir.path().join("scifact-tiny.zip");
    std::os::unix::fs::symlink(fixtures.join("scifact-tiny.zip"), &link).unwrap();
    let linked = build(&link, "linked.json");
    assert_eq!(linked.code, Some(0), "{}", linked.stderr);
    assert!(
        std::fs::read(dir.path().join("linked.json")).unwrap()
            == std::fs::read(dir.path().join("direct.json")).unwrap(),
        "the linked archive's fixture is the file's, byte for byte"
    );
    let device = dir.path().join("device.zip");
    std::os::unix::fs::symlink("/dev/zero", &device).unwrap();
    let refused = build(&device, "device.json");
    assert_eq!(refused.code, Some(2));
    assert!(refused.stderr.contains("is a link to a device, not a regular file"), "{}", refused.stderr);

    let dataset = dir.path().join("made-up");
    std::fs::create_dir_all(dataset.join("qrels")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dataset.join("corpus.jsonl")).unwrap();
    std::fs::write(dataset.join("queries.jsonl"), "{\"_id\": \"q1\", \"text\": \"x\"}\n").unwrap();
    std::fs::write(dataset.join("qrels/test.tsv"), "query-id\tcorpus-id\tscore\nq1\td1\t1\n").unwrap();
    let run = bounded(&[
        "build",
        "--dataset-archive",
        path_str(&dataset),
        "--model-dir",
        path_str(&fixtures.join("model")),
        "--device",
        "cpu",
        "--out",
        path_str(&dir.path().join("d.json")),
        "--work-dir",
        path_str(&dir.path().join("d.work")),
    ]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("corpus.jsonl: is a link to a device"), "{}", run.stderr);
    assert!(!run.stderr.contains("has no member"), "{}", run.stderr);
}
