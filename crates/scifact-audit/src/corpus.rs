//! Which corpus a command works on: BEIR SciFact (the default), the tiny stand-in committed under
//! `fixtures/tiny/` (made-up words and a miniature BERT, so a newcomer sees the whole pipeline work offline in
//! seconds), another BEIR dataset of the registry (`--dataset NAME`, downloaded and checked against BEIR's md5,
//! or given with `--archive`), or any archive in BEIR's layout (`--dataset-archive ZIP`), which the fixture
//! says is not registered. The choice decides the shape gate, the qrels split, where the archive and the model
//! come from, and the pin.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use scifact_eval::datasets::{Dataset, dataset_registry};
use scifact_eval::tiny::{TINY_ARCHIVE_FILE, TINY_MODEL_DIR, TINY_WEIGHTS_SHA256};
use scifact_eval::{BuildOptions, DigestPolicy, Profile, QRELS_SPLITS, SCIFACT_URL, calibration_count};

use crate::build::acquire_archive;
use crate::cli::{CorpusArg, DatasetArgs, ModelArgs};
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
    /// Another dataset of the registry (or one of CQADupStack's forums).
    Beir {
        /// The registry's entry.
        dataset: Box<Dataset>,
        /// The forum, for a dataset of forums.
        forum: Option<String>,
        /// Where to download it from when that is not BEIR's server.
        mirror: Option<String>,
    },
    /// An archive in BEIR's layout that the registry does not name: its folder is its name, any shape.
    Unregistered {
        /// The archive (`--dataset-archive`).
        archive: PathBuf,
        /// Its folder (`NAME`, or a forum's `NAME/<forum>`).
        name: String,
        /// The qrels split scored.
        split: String,
        /// The archive's other forums.
        siblings: Vec<String>,
    },
}

/// One evaluation of a suite: the corpus, and the dataset whose mean it is part of when it is one of several
/// forums (CQADupStack's twelve).
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    /// The dataset the forums' mean stands for.
    pub(crate) group: Option<String>,
    /// What this evaluation reads.
    pub(crate) corpus: Corpus,
}

impl Corpus {
    /// `--profile`, `--dataset`, `--dataset-archive` and `--qrels-split` together, when they name one
    /// evaluation (`build` and a single `eval`).
    pub(crate) fn chosen(profile: CorpusArg, dataset: &DatasetArgs) -> anyhow::Result<Corpus> {
        let mut plan = Corpus::planned(profile, dataset)?;
        match (plan.len(), dataset.dataset.as_deref()) {
            (1, _) => Ok(plan.remove(0).corpus),
            (n, Some(names)) => bail!(
                "--dataset {names} is {n} evaluations (a suite, which `eval` runs); this command takes one: a \
                 dataset, or one forum as NAME/<forum>"
            ),
            (n, None) => bail!(
                "the archive holds {n} forums (a suite, which `eval` runs); this command takes one, as \
                 --dataset-archive ZIP of one folder"
            ),
        }
    }

