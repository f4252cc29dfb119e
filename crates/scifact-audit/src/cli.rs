//! The command line, and nothing else: clap definitions with the help text users read.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Signed retrieval evaluations on BEIR's datasets (SciFact by default) that a stranger can re-check, model
/// and dataset named by their bytes.
#[derive(Debug, Parser)]
#[command(
    name = "scifact-audit",
    version = concat!(env!("CARGO_PKG_VERSION"), " (source revision ", env!("SCIFACT_AUDIT_BUILD_REVISION"), ")"),
    max_term_width = 100,
    disable_help_subcommand = true,
    after_help = "Start: scifact-audit eval --profile tiny --work-dir target/tiny. One step at a time: build, run, \
                  build-sparse, embed, validate, verify, export, bundle, sign."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the whole evaluation; write a signed bundle
    ///
    /// The whole evaluation in one command, on SciFact or any dataset chosen with --dataset / --dataset-archive
    /// (several: a suite): build (or reuse) the fixture; pre-register the baseline, the search
    /// space, the selection rule and the statistics plan (preregistration.json, signed at once with a key);
    /// run calibration (all modes) and every declared trial (hybrid); select the winner by the declared rule
    /// (selection.json) and freeze it; run held-out for the baseline and the winner (all modes); compute the
    /// held-out statistics (statistics.json: bootstrap intervals, randomization tests, Holm); set the dataset's
    /// published rows beside the runs made like them (published.json: comparable only over BEIR's own archive
    /// and a registry model); verify; write report.html; bundle; and sign when a key is given.
    ///
    /// Every input (secret key and its password, archive, model) is checked before any long stage. Interrupted
    /// at any moment (Ctrl-C, a kill, a crash), the same command picks up where it stopped: nothing answered is
    /// asked again or lost, and the aggregates disclose every interrupted attempt. A new executable or fixture
    /// starts a fresh store. Ends with the held-out metrics beside what they do not establish.
    Eval(EvalArgs),
    /// Verify a bundle offline: every number recomputed
    ///
    /// Verify a bundle offline, trusting no one: not the code that made it, nor the person who signed it.
    ///
    /// A signature proves who made the claim, not that it is true, so every number a reader sees is recomputed
    /// from the bundle and public inputs: every dense score and vector candidate list by a full scan of the
    /// bundle's vectors (always); every lexical score and candidate list by this verifier's own FTS5 index of
    /// the public SciFact archive (--archive, whose sha256 must be the bundle's); every fused list from both;
    /// every query and document vector re-embedded with the declared model and required bit for bit
    /// (--model-dir with --archive; a progress bar shows it, about as long as building the fixture);
    /// metrics, intervals, p-values and the selection; and report.html, rendered again and compared byte for
    /// byte.
    ///
    /// Each check says what it rests on: recomputed, sampled, attested (the signer's word: git state, host,
    /// latency, times; no one can recompute them) or not checked (an input was not given). Verdict: `verified`
    /// (every number recomputed, every vector re-embedded), `sampled` (--embedding-sample N: every number
    /// recomputed from the bundle's vectors, N documents re-embedded; the summary gives the chance that forged
    /// vectors pass), `publishable` (nothing failed, some numbers rest on the signer: the summary says which
    /// and what would check them), `not publishable`, `failed` (exit 1).
    ///
    /// The bundle is treated as hostile. The signature is checked first (prehashed minisign only, key and
    /// signature files parsed strictly), and when it fails nothing else is read. Subject names are checked
    /// before any file is opened; each file is then read exactly once, and only if it is a regular file (no
    /// symlink, FIFO, device or directory) within the caps (by default 64 MiB per file, 512 MiB in all), and
    /// every check works on the bytes that were hashed. Every JSON document must be I-JSON (no duplicate key,
    /// lone surrogate or out-of-range number). Text from the bundle is escaped before it is printed.
    #[command(
        override_usage = "scifact-audit verify-bundle [OPTIONS] --bundle-dir <DIR>\n       --public-key <FILE>"
    )]
    VerifyBundle(VerifyBundleArgs),
    /// Make a minisign key pair for signing bundles
    ///
    /// Generate a minisign key pair (encrypted with $MINISIGN_PASSWORD or a prompted password, unless
    /// --without-password).
    Keygen(KeygenArgs),
    /// Compare two bundles: identical, better or worse?
    ///
    /// Is the candidate identical to, no worse than, or better than the baseline? A signed, checkable answer.
    ///
    /// Verifies both bundles first (one that does not verify is refused, named), and refuses a pair whose
    /// corpus, judgements, split or query ids differ. Matches every run present in both (mode, split and
    /// configuration role: the frozen baseline, the selected configuration, or a trial by digest; `--match mode`
    /// pairs runs by mode and split alone) and compares query by query: identical rankings and score bits, the
    /// per-query deltas of all nine metrics with paired bootstrap intervals, a two-sided paired sign-flip test
    /// and a one-sided non-inferiority test at --margin on nDCG@10, Holm across the runs compared. A verdict per
    /// run and overall: identical, improved, non_inferior, inconclusive or regressed, with the reasons.
    ///
    /// Writes --out/comparison.json (an in-toto Statement about both manifests, the plan and every number;
    /// signed with --secret-key) and --out/compare.html (drawn by the verifier from its own re-derivation).
    /// Exit 0 only for identical, improved or non_inferior: usable as a gate. The draws are SplitMix64 as the
    /// selection statistics define them, so `verify-comparison` makes the same ones.
    #[command(
        override_usage = "scifact-audit compare [OPTIONS] --baseline <DIR> --candidate <DIR>\n       --public-key <FILE> --out <DIR>"
    )]
    Compare(CompareArgs),
    /// Check a comparison statement against its bundles
    ///
    /// Check a comparison statement against its two bundles, re-deriving every number with the verifier's own
    /// metrics and statistics: signature, subject (these two manifests), plan, every run's deltas, intervals
    /// and p-values, the verdicts, and compare.html beside the statement byte for byte.
    #[command(
        override_usage = "scifact-audit verify-comparison [OPTIONS] --baseline <DIR>\n       --candidate <DIR> --statement <FILE> --public-key <FILE>"
    )]
    VerifyComparison(VerifyComparisonArgs),
    /// Re-run a bundle's evaluation; state if it reproduces
    ///
    /// Re-execute a bundle's evaluation here and state whether its numbers reproduce.
    ///
    /// Verifies the bundle first (one that does not verify is refused). Requires the archive and the model
    /// to have the bundle's digests (a mismatch is a named refusal, exit 2), rebuilds the fixture and the
    /// store in --work-dir, reruns every split, mode and configuration the bundle holds under its effective
    /// configurations, and compares query by query: identical rankings and score bits, Kendall's tau over
    /// the union of the top 10 and rank-biased overlap (repro_eval's KTU and RBO), score and metric deltas,
    /// RMSE, and for each pre-registered comparison the effect ratio and delta relative improvement. Writes
    /// --work-dir/reproduction.json, an in-toto Statement about the bundle's manifest.json (signed with
    /// --secret-key), with a verdict: reproduced_exactly, reproduced_within_tolerance or not_reproduced (exit
    /// 1), and why.
    ///
    /// What differs legitimately across machines: latency, always (it is not compared). Embeddings, scores and
    /// rankings do not: the forward pass gives a text the same bits on AVX-512, AVX2 and portable kernels, so
    /// this code reproduces exactly on any x86-64 machine. The tolerances stated in the file are for another
    /// build or implementation of the same contract: scores within 1e-5, every metric's mean within 0.005 (less
    /// than one swapped pair in one of 200 queries can do), at least 95% of rankings identical per run, effect
    /// ratios within 0.1 of 1.
    #[command(
        override_usage = "scifact-audit reproduce [OPTIONS] --bundle-dir <DIR> --public-key <FILE>\n       --work-dir <DIR>"
    )]
    Reproduce(ReproduceArgs),
    /// Check a reproduction statement against its bundle
    ///
    /// Check a reproduction statement against its bundle: signature, subject (this bundle's manifest), the
    /// original's numbers, the stated tolerances (the published ones) and the verdict they imply.
    #[command(
        override_usage = "scifact-audit verify-reproduction [OPTIONS] --bundle-dir <DIR>\n       --statement <FILE> --public-key <FILE>"
    )]
    VerifyReproduction(VerifyReproductionArgs),
    /// Check a suite of bundles and its table
    ///
    /// Check a suite (`eval --dataset a,b,c`, or a dataset of forums): `suite.json`'s signature, then every
    /// bundle it names, verified as verify-bundle verifies one (with --archive-dir, where each bundle's archive
    /// is the zip whose sha256 it records, and --model-dir), its manifest digest, every cell recomputed from
    /// that bundle's rankings and judgements, each dataset of forums the unweighted mean of its forums, and the
    /// mean over datasets. The verdict is the weakest of all these checks'; exit 1 when one fails.
    #[command(
        override_usage = "scifact-audit verify-suite [OPTIONS] --suite-dir <DIR>\n       --public-key <FILE>"
    )]
    VerifySuite(VerifySuiteArgs),
    /// List BEIR's datasets; say which this build evaluates
    ///
    /// List the BEIR datasets as their own files state them: BEIR's download and md5, the evaluation split,
    /// exact corpus and query counts, the grades the qrels hold (lines per grade), the quirks BEIR's rules
    /// handle, and CQADupStack's twelve forums. Which of them this build evaluates is said at the end.
    Datasets(DatasetsArgs),
    /// Say where the model runs; check a GPU's kernels
    ///
    /// Say where the model would run: which GPU, driver and compiler, or why none is usable (a GPU that fails
    /// the self-check every run makes before embedding on it is not). With --check, hold every one of the
    /// device's kernels to the CPU's definitions (exp, erf and GELU at every step of a sweep; products of
    /// ragged shapes element by element; token embedding, layer norm, softmax, pooling and normalisation):
    /// every value must be the CPU's bits (any NaN counts as any NaN).
    ///
    /// On the CPU, SCIFACT_AUDIT_SIMD=avx2|portable caps the embedding and search kernels, to measure on one
    /// machine the code an AVX2-only or other CPU runs; every CPU kernel gives the same bits, so only speed
    /// changes.
    Device(DeviceArgs),
    /// Anserini's BM25-flat run of a dataset, without Java
    ///
    /// Anserini's BM25 flat (Lucene 9.9.1's English analyzer and BM25, k1 0.9, b 0.4), the lexical baseline
    /// BEIR papers cite, on SciFact, another BEIR dataset (--dataset) or any archive in BEIR's layout: writes the
    /// TREC run `SearchCollection -bm25 -removeQuery -hits 1000` writes (the same documents, ranks and printed
    /// scores; every score's bits are Lucene's) and prints nDCG@10 over the split's queries. It is no
    /// evaluation: nothing is pre-registered, signed or bundled.
    Bm25Flat(Bm25FlatArgs),
    /// Build the embedded fixture from a dataset's archive
    ///
    /// Build the embedded corpus fixture from a dataset's archive (SciFact by default, --dataset NAME for
    /// another of BEIR's, --dataset-archive ZIP for any in BEIR's layout): zip safety checks, the dataset's
    /// shape gate (its registry counts; SciFact 5,183 documents and 300 queries), the archive's sha256 and md5
    /// recorded (BEIR's file only when the md5 is BEIR's), the semantic texts by the declared text policy (by
    /// default the contract's, cut to 700 characters), embeddings through a resumable fsync'd cache, the model
    /// named by the digests of its files. Exits 0 only when a complete fixture was written; rerun the same
    /// command to resume.
    #[command(hide = true)]
    Build(BuildArgs),
    /// Run modes over a split of a fixture (rows, receipts)
    ///
    /// Run the evaluation: build or resume the store from the fixture, run the chosen modes over the chosen
    /// split, and write `<dataset>-<mode>-<split>.jsonl` (one row per query, with its search receipt) and
    /// `<dataset>-<mode>-<split>.aggregate.json` (metrics plus every binding) into the output directory.
    /// Calibration is for diagnosis and configuration choice; run held-out once, after freezing; `all` only
    /// after held-out. Never overwrites a receipt. Interrupted, the same command resumes: modes already
    /// complete are kept, a mode cut short continues from its journal without asking anything twice.
    #[command(hide = true)]
    #[command(
        override_usage = "scifact-audit run [OPTIONS] --corpus <FIXTURE> --store-dir <DIR>\n       --output-dir <DIR> --split <SPLIT> --mode <MODE>"
    )]
    Run(RunArgs),
    /// Encode a fixture's texts with a learned sparse model
    ///
    /// Encode every document and query of a fixture with a learned sparse (SPLADE) checkpoint, in-process,
    /// and write the sparse fixture `run --sparse-fixture` searches with: each text's vocabulary ids and
    /// weights, the model named by the digest of every file. Texts as sentence-transformers and MTEB give a
    /// SparseEncoder (`title text` stripped; the query as written), behind the prompts the checkpoint
    /// declares per role. Written atomically, only when complete.
    #[command(hide = true)]
    #[command(
        override_usage = "scifact-audit build-sparse --corpus <FIXTURE> --sparse-model-dir <DIR>\n       --out <FILE>"
    )]
    BuildSparse(BuildSparseArgs),
    /// Embed texts from stdin; print one vector per line
    ///
    /// Embed texts read from stdin, one JSON string per line; write one `{"vector": [...], "tokens": N}` per
    /// line to stdout. The way to re-check any vector of a fixture by hand.
    #[command(hide = true)]
    Embed(EmbedArgs),
    /// Validate aggregates: metrics, split, hashes
    ///
    /// Independently validate aggregates: recompute every metric, the split, the row hash and count, result
    /// agreement and statistics; check query, qrels and corpus identity against the fixture and the
    /// executable and mapping hashes when those files remain. Exits 1 and lists the failed checks on any
    /// mismatch.
    #[command(hide = true)]
    Validate(ValidateArgs),
    /// Verify the runs of an output directory
    ///
    /// Verify every aggregate in a directory: the validator, then every ranking of every query recomputed (a
    /// full scan of the fixture's vectors, this verifier's own FTS5 index of its texts, fusion from both), every
    /// receipt digest, the exactness policy, the effective configuration, every query and document re-embedded
    /// and required bit for bit (--embedding-sample N: N documents only), the live database and mapping, the
    /// selection and its statistics. Writes verification.json (and report.html, drawn from the recomputed
    /// numbers) there.
    ///
    /// Each check says what it rests on: recomputed, sampled, attested (the signer's word: git state, host,
    /// latency, times) or not checked (an input is missing). The verdict is `verified` when every number a
    /// reader sees was recomputed and every vector re-embedded, `sampled` when only some document vectors were
    /// (the chance that a forgery passes is printed), `publishable` when some numbers rest on the signer, `not
    /// publishable` short of a gate (a dirty tree), `failed` when a check failed (exit 1).
    #[command(hide = true)]
    Verify(VerifyArgs),
    /// Write TREC runs, qrels, ir_metadata and provenance
    ///
    /// Write, beside every aggregate in a directory, its TREC run file (`qid Q0 docid rank score tag`),
    /// ir_metadata (PRIMAD) YAML and SLSA provenance (an in-toto Statement), and the test qrels
    /// (`<dataset>-<split>.qrels`), for trec_eval, pytrec_eval, ranx, ir-measures and supply-chain tools. A score whose f32 rounding is not below the line before it is written as the f32 just under that, so tools that sort
    /// by score keep the library's order; `verify` and `verify-bundle` check every line against the rows.
    /// `eval` does this itself before verifying.
    #[command(hide = true)]
    Export(ExportArgs),
    /// Copy a verified run into a bundle directory
    ///
    /// Copy a verified run into a bundle directory (rows, aggregates, mapping, fixture metadata without any
    /// text, effective configuration, verification report) with an in-toto manifest.json. The bundle is made
    /// in a private staging directory and renamed into place, so it appears complete or not at all.
    #[command(hide = true)]
    Bundle(BundleArgs),
    /// Sign a bundle's manifest.json with minisign
    ///
    /// Sign a bundle's manifest.json with a minisign secret key (ours or the minisign CLI's; password from
    /// $MINISIGN_PASSWORD or a prompt), writing manifest.json.minisig. An existing signature is never replaced
    /// unless --replace-signature is given, and then it is kept beside the new one, where verify-bundle
    /// discloses it.
    #[command(hide = true)]
    Sign(SignArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct DeviceArgs {
    /// The device to look for (`auto`: an NVIDIA GPU that passes the self-check, else the CPU)
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) device: DeviceArg,
    /// Run the kernels on it and compare every value with the CPU's (exit 1 when one differs)
    #[arg(long)]
    pub(crate) check: bool,
    /// With --check, also time the linear layers' product on all-MiniLM-L6-v2's shapes (TFLOP/s)
    #[arg(long, requires = "check")]
    pub(crate) throughput: bool,
    /// With --check, only the self-check's cases (what `auto` and `cuda` run first)
    ///
    /// With --check, only the self-check's inputs (every kernel, fewer and smaller cases: what `auto` and `cuda`
    /// run before taking a GPU)
    #[arg(long, requires = "check")]
    pub(crate) self_check: bool,
    /// Print JSON instead of sentences
    #[arg(long)]
    pub(crate) json: bool,
}

