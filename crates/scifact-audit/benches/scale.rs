//! How the whole chain grows with the corpus: a generated BEIR-layout archive of N documents (the tiny corpus's
//! made-up words, 1,000 test queries) and the tiny model, run through `build`, `eval` (every mode, the
//! baseline-only search space, its own verify stage on a 64-document sample) and a reader's `verify-bundle`
//! (every vector re-embedded), each timed and its peak RSS read from `/usr/bin/time -v`. The fixture is version
//! 2 at every size (`--fixture-format v2`), so the sizes compare.
//!
//! `cargo bench -p scifact-audit --bench scale -- 10000 30000 100000` prints one line per stage and size, with
//! the CPU. Run from the source checkout (the tiny model is `fixtures/tiny/model`). `SCALE_BENCH_BODY_WORDS=1100`
//! makes every document long (a 330,000-document corpus member is then over 2 GiB).

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Test queries of every generated corpus.
const QUERIES: usize = 1_000;

fn main() {
    let sizes: Vec<usize> =
        std::env::args().skip(1).filter_map(|a| a.replace('_', "").parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![10_000, 30_000] } else { sizes };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let binary = env!("CARGO_BIN_EXE_scifact-audit");
    let model = root.join("fixtures/tiny/model");
    let space = root.join("fixtures/tiny/baseline-only.json");
    // SCALE_BENCH_BODY_WORDS=N gives every document a body of N words (1,100 words: about 6.7 KiB a document, a
    // corpus member over 2 GiB from 330,000 documents) instead of 18 to 40.
    let body_words: Option<usize> =
        std::env::var("SCALE_BENCH_BODY_WORDS").ok().and_then(|words| words.parse().ok());
    println!("cpu: {}", cpu());
    if let Some(words) = body_words {
        println!("every document's body is {words} words long");
    }
    println!("{:>10} {:<14} {:>9} {:>12}  outcome", "documents", "stage", "seconds", "peak RSS MiB");
    for documents in sizes {
        let dir = tempfile::tempdir().expect("a temp directory");
        // SCALE_BENCH_KEEP=1 keeps each size's directory (archive, fixture, work, bundle) to look into.
        let dir_path =
            if std::env::var_os("SCALE_BENCH_KEEP").is_some() { dir.keep() } else { dir.path().to_owned() };
        let dir = Kept(dir_path);
        let archive = dir.path().join("generated.zip");
        let started = Instant::now();
        match body_words {
            Some(words) => {
                scifact_eval::tiny::write_long_archive(&archive, "generated", documents, QUERIES, words)
            }
            None => scifact_eval::tiny::write_shaped_archive(&archive, "generated", documents, QUERIES),
        }
        .expect("the archive");
        let bytes = std::fs::metadata(&archive).map(|m| m.len()).unwrap_or(0);
        println!(
            "{documents:>10} {:<14} {:>9.1} {:>12}  {:.0} MiB archive",
            "generate",
            started.elapsed().as_secs_f64(),
            "-",
            bytes as f64 / 1048576.0
        );
        let key = dir.path().join("bench.key");
        let public = dir.path().join("bench.pub");
        let path = |p: &Path| p.to_str().expect("a UTF-8 path").to_owned();
        let keygen =
            ["keygen", "--secret-key", &path(&key), "--public-key", &path(&public), "--without-password"];
        Command::new(binary).args(keygen).output().expect("keygen");
        let corpus =
            ["--dataset-archive", &path(&archive), "--model-dir", &path(&model), "--fixture-format", "v2"];
        let build: Vec<String> = ["build", "--out", &path(&dir.path().join("fixture.json")), "--work-dir"]
            .iter()
            .map(|s| (*s).to_owned())
            .chain([path(&dir.path().join("build-work"))])
            .chain(corpus.iter().map(|s| (*s).to_owned()))
            .collect();
        if !stage(documents, "build", binary, &build) {
            continue;
        }
        let work = dir.path().join("work");
        let mut eval: Vec<String> = ["eval", "--work-dir", &path(&work), "--search-space", &path(&space)]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        eval.extend(["--secret-key".to_owned(), path(&key)]);
        eval.extend(corpus.iter().map(|s| (*s).to_owned()));
        if !stage(documents, "eval", binary, &eval) {
            continue;
        }
        let Some(bundle) =
            std::fs::read_dir(work.join("bundles")).ok().and_then(|mut d| d.next()).and_then(|e| e.ok())
        else {
            continue;
        };
        let verify: Vec<String> = [
            "verify-bundle",
            "--bundle-dir",
            &path(&bundle.path()),
            "--public-key",
            &path(&public),
            "--archive",
            &path(&archive),
            "--model-dir",
            &path(&model),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        stage(documents, "verify-bundle", binary, &verify);
    }
}

/// A directory path, kept or removed with the temp directory that made it.
struct Kept(std::path::PathBuf);

impl Kept {
    fn path(&self) -> &Path {
        &self.0
    }
}

/// Runs one stage under `/usr/bin/time -v`; prints its line; whether it succeeded.
fn stage(documents: usize, name: &str, binary: &str, args: &[String]) -> bool {
    let started = Instant::now();
    let output = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(binary)
        .args(args)
        .output()
        .expect("/usr/bin/time (GNU time) runs");
    let seconds = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let rss_kib: u64 = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes): "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let outcome = if output.status.success() {
        "ok".to_owned()
    } else {
        let stdout = String::from_utf8_lossy(&output.stdout);
        let why = stderr
            .lines()
            .chain(stdout.lines())
            .find(|l| l.starts_with("error") || l.starts_with("verdict"))
            .unwrap_or("failed")
            .to_owned();
        format!("exit {:?}: {why}", output.status.code())
    };
    println!("{documents:>10} {name:<14} {seconds:>9.1} {:>12.0}  {outcome}", rss_kib as f64 / 1024.0);
    output.status.success()
}

fn cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "an unnamed CPU".into())
}
