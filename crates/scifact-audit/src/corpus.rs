//! Which corpus a command works on: BEIR SciFact (the default), or the tiny stand-in committed under
//! `fixtures/tiny/` (made-up words and a miniature BERT, so a newcomer sees the whole pipeline work offline in
//! seconds). The choice decides the shape gate, where the archive and the model come from, and the pin.

use std::path::{Path, PathBuf};

use anyhow::bail;
use scifact_eval::tiny::{TINY_ARCHIVE_FILE, TINY_MODEL_DIR, TINY_WEIGHTS_SHA256};
use scifact_eval::{BuildOptions, DigestPolicy, Profile, SCIFACT_URL};

use crate::build::acquire_archive;
use crate::cli::{CorpusArg, ModelArgs};
use crate::progress::StageProgress;

/// Where the tiny corpus lives, relative to the source checkout.
const TINY_DIR: &str = "fixtures/tiny";

impl CorpusArg {
    /// The corpus a fixture's `profile` names.
    pub(crate) fn of_profile(profile: &str) -> anyhow::Result<CorpusArg> {
        match profile {
            "scifact" => Ok(CorpusArg::Scifact),
            scifact_eval::tiny::TINY_PROFILE => Ok(CorpusArg::Tiny),
            other => bail!("unknown corpus profile {other:?}"),
        }
    }

    fn profile(self) -> Profile {
        match self {
            CorpusArg::Scifact => Profile::scifact(),
            CorpusArg::Tiny => scifact_eval::tiny::profile(),
        }
    }

    /// The archive: for SciFact `--archive`, `$SCIFACT_ARCHIVE` or a pinned download; for the tiny corpus
    /// `--archive` or the committed `fixtures/tiny/scifact-tiny.zip` (never `$SCIFACT_ARCHIVE`, which names
    /// the real one).
    pub(crate) fn archive(
        self,
        archive: Option<&Path>,
        work_dir: &Path,
        accept_archive_digest: Option<&str>,
        progress: &StageProgress,
    ) -> anyhow::Result<(PathBuf, DigestPolicy)> {
        match self {
            CorpusArg::Scifact => acquire_archive(archive, work_dir, accept_archive_digest, progress),
            CorpusArg::Tiny => Ok((
                archive.map_or_else(|| tiny_file(TINY_ARCHIVE_FILE), |p| Ok(p.to_owned()))?,
                DigestPolicy::LocalRecorded,
            )),
        }
    }

    /// The model flags: for the tiny corpus, the committed tiny model pinned to its sha256 (never
    /// `$SCIFACT_MODEL_DIR`), or the checkpoint `--model-dir` names, its digests measured.
    pub(crate) fn model_args(self, args: &ModelArgs) -> anyhow::Result<ModelArgs> {
        let mut args = args.clone();
        if self == CorpusArg::Tiny && args.model_dir.is_none() {
            args.model_dir = Some(tiny_file(TINY_MODEL_DIR)?);
            args.weights_sha256.get_or_insert_with(|| TINY_WEIGHTS_SHA256.to_owned());
        }
        Ok(args)
    }

    /// The one fixture build that `build`, `eval` and `reproduce` run: this corpus's profile and URL, batches
    /// of 64, `work_dir` for the embedding cache and scratch, the fixture written to `out`.
    pub(crate) fn build_options(
        self,
        archive: PathBuf,
        digest_policy: DigestPolicy,
        work_dir: PathBuf,
        out: PathBuf,
        text_policy: scifact_eval::TextPolicyKind,
    ) -> BuildOptions {
        let url = match self {
            CorpusArg::Scifact => SCIFACT_URL.to_owned(),
            CorpusArg::Tiny => {
                format!("{TINY_DIR}/{TINY_ARCHIVE_FILE} (made-up text written by this project)")
            }
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