/// Which embedder runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EmbedderKind {
    /// A BERT sentence-transformers checkpoint (all-MiniLM-L6-v2 unless --model-dir names another) in-process on
    /// this project's own forward pass (no server needed).
    Minilm,
    /// A local Ollama server (`OLLAMA_HOST`, default 127.0.0.1:11434).
    Ollama,
}

/// Where the forward pass runs. The GPU kernels are designed to give the CPU's bits and are checked under the
/// emulator in CI; they have not yet run on a GPU, so a GPU is used only once it passes a self-check at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DeviceArg {
    /// An NVIDIA GPU when one is usable (driver, GPU and NVRTC found at run time) and its kernels pass the
    /// self-check against the CPU, else the CPU; says which, and why, on stderr.
    Auto,
    /// The CPU.
    Cpu,
    /// An NVIDIA GPU; an error naming what is missing (driver, GPU, NVRTC, memory) when none is usable, or what
    /// differed when its self-check fails.
    Cuda,
    /// The GPU kernels run on the CPU under a launch emulator: slow; checks the kernels' source against the
    /// CPU where there is no GPU.
    Emulated,
}

impl DeviceArg {
    pub(crate) fn request(self) -> embedding::DeviceRequest {
        match self {
            DeviceArg::Auto => embedding::DeviceRequest::Auto,
            DeviceArg::Cpu => embedding::DeviceRequest::Cpu,
            DeviceArg::Cuda => embedding::DeviceRequest::Cuda,
            DeviceArg::Emulated => embedding::DeviceRequest::Emulated,
        }
    }
}