    /// Every evaluation the options name: one corpus, or a suite (`--dataset a,b,c`, a dataset of forums
    /// such as CQADupStack, an archive of forums), in order.
    pub(crate) fn planned(profile: CorpusArg, dataset: &DatasetArgs) -> anyhow::Result<Vec<Planned>> {
        let split = dataset.qrels_split.as_deref();
        let single = |corpus: Corpus| vec![Planned { group: None, corpus }];
        match (profile, dataset.dataset.as_deref(), dataset.dataset_archive.as_deref()) {
            (CorpusArg::Tiny, None, None) if split.is_none() => Ok(single(Corpus::Tiny)),
            (CorpusArg::Tiny, ..) => {
                bail!(
                    "--profile tiny is the committed stand-in: it takes no --dataset, --dataset-archive or --qrels-split"
                )
            }
            (_, Some(_), Some(_)) => bail!("--dataset and --dataset-archive name two datasets: give one"),
            (_, None, Some(path)) => Corpus::unregistered(&follow_archive(path)?, split.unwrap_or("test")),
            (_, _, None) if split.is_some() => {
                bail!(
                    "--qrels-split is for --dataset-archive; a registered dataset is scored on its own split"
                )
            }
            (_, Some(names), None) => {
                let mut plan = Vec::new();
                for name in names.split(',').map(str::trim) {
                    if plan
                        .iter()
                        .any(|p: &Planned| p.corpus.name() == name || p.group.as_deref() == Some(name))
                    {
                        bail!("--dataset names {name} twice");
                    }
                    for mut planned in Corpus::registered(name)? {
                        match &mut planned.corpus {
                            Corpus::Beir { mirror, .. } => mirror.clone_from(&dataset.beir_mirror),
                            _ if dataset.beir_mirror.is_some() => bail!(
                                "--beir-mirror is for the other datasets; SciFact's download is pinned (or give \
                                 --archive)"
                            ),
                            _ => {}
                        }
                        plan.push(planned);
                    }
                }
                Ok(plan)
            }
            (_, None, None) => Ok(single(Corpus::Scifact)),
        }
    }

    /// The corpus a fixture's metadata names: its profile, and for an archive no registry names, that
    /// archive (given again with `--archive`) and the recorded split.
    pub(crate) fn of_fixture(metadata: &serde_json::Value, archive: Option<&Path>) -> anyhow::Result<Corpus> {
        let profile = metadata["profile"].as_str().unwrap_or("scifact");
        if metadata["registered"] == false {
            let Some(path) = archive else {
                bail!(
                    "the bundle's dataset {profile:?} is no registered one: pass its archive with --archive"
                )
            };
            let plan = Corpus::unregistered(path, metadata["qrels_split"].as_str().unwrap_or("test"))?;
            return match plan.into_iter().find(|p| p.corpus.name() == profile) {
                Some(planned) => Ok(planned.corpus),
                None => bail!("{} is not an archive of the bundle's dataset {profile:?}", path.display()),
            };
        }
        Corpus::of_profile(profile)
    }

    /// The corpus a registered profile names (a dataset, or one forum as `NAME/<forum>`).
    pub(crate) fn of_profile(profile: &str) -> anyhow::Result<Corpus> {
        if profile == scifact_eval::tiny::TINY_PROFILE {
            return Ok(Corpus::Tiny);
        }
        match Corpus::registered(profile)?.as_slice() {
            [one] => Ok(one.corpus.clone()),
            _ => {
                bail!("{profile} is several forums, each a fixture of its own: name one as {profile}/<forum>")
            }
        }
    }

    /// Whether `eval --dataset NAME` takes this registered dataset (a dataset of forums as a suite).
    pub(crate) fn evaluable(name: &str) -> bool {
        Corpus::registered(name).is_ok()
    }

    /// The dataset's name as its fixture records it (`scifact`, `nfcorpus`, `cqadupstack/android`).
    pub(crate) fn name(&self) -> String {
        self.profile().name
    }

    /// An archive in BEIR's layout scored on `split`: one evaluation named by its one folder, or one per forum.
    fn unregistered(archive: &Path, split: &str) -> anyhow::Result<Vec<Planned>> {
        if !QRELS_SPLITS.contains(&split) {
            bail!("--qrels-split {split:?}: BEIR's layout names {}", QRELS_SPLITS.join(", "));
        }
        let folders = scifact_eval::beir_folders(archive)
            .with_context(|| format!("--dataset-archive {}", archive.display()))?;
        let forums = folders.first().is_some_and(|f| f.contains('/'));
        let group = forums.then(|| folders[0].split('/').next().unwrap_or_default().to_owned());
        Ok(folders
            .iter()
            .map(|name| Planned {
                group: group.clone(),
                corpus: Corpus::Unregistered {
                    archive: archive.to_owned(),
                    name: name.clone(),
                    split: split.to_owned(),
                    siblings: folders.iter().filter(|other| *other != name).cloned().collect(),
                },
            })
            .collect())
    }

