//! Which corpus a command works on: BEIR SciFact (the default), the tiny stand-in committed under
//! `fixtures/tiny/` (made-up words and a miniature BERT, so a newcomer sees the whole pipeline work offline in
//! seconds), or another BEIR dataset of the registry (`--dataset NAME`, its archive given with `--archive`).
//! The choice decides the shape gate, where the archive and the model come from, and the pin.

use std::path::{Path, PathBuf};

use anyhow::bail;
use scifact_eval::datasets::{Dataset, dataset_registry};
use scifact_eval::tiny::{TINY_ARCHIVE_FILE, TINY_MODEL_DIR, TINY_WEIGHTS_SHA256};
use scifact_eval::{BuildOptions, CALIBRATION_COUNT, DigestPolicy, Profile, SCIFACT_URL};

use crate::build::acquire_archive;
use crate::cli::{CorpusArg, ModelArgs};
use crate::progress::StageProgress;

/// Where the tiny corpus lives, relative to the source checkout.
const TINY_DIR: &str = "fixtures/tiny";

/// The corpus a command works on.
#[derive(Debug, Clone)]
pub(crate) enum Corpus {
    /// BEIR SciFact, the contract's.
    Scifact,
    /// The committed stand-in.
    Tiny,
    /// Another dataset of the BEIR registry, from an archive the user gives.
    Beir(Box<Dataset>),
}

impl Corpus {
    /// `--profile` and `--dataset` together: a registered dataset's name, or the profile.
    pub(crate) fn chosen(profile: CorpusArg, dataset: Option<&str>) -> anyhow::Result<Corpus> {
        match (profile, dataset) {
            (_, None) => Ok(profile.into()),
            (CorpusArg::Scifact, Some(name)) => Corpus::registered(name),
            (CorpusArg::Tiny, Some(_)) => bail!("--profile tiny and --dataset name two corpora: give one"),
        }
    }

    /// The corpus a fixture's `profile` names.
    pub(crate) fn of_profile(profile: &str) -> anyhow::Result<Corpus> {
        match profile {
            scifact_eval::tiny::TINY_PROFILE => Ok(Corpus::Tiny),
            other => Corpus::registered(other),
        }
    }

    /// A dataset of the registry this build can evaluate: a test split, one corpus, more test queries than
    /// the calibration split takes.
    fn registered(name: &str) -> anyhow::Result<Corpus> {
        if name == "scifact" {
            return Ok(Corpus::Scifact);
        }
        let registry = dataset_registry().map_err(|reason| anyhow::anyhow!(reason))?;
        let Some(dataset) = registry.datasets.into_iter().find(|d| d.name == name) else {
            bail!("{name:?} is not a BEIR dataset of the registry (`scifact-audit datasets` lists them)")
        };
        if !dataset.public {
            bail!("{name} is not public: BEIR publishes no archive of it to check against");
        }
        if !dataset.forums.is_empty() {
            bail!(
                "{name} is {} forums, each a run of its own; this build evaluates one corpus per archive",
                dataset.forums.len()
            );
        }
        if dataset.split != "test" {
            bail!("{name} is scored on its {} split; this build reads qrels/test.tsv", dataset.split);
        }
        if dataset.queries <= CALIBRATION_COUNT {
            bail!(
                "{name} has {} test queries; the split takes {CALIBRATION_COUNT} for calibration and needs some                  left to hold out",
                dataset.queries
            );
        }
        Ok(Corpus::Beir(Box::new(dataset)))
    }

    fn profile(&self) -> Profile {
        match self {
            Corpus::Scifact => Profile::scifact(),
            Corpus::Tiny => scifact_eval::tiny::profile(),
            Corpus::Beir(dataset) => dataset.profile(),
        }
    }

    /// The archive: for SciFact `--archive`, `$SCIFACT_ARCHIVE` or a pinned download; for the tiny corpus
    /// `--archive` or the committed `fixtures/tiny/scifact-tiny.zip` (never `$SCIFACT_ARCHIVE`, which names
    /// the real one); for another dataset `--archive`, its digests recorded beside BEIR's md5.
    pub(crate) fn archive(
        &self,
        archive: Option<&Path>,
        work_dir: &Path,
        accept_archive_digest: Option<&str>,
        progress: &StageProgress,
    ) -> anyhow::Result<(PathBuf, DigestPolicy)> {
        match self {
            Corpus::Scifact => acquire_archive(archive, work_dir, accept_archive_digest, progress),
            Corpus::Tiny => Ok((
                archive.map_or_else(|| tiny_file(TINY_ARCHIVE_FILE), |p| Ok(p.to_owned()))?,
                DigestPolicy::LocalRecorded,
            )),
            Corpus::Beir(dataset) => match archive {
                Some(path) => Ok((path.to_owned(), DigestPolicy::LocalRecorded)),
                None => bail!(
                    "--dataset {} needs --archive: BEIR's {} (md5 {})",
                    dataset.name,
                    dataset.url.as_deref().unwrap_or("archive"),
                    dataset.md5.as_deref().unwrap_or("unknown")
                ),
            },
        }
    }

    /// The model flags: for the tiny corpus, the committed tiny model pinned to its sha256 (never
    /// `$SCIFACT_MODEL_DIR`), or the checkpoint `--model-dir` names, its digests measured.
    pub(crate) fn model_args(&self, args: &ModelArgs) -> anyhow::Result<ModelArgs> {
        let mut args = args.clone();
        if matches!(self, Corpus::Tiny) && args.model_dir.is_none() {
            args.model_dir = Some(tiny_file(TINY_MODEL_DIR)?);
            args.weights_sha256.get_or_insert_with(|| TINY_WEIGHTS_SHA256.to_owned());
        }
        Ok(args)
    }

    /// The one fixture build that `build`, `eval` and `reproduce` run: this corpus's profile and URL, batches
    /// of 64, `work_dir` for the embedding cache and scratch, the fixture written to `out`.
    pub(crate) fn build_options(
        &self,
        archive: PathBuf,
        digest_policy: DigestPolicy,
        work_dir: PathBuf,
        out: PathBuf,
        text_policy: scifact_eval::TextPolicyKind,
    ) -> BuildOptions {
        let url = match self {
            Corpus::Scifact => SCIFACT_URL.to_owned(),
            Corpus::Tiny => format!("{TINY_DIR}/{TINY_ARCHIVE_FILE} (made-up text written by this project)"),
            Corpus::Beir(dataset) => dataset.url.clone().unwrap_or_default(),
        };
        BuildOptions {
            archive,
            digest_policy,
            url,
            work_dir,
            out,
            profile: self.profile(),
            batch_size: 64,
            text_policy,
        }
    }
}

impl From<CorpusArg> for Corpus {
    fn from(arg: CorpusArg) -> Corpus {
        match arg {
            CorpusArg::Scifact => Corpus::Scifact,
            CorpusArg::Tiny => Corpus::Tiny,
        }
    }
}

/// A file of the committed tiny corpus, which must be there: the command runs from the source checkout.
fn tiny_file(name: &str) -> anyhow::Result<PathBuf> {
    let path = Path::new(TINY_DIR).join(name);
    if !path.exists() {
        bail!(
            "{} is not here: the tiny corpus is in the source checkout's {TINY_DIR}/ (run from the checkout, or pass \
             --archive and --model-dir)",
            path.display()
        );
    }
    Ok(path)
}