/// The role whose prefix is added before embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RoleArg {
    /// Prefix `search_document: `.
    Document,
    /// Prefix `search_query: `.
    Query,
}

/// Which corpus to work on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CorpusArg {
    /// BEIR SciFact: 5,183 documents, 300 test queries (the archive from --archive, $SCIFACT_ARCHIVE or BEIR).
    Scifact,
    /// The tiny stand-in committed under fixtures/tiny/ (300 made-up documents, 200 queries, a miniature BERT):
    /// the whole pipeline offline in seconds, to see that a build works. Run from the source checkout.
    Tiny,
}

/// How a writing command shares its directories: one process at a time, the second told who holds them.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LockArgs {
    /// Wait for another process writing the same directory, instead of exiting
    ///
    /// When another scifact-audit process is writing the same directory, wait for it to finish instead of
    /// exiting (exit 2, naming the process that holds it)
    #[arg(long)]
    pub(crate) wait: bool,
}

/// Which model embeds, shared by `embed` and `build`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ModelArgs {
    /// A checkpoint: BERT, XLM-R, MPNet, NomicBert, ModernBERT, Qwen3 [default: all-MiniLM-L6-v2]
    ///
    /// A BERT sentence-transformers checkpoint: model.safetensors, tokenizer.json and config.json, and what
    /// else it declares (modules.json, 1_Pooling/config.json, sentence_bert_config.json,
    /// config_sentence_transformers.json). Whatever it holds runs, its digests recorded; all-MiniLM-L6-v2's
    /// weights are held to that model's published files [default: $SCIFACT_MODEL_DIR (all-MiniLM-L6-v2), else
    /// the user cache, else a download of the pinned files into it]
    #[arg(long, value_name = "DIR")]
    pub(crate) model_dir: Option<PathBuf>,
    /// Which embedder to use
    #[arg(long, value_enum, default_value = "minilm")]
    pub(crate) embedder: EmbedderKind,
    /// A known checkpoint by name (configs/models.json), held to its published digests
    ///
    /// A known checkpoint by name (configs/models.json: all-MiniLM-L6-v2, the default, and the others it lists),
    /// held to the published digest of every file that shapes its vectors (with --model-dir, the directory must
    /// hold exactly it), or with --embedder ollama the Ollama model (then all-minilm:latest by default). Without
    /// --model, a --model-dir checkpoint is named by the registry when its digests are an entry's, else by its
    /// weights' digest
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Option<String>,
    /// Accept the weights of this sha256 (hex) under a name of their own
    ///
    /// Accept a BERT checkpoint with this weights sha256 (hex) instead of all-MiniLM-L6-v2's published one
    #[arg(long, value_name = "HEX")]
    pub(crate) weights_sha256: Option<String>,
    /// Texts the model runs at once on the CPU (speed and memory, never bits)
    ///
    /// Texts run through the model together on the CPU (the vectors do not depend on it; speed and memory do).
    /// A GPU sizes its batches from its free memory
    #[arg(long, default_value_t = 64)]
    pub(crate) batch_size: usize,
    /// Where the model runs [auto: a GPU that passes the self-check, else the CPU]
    ///
    /// Where the model runs: `auto` (an NVIDIA GPU that passes the self-check, else the CPU), `cpu`, `cuda`, or
    /// `emulated` (the GPU kernels on the CPU, slowly)
    ///
    /// The GPU kernels are designed to give the CPU's bits and checked under the emulator in CI; they have not yet
    /// run on a GPU, hence the self-check
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) device: DeviceArg,
}

#[derive(Debug, clap::Args)]
pub(crate) struct EmbedArgs {
    #[command(flatten)]
    pub(crate) model_args: ModelArgs,
    /// Embed each text in this role; without it each text is embedded exactly as given
    #[arg(long, value_enum)]
    pub(crate) role: Option<RoleArg>,
    /// The prefix before each text in its role: the checkpoint's prompts or the contract's
    ///
    /// What goes before a text in its role: `model`, the prompt the checkpoint declares for the role
    /// (config_sentence_transformers.json), its tokens left out of the pooling when the checkpoint says so, as
    /// sentence-transformers' `encode(prompt_name=...)` does; `contract`, the evaluation contract's prefix
    /// (`search_document: `, `search_query: `); `auto` (the default), the checkpoint's own for a
    /// sentence-transformers checkpoint other than all-MiniLM-L6-v2, the contract's otherwise
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) text_policy: TextPolicyArg,
}

/// A sparse checkpoint's name the published-rows registry lists.
fn sparse_model_name(name: &str) -> Result<String, String> {
    let known = scifact_eval::published::sparse_model_names()?;
    if known.iter().any(|k| k == name) {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "no published row names the sparse checkpoint {name:?}; the registry's are {}",
            known.join(", ")
        ))
    }
}