    /// A dataset of the registry this build can evaluate (public, enough queries to split): one evaluation,
    /// or one per forum of a dataset of forums; `NAME/<forum>` is that forum alone.
    fn registered(name: &str) -> anyhow::Result<Vec<Planned>> {
        if name == "scifact" {
            return Ok(vec![Planned { group: None, corpus: Corpus::Scifact }]);
        }
        let (dataset_name, forum) = match name.split_once('/') {
            Some((dataset, forum)) => (dataset, Some(forum)),
            None => (name, None),
        };
        let registry = dataset_registry().map_err(|reason| anyhow::anyhow!(reason))?;
        let Some(dataset) = registry.datasets.into_iter().find(|d| d.name == dataset_name) else {
            bail!("{name:?} is not a BEIR dataset of the registry (`scifact-audit datasets` lists them)")
        };
        if !dataset.public {
            bail!("{name} is not public: BEIR publishes no archive of it to check against");
        }
        let beir = |forum: Option<&str>| Corpus::Beir {
            dataset: Box::new(dataset.clone()),
            forum: forum.map(str::to_owned),
            mirror: None,
        };
        match forum {
            Some(_) if dataset.forums.is_empty() => bail!("{dataset_name} has no forums"),
            Some(forum) if dataset.forum_profile(forum).is_none() => bail!(
                "{dataset_name} has no forum {forum:?} (its forums: {})",
                dataset.forums.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
            Some(forum) => Ok(vec![Planned { group: None, corpus: beir(Some(forum)) }]),
            None if !dataset.forums.is_empty() => Ok(dataset
                .forums
                .iter()
                .map(|f| Planned { group: Some(dataset.name.clone()), corpus: beir(Some(&f.name)) })
                .collect()),
            None if calibration_count(dataset.queries) == 0 => bail!(
                "{name} has {} queries: too few to calibrate on some and hold out the rest",
                dataset.queries
            ),
            None => Ok(vec![Planned { group: None, corpus: beir(None) }]),
        }
    }

    pub(crate) fn profile(&self) -> Profile {
        match self {
            Corpus::Scifact => Profile::scifact(),
            Corpus::Tiny => scifact_eval::tiny::profile(),
            Corpus::Beir { dataset, forum: None, .. } => dataset.profile(),
            Corpus::Beir { dataset, forum: Some(forum), .. } => {
                dataset.forum_profile(forum).unwrap_or_else(|| dataset.profile())
            }
            Corpus::Unregistered { name, split, siblings, .. } => {
                Profile { siblings: siblings.clone(), ..Profile::unregistered(name, split) }
            }
        }
    }

    /// The archive: for SciFact `--archive`, `$SCIFACT_ARCHIVE` or a pinned download; for the tiny corpus
    /// `--archive` or the committed `fixtures/tiny/scifact-tiny.zip` (never `$SCIFACT_ARCHIVE`, which names
    /// the real one); for another dataset `--archive`, its digests recorded beside BEIR's md5, or BEIR's
    /// download checked against that md5; for an unregistered one, `--dataset-archive`.
    pub(crate) fn archive(
        &self,
        archive: Option<&Path>,
        work_dir: &Path,
        accept_archive_digest: Option<&str>,
        progress: &StageProgress,
    ) -> anyhow::Result<(PathBuf, DigestPolicy)> {
        let followed = archive.map(follow_archive).transpose()?;
        let archive = followed.as_deref();
        match self {
            Corpus::Scifact => {
                let (path, policy) = acquire_archive(archive, work_dir, accept_archive_digest, progress)?;
                if policy == DigestPolicy::LocalRecorded {
                    say_whose_archive(&path, "scifact", Some(scifact_eval::SCIFACT_PUBLISHED_MD5))?;
                }
                Ok((path, policy))
            }
            Corpus::Tiny => Ok((
                archive.map_or_else(|| tiny_file(TINY_ARCHIVE_FILE), |p| Ok(p.to_owned()))?,
                DigestPolicy::LocalRecorded,
            )),
            Corpus::Beir { dataset, mirror, .. } => {
                match (archive, dataset.url.as_deref(), dataset.md5.as_deref()) {
                    (Some(path), ..) => {
                        say_whose_archive(path, &dataset.name, dataset.md5.as_deref())?;
                        Ok((path.to_owned(), DigestPolicy::LocalRecorded))
                    }
                    (None, Some(url), Some(md5)) => {
                        let mirrored = mirror
                            .as_ref()
                            .map(|m| format!("{}/{}.zip", m.trim_end_matches('/'), dataset.name));
                        let url = mirrored.as_deref().unwrap_or(url);
                        let dest = work_dir.join(format!("{}.zip", dataset.name));
                        let policy = scifact_eval::fetch_archive(
                            url,
                            &dest,
                            md5,
                            accept_archive_digest,
                            progress,
                        )
                        .with_context(|| {
                            format!(
                                "no --archive given, and BEIR's {url} could not be fetched or admitted; \
                                         pass --archive ZIP with BEIR's {}.zip (md5 {md5})",
                                dataset.name
                            )
                        })?;
                        Ok((dest, policy))
                    }
                    (None, ..) => {
                        bail!("--dataset {} has no published archive: pass --archive", dataset.name)
                    }
                }
            }
            Corpus::Unregistered { archive: path, .. } => match archive {
                Some(other) if other != path => {
                    bail!(
                        "--archive {} and --dataset-archive {} name two archives",
                        other.display(),
                        path.display()
                    )
                }
                _ => Ok((path.clone(), DigestPolicy::LocalRecorded)),
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
        format: scifact_eval::FixtureFormat,
    ) -> BuildOptions {
        let url = match self {
            Corpus::Scifact => SCIFACT_URL.to_owned(),
            Corpus::Tiny => format!("{TINY_DIR}/{TINY_ARCHIVE_FILE} (made-up text written by this project)"),
            Corpus::Beir { dataset, .. } => dataset.url.clone().unwrap_or_default(),
            Corpus::Unregistered { archive, .. } => {
                format!("{} (no registered dataset: its name is its folder's)", archive.display())
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
            format,
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

/// Says at once, before any work, when an archive given for a registered dataset is not BEIR's published file:
/// it is then evaluated as an archive of the dataset's shape, and no published row is comparable with it.
fn say_whose_archive(path: &Path, dataset: &str, beir_md5: Option<&str>) -> anyhow::Result<()> {
    let md5 = scifact_eval::archive_md5(path).with_context(|| format!("reading {}", path.display()))?;
    match (md5, beir_md5) {
        (Some(md5), Some(beir)) if md5 == beir => {}
        (md5, beir) => crate::progress::say(&format!(
            "note: {} is not BEIR's published {dataset} archive ({}; BEIR's has md5 {}): it is evaluated as an \
             archive of {dataset}'s shape, and the published rows of {dataset} are not comparable with it",
            path.display(),
            md5.map_or_else(|| "a directory".to_owned(), |md5| format!("md5 {md5}")),
            beir.unwrap_or("none")
        )),
    }
    Ok(())
}

/// An archive a user names, with a symbolic link followed to what it leads to: a regular file (a zip on shared
/// storage, linked into place) or, for `--dataset-archive`, a dataset directory. A link to anything else (a
/// FIFO, a device, nothing) is refused, saying what it leads to; the readers after this follow no link.
pub(crate) fn follow_archive(path: &Path) -> anyhow::Result<PathBuf> {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink());
    if is_link && std::fs::metadata(path).is_ok_and(|meta| meta.is_dir()) {
        return std::fs::canonicalize(path).with_context(|| format!("the archive {}", path.display()));
    }
    safe_fs::follow_to_regular(path).with_context(|| format!("the archive {}", path.display()))
}