/// The evaluation's lexical scorer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LexicalArg {
    /// Anserini's BM25 flat.
    Bm25Flat,
    /// SQLite FTS5's BM25.
    Fts5,
}

impl LexicalArg {
    /// The runner's name for it.
    pub(crate) fn lexical(self) -> scifact_eval::baseline::Lexical {
        match self {
            LexicalArg::Bm25Flat => scifact_eval::baseline::Lexical::Bm25Flat,
            LexicalArg::Fts5 => scifact_eval::baseline::Lexical::Fts5,
        }
    }
}

/// How the evaluation's learned sparse list is scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SparseScoringArg {
    /// The exact f32 dot product, ties by fact id.
    Exact,
    /// Anserini's impact scoring, ties by BEIR document id.
    AnseriniImpact,
}

impl SparseScoringArg {
    /// The runner's name for it.
    pub(crate) fn sparse(self) -> scifact_eval::baseline::Sparse {
        match self {
            SparseScoringArg::Exact => scifact_eval::baseline::Sparse::Exact,
            SparseScoringArg::AnseriniImpact => scifact_eval::baseline::Sparse::AnseriniImpact,
        }
    }
}

/// Where a role's prompt comes from, and how a document's text is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TextPolicyArg {
    /// The checkpoint's own when `--model-dir` is a sentence-transformers checkpoint (it has modules.json)
    /// other than all-MiniLM-L6-v2; the evaluation contract's otherwise (all-MiniLM-L6-v2, for which the
    /// contract was made; a bare BERT directory, which declares no policy; Ollama).
    Auto,
    /// The evaluation contract's: title and text joined by `. ` and cut to 700 characters, behind
    /// `search_document: ` / `search_query: `.
    Contract,
    /// The checkpoint's: title and text joined by a space and stripped, as sentence-transformers and MTEB build
    /// them, never cut (the model truncates), behind the prompts the checkpoint declares.
    Model,
}

impl TextPolicyArg {
    /// The policy this flag gives with `embedder`; `auto` says which it chose, and why, on stderr.
    pub(crate) fn kind(self, embedder: &dyn embedding::Embedder) -> scifact_eval::TextPolicyKind {
        match self {
            TextPolicyArg::Contract => scifact_eval::TextPolicyKind::Contract,
            TextPolicyArg::Model => scifact_eval::TextPolicyKind::Model,
            TextPolicyArg::Auto if embedder.has_own_text_policy() => {
                crate::progress::say(
                    "text policy: the checkpoint's own (its prompts, its window; a sentence-transformers checkpoint \
                     other than all-MiniLM-L6-v2). --text-policy contract gives the evaluation contract's",
                );
                scifact_eval::TextPolicyKind::Model
            }
            TextPolicyArg::Auto => scifact_eval::TextPolicyKind::Contract,
        }
    }
}

/// Which fixture layout a build writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FixtureFormatArg {
    /// v1 up to 100,000 documents, v2 above.
    Auto,
    /// One JSON document.
    V1,
    /// JSON beside document lines and binary vectors.
    V2,
}

impl FixtureFormatArg {
    pub(crate) fn format(self) -> scifact_eval::FixtureFormat {
        match self {
            FixtureFormatArg::Auto => scifact_eval::FixtureFormat::Auto,
            FixtureFormatArg::V1 => scifact_eval::FixtureFormat::V1,
            FixtureFormatArg::V2 => scifact_eval::FixtureFormat::V2,
        }
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct BuildArgs {
    /// Directory for the resumable embedding cache (and a downloaded archive)
    #[arg(long, value_name = "DIR")]
    pub(crate) work_dir: PathBuf,
    /// The fixture file to write (atomically; only a complete fixture is ever written). Not with --shard
    #[arg(long, value_name = "FIXTURE", required_unless_present = "shard", conflicts_with = "shard")]
    pub(crate) out: Option<PathBuf>,
    /// The BEIR SciFact zip [default: $SCIFACT_ARCHIVE, else a download from BEIR]
    #[arg(long, value_name = "ZIP", help_heading = "Dataset")]
    pub(crate) archive: Option<PathBuf>,
    /// Admit an archive whose md5 is not BEIR's, if its sha256 is this
    ///
    /// Admit a downloaded archive whose md5 differs from BEIR's published one, if its sha256 is this
    #[arg(long, value_name = "sha256:HEX", help_heading = "Dataset")]
    pub(crate) accept_archive_digest: Option<String>,
    /// Which corpus
    #[arg(long, value_enum, default_value = "scifact", help_heading = "Dataset")]
    pub(crate) profile: CorpusArg,
    #[command(flatten, next_help_heading = "Dataset")]
    pub(crate) dataset: DatasetArgs,
    /// How texts are built and prompted: the checkpoint's way or the contract's
    ///
    /// How texts are built and prompted: `model` (the checkpoint's own prompts, the text as
    /// sentence-transformers and MTEB build it), `contract` (the evaluation contract's), or `auto` (the
    /// default): the checkpoint's own when --model-dir is a sentence-transformers checkpoint other than
    /// all-MiniLM-L6-v2, the contract's otherwise
    #[arg(long, value_enum, default_value = "auto", help_heading = "Model")]
    pub(crate) text_policy: TextPolicyArg,
    #[command(flatten, next_help_heading = "Model")]
    pub(crate) model_args: ModelArgs,
    /// Embed only slice I of N of the texts, into its own cache; no fixture
    ///
    /// Embed only slice I of N (from 0) of the texts, into its own resumable cache under <work-dir>/shards/, and
    /// write no fixture
    ///
    /// `auto` takes I and N from a Slurm job array (SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT); `auto/N` takes I
    /// from Slurm or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX). Once every shard is done, the same command
    /// without --shard (and with --out) reads their vectors and writes the fixture an unsharded build writes, byte
    /// for byte
    #[arg(long, value_name = "I/N|auto|auto/N", help_heading = "Scale")]
    pub(crate) shard: Option<String>,
    /// The fixture's layout: `auto` (v1 up to 100,000 documents, v2 above), `v1` or `v2`
    ///
    /// `v1` is one JSON document; `v2` a JSON file beside the documents as JSON lines and the vectors as binary
    /// f32, streamed, for corpora one document cannot hold
    #[arg(long, value_enum, default_value = "auto", help_heading = "Scale")]
    pub(crate) fixture_format: FixtureFormatArg,
    #[command(flatten, next_help_heading = "Locking")]
    pub(crate) lock: LockArgs,
}

/// `bm25-flat`'s flags.
#[derive(Debug, Clone, Args)]
pub(crate) struct Bm25FlatArgs {
    /// The TREC run to write (atomically)
    #[arg(long, value_name = "RUN")]
    pub(crate) out: PathBuf,
    /// Hits per query before the query's own document is dropped (Anserini's -hits)
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) hits: u32,
    /// The run's tag, its last column (`Anserini` makes the file Anserini's byte for byte)
    #[arg(long, value_name = "TAG", default_value = "scifact-audit-bm25-flat", value_parser = run_tag)]
    pub(crate) run_tag: String,
    /// Where a downloaded archive is kept [default: the run's directory]
    #[arg(long, value_name = "DIR")]
    pub(crate) work_dir: Option<PathBuf>,
    /// The dataset's zip [default: SciFact's $SCIFACT_ARCHIVE, else a download from BEIR]
    #[arg(long, value_name = "ZIP", help_heading = "Dataset")]
    pub(crate) archive: Option<PathBuf>,
    /// Admit an archive whose md5 is not BEIR's, if its sha256 is this
    ///
    /// Admit a downloaded archive whose md5 differs from BEIR's published one, if its sha256 is this
    #[arg(long, value_name = "sha256:HEX", help_heading = "Dataset")]
    pub(crate) accept_archive_digest: Option<String>,
    /// Which corpus
    #[arg(long, value_enum, default_value = "scifact", help_heading = "Dataset")]
    pub(crate) profile: CorpusArg,
    #[command(flatten, next_help_heading = "Dataset")]
    pub(crate) dataset: DatasetArgs,
}

/// A TREC run tag: one field, so no whitespace, and printable.
fn run_tag(tag: &str) -> Result<String, String> {
    if tag.is_empty() || tag.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a run tag is one non-empty field: no whitespace or control characters".into());
    }
    Ok(tag.to_owned())
}

/// Which BEIR dataset, when it is not SciFact.
#[derive(Debug, Clone, Args)]
pub(crate) struct DatasetArgs {
    /// Another BEIR dataset of the registry (`scifact-audit datasets`)
    ///
    /// Another BEIR dataset of the registry (`scifact-audit datasets`): downloaded from BEIR and checked against
    /// its md5, or given with --archive
    ///
    /// Its counts are the shape gate, its split is scored and its published rows are set beside the runs
    #[arg(long, value_name = "NAME", conflicts_with = "dataset_archive")]
    pub(crate) dataset: Option<String>,
    /// Any zip (or directory) in BEIR's layout, evaluated as an unregistered dataset
    ///
    /// Any zip in BEIR's layout (NAME/corpus.jsonl, NAME/queries.jsonl, NAME/qrels/<split>.tsv; forums as
    /// NAME/<forum>/…), or a dataset directory (NAME/ holding those files): its folder is its name, its digests
    /// and shape are recorded, and the fixture and bundle say it is no registered dataset (no md5 of BEIR's
    /// vouches for it, no published row is its)
    #[arg(long, value_name = "ZIP|DIR")]
    pub(crate) dataset_archive: Option<PathBuf>,
    /// The qrels split of a --dataset-archive to score: test, dev or train
    #[arg(long, value_name = "SPLIT", requires = "dataset_archive")]
    pub(crate) qrels_split: Option<String>,
    /// Download a --dataset's zip from URL/<name>.zip instead of BEIR's server
    ///
    /// It must still have BEIR's md5 (or the digest --accept-archive-digest names), and the fixture records BEIR's
    /// URL
    #[arg(long, value_name = "URL", requires = "dataset")]
    pub(crate) beir_mirror: Option<String>,
}

/// A retrieval mode, or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ModeArg {
    /// Lexical only: FTS5 BM25.
    #[value(name = "fts_only")]
    FtsOnly,
    /// Vector only: exact inner-product search (PreferExact).
    #[value(name = "vector_only")]
    VectorOnly,
    /// Reciprocal rank fusion of both, with component evidence.
    #[value(name = "hybrid")]
    Hybrid,
    /// Learned sparse only: the exact inverted index over the sparse fixture's vectors (--sparse-fixture).
    #[value(name = "sparse_only")]
    SparseOnly,
    /// fts_only, vector_only and hybrid, in that order.
    #[value(name = "all")]
    All,
}

/// A query split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SplitArg {
    /// The first 100 query ids by (sha256(id), id): for diagnosis and configuration choice.
    Calibration,
    /// The other 200: run once the configuration is frozen.
    Heldout,
    /// All 300: only after held-out aggregates of the same fixture and configuration exist.
    All,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The fixture written by `scifact-audit build`
    #[arg(long, value_name = "FIXTURE")]
    pub(crate) corpus: PathBuf,
    /// Directory of the persisted store and its BEIR-id mapping (built, or resumed after an interruption)
    #[arg(long, value_name = "DIR")]
    pub(crate) store_dir: PathBuf,
    /// Directory for rows and aggregates (existing ones are never overwritten)
    #[arg(long, value_name = "DIR")]
    pub(crate) output_dir: PathBuf,
    /// Which queries to run
    #[arg(long, value_enum)]
    pub(crate) split: SplitArg,
    /// Which retrieval mode(s) to run
    #[arg(long, value_enum)]
    pub(crate) mode: ModeArg,
    /// The lexical scorer: `bm25-flat` (Anserini's BM25 flat) or `fts5` (SQLite FTS5's)
    ///
    /// The lexical scorer of fts_only and of hybrid's lexical half, as `eval --lexical`: `bm25-flat` (Anserini's
    /// BM25 flat) or `fts5` (SQLite FTS5's BM25)
    #[arg(long, value_enum, default_value = "bm25-flat")]
    pub(crate) lexical: LexicalArg,
    /// The sparse fixture of this fixture (`build-sparse`), for sparse_only and --sparse-weight
    ///
    /// The sparse fixture `build-sparse` wrote from this very fixture: its document vectors go into the store
    /// before any search (bound by the store's digest), its query vectors are what sparse_only and a hybrid
    /// with --sparse-weight search with
    #[arg(long, value_name = "FILE")]
    pub(crate) sparse_fixture: Option<PathBuf>,
    /// The sparse list's weight in hybrid's fusion (0: two lists, the baseline)
    #[arg(long, value_name = "W", default_value_t = 0.0, requires = "sparse_fixture")]
    pub(crate) sparse_weight: f64,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct BuildSparseArgs {
    /// The fixture whose texts are encoded (written by `build`)
    #[arg(long, value_name = "FIXTURE")]
    pub(crate) corpus: PathBuf,
    /// The learned sparse checkpoint
    ///
    /// The learned sparse checkpoint: sentence-transformers' SparseEncoder (5 or 6), an inference-free Router,
    /// or a bare BertForMaskedLM directory (naver's SPLADE), with safetensors weights
    #[arg(long, value_name = "DIR")]
    pub(crate) sparse_model_dir: PathBuf,
    /// The sparse fixture to write (never over an existing file)
    #[arg(long, value_name = "FILE")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct EvalArgs {
    /// Directory for everything: fixture, embedding cache, runs (store + results) and bundles
    #[arg(long, value_name = "DIR")]
    pub(crate) work_dir: PathBuf,
    /// The BEIR SciFact zip [default: $SCIFACT_ARCHIVE, else a download from BEIR]
    #[arg(long, value_name = "ZIP")]
    pub(crate) archive: Option<PathBuf>,
    /// Admit an archive whose md5 is not BEIR's, if its sha256 is this
    ///
    /// Admit a downloaded archive whose md5 differs from BEIR's published one, if its sha256 is this
    #[arg(long, value_name = "sha256:HEX")]
    pub(crate) accept_archive_digest: Option<String>,
    /// Run as a suite, each dataset's zip DIR/NAME.zip
    ///
    /// Run as a suite (as --dataset a,b,c and a dataset of forums are; one dataset with it is a suite of one),
    /// each dataset's zip DIR/NAME.zip (cqadupstack.zip for its forums); one without is downloaded from BEIR, once
    #[arg(long, value_name = "DIR")]
    pub(crate) archive_dir: Option<PathBuf>,
    /// Sign the pre-registration and the bundle with this minisign secret key
    ///
    /// Sign the pre-registration (at once, before any calibration query) and the bundle with this minisign
    /// secret key (its password from --password-file, $MINISIGN_PASSWORD, or asked on the terminal without echo)
    #[arg(long, value_name = "FILE")]
    pub(crate) secret_key: Option<PathBuf>,
    /// The secret key's password, the first line of this file (for scripts)
    #[arg(long, value_name = "FILE", requires = "secret_key")]
    pub(crate) password_file: Option<PathBuf>,
    /// The search space to pre-register and select from on calibration
    ///
    /// The search space to pre-register and select from on calibration (schema scifact-audit-search-space-v1:
    /// named trials, each the SearchConfig fields it sets over the baseline, the baseline first)
    /// [default: the built-in configs/search-space.json, 32 trials]
    #[arg(long, value_name = "FILE")]
    pub(crate) search_space: Option<PathBuf>,
    /// The lexical scorer: `bm25-flat` (Anserini's) or `fts5` (FTS5's)
    ///
    /// The lexical scorer of the `fts_only` runs and of the hybrid's lexical half: `bm25-flat` (Anserini's BM25
    /// flat, Lucene's BM25 at k1 0.9 and b 0.4: the lexical baseline BEIR papers cite, beside its published
    /// rows) or `fts5` (SQLite FTS5's BM25, k1 1.2 and b 0.75: the scorer of claims up to v6)
    #[arg(long, value_enum, default_value = "bm25-flat", hide_possible_values = true)]
    pub(crate) lexical: LexicalArg,
    /// Which corpus: `scifact`, or `tiny` (the committed stand-in, in seconds)
    ///
    /// Which corpus: `scifact`, or `tiny`, which runs the whole evaluation on the committed stand-in in seconds,
    /// offline (from the source checkout), to see that this build works before the real one
    #[arg(long, value_enum, default_value = "scifact", hide_possible_values = true)]
    pub(crate) profile: CorpusArg,
    #[command(flatten)]
    pub(crate) dataset: DatasetArgs,
    /// How texts are built: `model` (the checkpoint's way), `contract` or `auto`
    ///
    /// How texts are built and prompted: `model` (the checkpoint's own prompts, the text as
    /// sentence-transformers and MTEB build it: what published MTEB rows were computed with), `contract` (the
    /// evaluation contract's), or `auto` (the default): the checkpoint's own when --model-dir is a
    /// sentence-transformers checkpoint other than all-MiniLM-L6-v2, the contract's otherwise. Part of the
    /// fixture's identity and every bundle
    #[arg(long, value_enum, default_value = "auto", hide_possible_values = true)]
    pub(crate) text_policy: TextPolicyArg,
    /// The fixture's layout: `auto` (v2 above 100,000 documents), `v1` or `v2`
    ///
    /// `auto` writes v1 up to 100,000 documents and v2 above. `v1` is one JSON document; `v2` a JSON file beside
    /// the documents as JSON lines and the vectors as binary f32, streamed, for corpora one document cannot hold
    #[arg(long, value_enum, default_value = "auto", hide_possible_values = true)]
    pub(crate) fixture_format: FixtureFormatArg,
    /// Document vectors the verify stage re-embeds (every query always), or `all`
    ///
    /// This is the signer's own check, so a sample is the default: it is stated as one (verdict `sampled`, with the
    /// chance a forgery passes) and never stands in for a reader's `verify-bundle`, which re-embeds every vector
    #[arg(long, value_name = "N|all", default_value = "64", value_parser = parse_sample)]
    pub(crate) embedding_sample: receipt_verify::Sample,
    /// Add learned sparse (SPLADE) runs with this checkpoint
    ///
    /// Add learned sparse retrieval: every text encoded with this SPLADE checkpoint (a SparseEncoder, a Router, or a
    /// bare BertForMaskedLM with safetensors weights) into the sparse fixture, pre-registered with the fixture;
    /// sparse_only runs on calibration and held-out beside the other modes; trials may set sparse_weight (a third
    /// fused list). The bundle carries every sparse vector and the model's identity (claim v9)
    #[arg(long, value_name = "DIR")]
    pub(crate) sparse_model_dir: Option<PathBuf>,
    /// How sparse_only scores: `exact` (default) or `anserini-impact` (the SPLADE rows')
    ///
    /// How the frozen baseline scores the learned sparse list (sparse_only, and every trial's sparse list):
    /// `exact`, the f32 dot product, ties by fact id; or `anserini-impact`, as Anserini's -impact indexes scored
    /// the published SPLADE rows: each weight quantized to round(w / 5 * 256), integer dot products, ties by
    /// BEIR document id
    #[arg(
        long,
        value_enum,
        value_name = "SCORING",
        default_value = "exact",
        hide_default_value = true,
        hide_possible_values = true,
        requires = "sparse_model_dir"
    )]
    pub(crate) sparse_scoring: SparseScoringArg,
    /// The sparse checkpoint's name in your word, to be compared with its published rows
    ///
    /// The sparse checkpoint's name, one the published-rows registry lists (naver/splade-cocondenser-ensembledistil,
    /// naver/splade-v3): recorded in the sparse fixture as the signer's word, for published.json to set the run
    /// beside that checkpoint's published rows. No digest pins those checkpoints, so the name claims nothing
    /// about the bytes; the vectors are re-encoded from whatever checkpoint a reader passes
    #[arg(long, value_name = "NAME", requires = "sparse_model_dir", value_parser = sparse_model_name)]
    pub(crate) sparse_model_name: Option<String>,
    #[command(flatten)]
    pub(crate) model_args: ModelArgs,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ValidateArgs {
    /// Aggregate files (<dataset>-<mode>-<split>.aggregate.json)
    #[arg(required = true, value_name = "AGGREGATE")]
    pub(crate) aggregates: Vec<PathBuf>,
    /// The fixture, when it is not at the path the aggregates record
    #[arg(long, value_name = "FIXTURE")]
    pub(crate) corpus: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) output: ReportArgs,
}

/// How a report is printed.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// Print the report as JSON instead of the summary
    ///
    /// Print the report as JSON (verdict and every check, with its scope, name, status and evidence)
    /// instead of the summary
    #[arg(long)]
    pub(crate) json: bool,
}

/// How embeddings are re-checked.
#[derive(Debug, clap::Args)]
pub(crate) struct EmbeddingArgs {
    /// Re-embed only N documents, drawn at random, instead of all of them (every query is re-embedded always)
    ///
    /// For a quick look, or a corpus too large to re-embed here: the verdict is then `sampled`, never `verified`,
    /// and states the chance that forged vectors pass such a sample
    #[arg(long, value_name = "N|all", default_value = "all", value_parser = parse_sample)]
    pub(crate) embedding_sample: receipt_verify::Sample,
    /// Draw the sample with this seed instead of fresh randomness (to replay a draw someone printed)
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,
    /// Where the model re-embeds [auto: a GPU that passes the self-check, else the CPU]
    ///
    /// Where the model re-embeds: `auto` (an NVIDIA GPU that passes the self-check, else the CPU), `cpu`, `cuda`
    /// or `emulated`
    ///
    /// Each re-embedded vector must equal the bundle's bit for bit wherever it is computed. The GPU kernels are
    /// designed to give the CPU's bits and checked under the emulator in CI, but have not yet run on a GPU: a
    /// GPU is used only once it passes its self-check, and `--device cpu` is the reference
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) device: DeviceArg,
    /// Keep the vectors re-embedded here in DIR, and take those this executable re-embedded there before
    ///
    /// For verifying several bundles of one corpus and model (a series of attestations, a suite): each text
    /// is embedded once. Only this verifier's own computations are kept, in a file per executable, model, text
    /// policy and device; the bundle's vectors are still compared with them bit for bit, and the evidence says
    /// how many came from the memo. DIR is yours, as the executable is: whoever can write it can forge a verdict
    #[arg(long, value_name = "DIR")]
    pub(crate) embedding_memo: Option<PathBuf>,
}

fn parse_sample(text: &str) -> Result<receipt_verify::Sample, String> {
    receipt_verify::Sample::parse(text)
}

#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// Directory holding the rows and aggregates
    #[arg(long, value_name = "DIR")]
    pub(crate) output_dir: PathBuf,
    /// The store directory, when it moved
    #[arg(long, value_name = "DIR")]
    pub(crate) store_dir: Option<PathBuf>,
    /// The fixture, when it moved
    #[arg(long, value_name = "FIXTURE")]
    pub(crate) corpus: Option<PathBuf>,
    /// The sparse fixture, when it moved (runs with sparse vectors record where they read it)
    #[arg(long, value_name = "FILE")]
    pub(crate) sparse_fixture: Option<PathBuf>,
    /// The sparse checkpoint, to encode every text again and require the sparse fixture's vectors to the bit
    #[arg(long, value_name = "DIR")]
    pub(crate) sparse_model_dir: Option<PathBuf>,
    /// The model directory for the embedding re-check [default: $SCIFACT_MODEL_DIR, else the user cache]
    #[arg(long, value_name = "DIR")]
    pub(crate) model_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) embedding: EmbeddingArgs,
    #[command(flatten)]
    pub(crate) output: ReportArgs,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct DatasetsArgs {
    /// Print the registry itself (`scifact-audit-beir-datasets-v1`) instead of the table
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct KeygenArgs {
    /// Where to write the secret key (never overwritten)
    #[arg(long, value_name = "FILE")]
    pub(crate) secret_key: PathBuf,
    /// Where to write the public key (never overwritten; readable by everyone: it is meant to be published)
    #[arg(long, value_name = "FILE")]
    pub(crate) public_key: PathBuf,
    /// Store the secret key unencrypted
    #[arg(long, conflicts_with = "password_file")]
    pub(crate) without_password: bool,
    /// The new key's password, the first line of this file (for scripts)
    ///
    /// The new key's password, the first line of this file (for scripts; without it the password is asked
    /// twice on the terminal, without echo, or read as two lines of stdin when stdin is not a terminal)
    #[arg(long, value_name = "FILE")]
    pub(crate) password_file: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct BundleArgs {
    /// Directory holding the verified rows, aggregates and verification.json
    #[arg(long, value_name = "DIR")]
    pub(crate) output_dir: PathBuf,
    /// The bundle directory to create (must be absent or empty)
    #[arg(long, value_name = "DIR")]
    pub(crate) bundle_dir: PathBuf,
    /// The store directory, when it moved
    #[arg(long, value_name = "DIR")]
    pub(crate) store_dir: Option<PathBuf>,
    /// The fixture, when it moved
    #[arg(long, value_name = "FIXTURE")]
    pub(crate) corpus: Option<PathBuf>,
    /// The sparse fixture the runs searched with, when it moved (carried as sparse-fixture.json: claim v9)
    #[arg(long, value_name = "FILE")]
    pub(crate) sparse_fixture: Option<PathBuf>,
    /// Carry a comparison with an earlier attestation (`compare --carried`); repeatable
    ///
    /// Carry a comparison with an earlier attestation (the --out directory of `compare --carried` on this
    /// evaluation's bundle), so that the release says "identical to" or "better than" a named earlier claim;
    /// repeatable
    #[arg(long, value_name = "DIR")]
    pub(crate) comparison: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// Directory holding the finished rows and aggregates
    #[arg(long, value_name = "DIR")]
    pub(crate) output_dir: PathBuf,
    /// The fixture the runs read (for the qrels)
    #[arg(long, value_name = "FIXTURE")]
    pub(crate) corpus: PathBuf,
    /// The model directory the fixture was embedded with (its config.json digest goes into the provenance)
    #[arg(long, value_name = "DIR")]
    pub(crate) model_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct SignArgs {
    /// The bundle directory
    #[arg(long, value_name = "DIR")]
    pub(crate) bundle_dir: PathBuf,
    /// A minisign secret key file
    #[arg(long, value_name = "FILE")]
    pub(crate) secret_key: PathBuf,
    /// The secret key's password, the first line of this file (else $MINISIGN_PASSWORD, else asked on the
    /// terminal without echo)
    #[arg(long, value_name = "FILE")]
    pub(crate) password_file: Option<PathBuf>,
    /// Replace an existing signature (the old one is kept beside it, and disclosed)
    ///
    /// Replace an existing signature; the old one is kept beside it as manifest.json.minisig.replaced-<unix
    /// time>, and verify-bundle discloses it
    #[arg(long)]
    pub(crate) replace_signature: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ReproduceArgs {
    /// The bundle to reproduce
    #[arg(long, value_name = "DIR")]
    pub(crate) bundle_dir: PathBuf,
    /// The bundle signer's minisign public key
    #[arg(long, value_name = "FILE")]
    pub(crate) public_key: PathBuf,
    /// Where the fixture, store, reproduced runs and reproduction.json go (a rerun resumes)
    #[arg(long, value_name = "DIR")]
    pub(crate) work_dir: PathBuf,
    /// The BEIR SciFact archive [default: $SCIFACT_ARCHIVE, else a pinned download]
    #[arg(long, value_name = "ZIP")]
    pub(crate) archive: Option<PathBuf>,
    /// The reproducer's minisign secret key, to sign reproduction.json
    #[arg(long, value_name = "FILE")]
    pub(crate) secret_key: Option<PathBuf>,
    /// The learned sparse checkpoint of a bundle with sparse runs (claim v9)
    ///
    /// The learned sparse checkpoint of a bundle with sparse runs (claim v9): every text is encoded again into a
    /// sparse fixture, which must be the bundle's to the byte, and the sparse runs are re-executed from it
    #[arg(long, value_name = "DIR")]
    pub(crate) sparse_model_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) model_args: ModelArgs,
    #[command(flatten)]
    pub(crate) lock: LockArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// The bundle compared against (the earlier version), or a suite directory
    ///
    /// The bundle compared against (the earlier version), or a suite directory (`eval`'s `<work-dir>/suite`):
    /// then every dataset both suites hold is compared, each into OUT/<name>/, and OUT/suite-comparison.json
    /// gives the verdict per dataset and overall
    #[arg(long, value_name = "DIR")]
    pub(crate) baseline: PathBuf,
    /// The bundle under question (the new version), or a suite directory
    #[arg(long, value_name = "DIR")]
    pub(crate) candidate: PathBuf,
    /// The baseline signer's minisign public key (the candidate's too, unless --candidate-public-key)
    #[arg(long, value_name = "FILE")]
    pub(crate) public_key: PathBuf,
    /// The candidate signer's public key, when another key signed it
    #[arg(long, value_name = "FILE")]
    pub(crate) candidate_public_key: Option<PathBuf>,
    /// The non-inferiority margin on nDCG@10
    ///
    /// The default, 0.01, is two of 200 held-out queries losing their only relevant document from rank 1 to below
    /// rank 10 (each costs 0.005): a quarter of the smallest improvement the selection reported significant
    /// (+0.033), well inside a held-out mean's 95% half-width (about 0.05)
    #[arg(long, value_name = "M", default_value_t = scifact_eval::comparison::DEFAULT_MARGIN)]
    pub(crate) margin: f64,
    /// Compare the candidate's runs rather than its manifest, for `bundle --comparison`
    ///
    /// Make the comparison about the candidate's runs rather than its manifest, so that a bundle of the same
    /// evaluation can carry it (`bundle --comparison`)
    #[arg(long)]
    pub(crate) carried: bool,
    /// How runs are paired: `role` (mode, split and configuration role) or `mode` (mode and split alone)
    #[arg(long = "match", value_name = "role|mode", default_value = "role", value_parser = ["role", "mode"])]
    pub(crate) matching: String,
    /// Sign comparison.json with this minisign secret key (password from $MINISIGN_PASSWORD or a prompt)
    #[arg(long, value_name = "FILE")]
    pub(crate) secret_key: Option<PathBuf>,
    /// Where comparison.json and compare.html go
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// The public SciFact zip, so that both bundles' lexical rankings are recomputed before comparing
    #[arg(long, value_name = "ZIP")]
    pub(crate) archive: Option<PathBuf>,
    /// For two suites: a directory of the public archives; each bundle's is the zip whose sha256 it records
    #[arg(long, value_name = "DIR")]
    pub(crate) archive_dir: Option<PathBuf>,
    /// The model directory, so that both bundles' vectors are re-embedded in part before comparing
    #[arg(long, value_name = "DIR")]
    pub(crate) model_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) embedding: EmbeddingArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct VerifyComparisonArgs {
    /// The baseline bundle the statement names (the baseline suite, for a suite-comparison.json)
    #[arg(long, value_name = "DIR")]
    pub(crate) baseline: PathBuf,
    /// The candidate bundle the statement names (the candidate suite, for a suite-comparison.json)
    #[arg(long, value_name = "DIR")]
    pub(crate) candidate: PathBuf,
    /// The comparison statement (its signature is read from FILE.minisig, compare.html from beside it)
    ///
    /// A suite-comparison.json is checked against the two suites: every dataset's comparison.json beside it is
    /// verified, and the overall verdict re-derived
    #[arg(long, value_name = "FILE")]
    pub(crate) statement: PathBuf,
    /// The comparer's minisign public key
    #[arg(long, value_name = "FILE")]
    pub(crate) public_key: PathBuf,
    #[command(flatten)]
    pub(crate) output: ReportArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct VerifyReproductionArgs {
    /// The bundle the statement is about
    #[arg(long, value_name = "DIR")]
    pub(crate) bundle_dir: PathBuf,
    /// The reproduction statement (its signature is read from FILE.minisig)
    #[arg(long, value_name = "FILE")]
    pub(crate) statement: PathBuf,
    /// The reproducer's minisign public key
    #[arg(long, value_name = "FILE")]
    pub(crate) public_key: PathBuf,
    #[command(flatten)]
    pub(crate) output: ReportArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct VerifyBundleArgs {
    /// The bundle directory
    #[arg(long, value_name = "DIR")]
    pub(crate) bundle_dir: PathBuf,
    /// The signer's minisign public key file
    #[arg(long, alias = "pubkey", value_name = "FILE")]
    pub(crate) public_key: PathBuf,
    /// An executable to hash against the recorded digest (else it is the signer's word)
    ///
    /// An executable to hash against the recorded digest, such as `scripts/reproducible-build.sh`'s output at
    /// the recorded revision (without it, the recorded digest is attested: the signer's word)
    #[arg(long, value_name = "FILE")]
    pub(crate) executable: Option<PathBuf>,
    /// The public archive the bundle records: every lexical list recomputed from it
    ///
    /// The public BEIR SciFact zip (its sha256 must be the one the bundle records): this verifier builds its own
    /// FTS5 index from it and recomputes every lexical score and candidate list
    #[arg(long, value_name = "ZIP")]
    pub(crate) archive: Option<PathBuf>,
    /// The model directory the bundle records: every text re-embedded, bit for bit
    ///
    /// The model directory (the checkpoint the bundle records): re-embeds every text of the archive (or
    /// --embedding-sample N documents and every query) and requires the bundle's vectors bit for bit
    #[arg(long, value_name = "DIR")]
    pub(crate) model_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) embedding: EmbeddingArgs,
    /// Re-embed only slice I of N of the bundle's texts, into --shard-out; no verdict
    ///
    /// Re-embed only slice I of N (from 0) of the bundle's texts (documents, then queries) and write what it
    /// found to --shard-out, bound to this bundle, this executable and the model; no verdict. `auto` and
    /// `auto/N` read I (and N) from a Slurm job array or a Kubernetes Indexed Job, as `build --shard` does
    #[arg(long, value_name = "I/N|auto|auto/N", requires = "shard_out", conflicts_with = "embedding_shards")]
    pub(crate) embedding_shard: Option<String>,
    /// Where --embedding-shard writes its result (JSON, atomically)
    #[arg(long, value_name = "FILE", requires = "embedding_shard")]
    pub(crate) shard_out: Option<PathBuf>,
    /// Take the re-embedding from these shard results instead of re-embedding here
    ///
    /// Take the re-embedding from these shard results (files, or directories of *.json) instead of
    /// re-embedding here: they must cover every text exactly once, each bound to this bundle, this executable
    /// and the declared model, or `embedding.values` fails naming the slice. Every other check runs here
    #[arg(long, value_name = "FILE|DIR", num_args = 1..)]
    pub(crate) embedding_shards: Vec<PathBuf>,
    /// Accept a legacy (not prehashed) minisign signature; by default only prehashed ones verify
    #[arg(long)]
    pub(crate) allow_legacy_signature: bool,
    /// The sparse checkpoint, to encode every text again (with --archive) and require the bundle's sparse vectors
    #[arg(long, value_name = "DIR")]
    pub(crate) sparse_model_dir: Option<PathBuf>,
    /// The largest file of the bundle that is read into memory
    ///
    /// A larger one fails the subjects check unread. vectors.f32 is not held: it is copied to a private temp file
    /// as it is hashed (up to 64 GiB)
    #[arg(long, value_name = "BYTES", default_value_t = receipt_verify::BUNDLE_LIMITS.max_file_bytes)]
    pub(crate) max_file_bytes: u64,
    /// The most bytes read into memory from the bundle's files in all (vectors.f32 apart)
    #[arg(long, value_name = "BYTES", default_value_t = receipt_verify::BUNDLE_LIMITS.max_total_bytes)]
    pub(crate) max_total_bytes: u64,
    #[command(flatten)]
    pub(crate) output: ReportArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct VerifySuiteArgs {
    /// The suite directory (`eval`'s `<work-dir>/suite`)
    ///
    /// The suite directory (`suite.json`, `suite.json.minisig`, one directory per bundle): `eval`'s
    /// `<work-dir>/suite`
    #[arg(long, value_name = "DIR")]
    pub(crate) suite_dir: PathBuf,
    /// The signer's minisign public key file (the suite's and every bundle's)
    #[arg(long, alias = "pubkey", value_name = "FILE")]
    pub(crate) public_key: PathBuf,
    /// A directory of the public archives (any names): each bundle's is the zip whose sha256 it records
    ///
    /// Without it, lexical rankings and texts rest on the signer
    #[arg(long, value_name = "DIR")]
    pub(crate) archive_dir: Option<PathBuf>,
    /// The model directory, for re-embedding every vector of every bundle
    #[arg(long, value_name = "DIR")]
    pub(crate) model_dir: Option<PathBuf>,
    /// Take each bundle's re-embedding from these shard results
    ///
    /// Take each bundle's re-embedding from these shard results (files, or directories of *.json) made by
    /// `verify-bundle --bundle-dir SUITE/<bundle> --embedding-shard I/N`: each bundle uses the results that name
    /// its manifest, which must cover its texts exactly once
    #[arg(long, value_name = "FILE|DIR", num_args = 1..)]
    pub(crate) embedding_shards: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) embedding: EmbeddingArgs,
    #[command(flatten)]
    pub(crate) output: ReportArgs,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        super::Cli::command().debug_assert();
    }

    /// Every help text, short and long, of the top level and of every subcommand (hidden ones too), as an
    /// 80-column terminal shows it: no line wider than the terminal, and the top level within one 80 x 24 screen.
    /// Hidden subcommands are the steps `eval` runs, and the top level names each of them.
    #[test]
    fn help_fits_an_80_column_terminal_and_the_top_level_one_screen() {
        let mut top = super::Cli::command().term_width(80);
        top.build();
        let mut checked = 0;
        let mut wide = Vec::new();
        let mut texts =
            vec![("(top)".to_owned(), top.render_help().to_string(), top.render_long_help().to_string())];
        for sub in top.get_subcommands_mut() {
            let name = sub.get_name().to_owned();
            texts.push((name, sub.render_help().to_string(), sub.render_long_help().to_string()));
        }
        for (name, short, long) in &texts {
            for line in short.lines().chain(long.lines()) {
                checked += 1;
                if line.chars().count() > 80 {
                    wide.push(format!("{name}: {line}"));
                }
            }
        }
        assert!(wide.is_empty(), "help lines wider than 80 columns:\n{}", wide.join("\n"));
        assert!(checked > 1000, "{checked} lines");
        // The top level has no long help of its own: `--help` prints what `-h` does (the binary's test reads both).
        let short = &texts[0].1;
        assert!(
            short.lines().count() <= 24,
            "the top-level help is {} lines:\n{short}",
            short.lines().count()
        );
        let listed = texts[0].1.replace('\n', " ");
        for sub in top.get_subcommands().filter(|sub| sub.is_hide_set()) {
            assert!(
                listed.contains(&format!(" {},", sub.get_name()))
                    || listed.contains(&format!(" {}.", sub.get_name())),
                "the top-level help does not name the hidden step {}",
                sub.get_name()
            );
        }
    }
}
