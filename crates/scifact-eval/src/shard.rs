//! Shards of a build's embedding: which texts slice `I` of `N` embeds, and where its cache lives.
//!
//! The texts are the documents then the test queries, in the archive's order, cut into the build's chunks of
//! `batch_size`; shard `I` of `N` embeds the chunks `[I·C/N, (I+1)·C/N)` of the `C` in all. A chunk is never
//! split, so every text shares its model call with the companions an unsharded build gives it (the forward
//! pass does not depend on them, but another backend might). A build without `--shard` then finds every
//! vector in the shards' caches and writes the same fixture, byte for byte.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One slice of `count`, numbered from 0: `--shard 2/4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which slice, from 0.
    pub index: usize,
    /// How many slices in all.
    pub count: usize,
}

/// The most slices a build is cut into: more than any cluster runs at once (msmarco's 8.8 million documents are
/// 138,000 chunks of 64), and a bound, so that a mistyped count can never make a merge walk 10^12 slices.
pub const MAX_SHARDS: usize = 1 << 16;

/// Why a `--shard` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--shard {text}: {reason}")]
pub struct ShardError {
    /// What was given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Shard {
    /// Reads `I/N` (0 <= I < N), `auto` (the index and count of the Slurm array task this runs in) or `auto/N`
    /// (the index of the Slurm array task or Kubernetes Indexed Job pod, N in all); `env` reads a variable.
    ///
    /// # Errors
    /// [`ShardError`] naming what is missing or out of range.
    pub fn parse(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<Shard, ShardError> {
        let error = |reason: String| ShardError { text: text.to_owned(), reason };
        let number = |value: &str, what: &str| {
            value
                .trim()
                .parse::<usize>()
                .map_err(|_| error(format!("{what} {value:?} is not a whole number")))
        };
        let (index, count) = match text.split_once('/') {
            None if text == "auto" => Self::from_scheduler(&env, None).map_err(error)?,
            Some(("auto", count)) => {
                let count = number(count, "the count")?;
                Self::from_scheduler(&env, Some(count)).map_err(error)?
            }
            Some((index, count)) => (number(index, "the index")?, number(count, "the count")?),
            None => return Err(error("expected I/N (from 0), auto, or auto/N".into())),
        };
        if count == 0 {
            return Err(error("the count must be at least 1".into()));
        }
        if count > MAX_SHARDS {
            return Err(error(format!(
                "the count {count} is above {MAX_SHARDS}, the most shards a build is cut into"
            )));
        }
        if index >= count {
            return Err(error(format!(
                "index {index} is not below the count {count} (shards are numbered from 0)"
            )));
        }
        Ok(Shard { index, count })
    }

    /// The index and count the scheduler gives: Slurm's array task (`SLURM_ARRAY_TASK_ID` from
    /// `SLURM_ARRAY_TASK_MIN`, counted by `SLURM_ARRAY_TASK_COUNT` or the array's min and max, step 1 only),
    /// else a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` with `count` given.
    fn from_scheduler(
        env: &impl Fn(&str) -> Option<String>,
        count: Option<usize>,
    ) -> Result<(usize, usize), String> {
        let read = |name: &str| -> Result<Option<usize>, String> {
            match env(name).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(value) => value
                    .trim()
                    .parse::<usize>()
                    .map(Some)
                    .map_err(|_| format!("{name}={value:?} is not a whole number")),
            }
        };
        if let Some(task) = read("SLURM_ARRAY_TASK_ID")? {
            if read("SLURM_ARRAY_TASK_STEP")?.is_some_and(|step| step != 1) {
                return Err("the Slurm array has a step other than 1 (use --array=0-N, or give I/N)".into());
            }
            let min = read("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let slurm_count = match (read("SLURM_ARRAY_TASK_COUNT")?, read("SLURM_ARRAY_TASK_MAX")?) {
                (Some(n), _) => n,
                (None, Some(max)) if max >= min => max - min + 1,
                _ => return Err("SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX is".into()),
            };
            let index = task
                .checked_sub(min)
                .ok_or_else(|| format!("SLURM_ARRAY_TASK_ID {task} is below SLURM_ARRAY_TASK_MIN {min}"))?;
            if let Some(count) = count.filter(|count| *count != slurm_count) {
                return Err(format!("the Slurm array has {slurm_count} tasks, not {count}"));
            }
            return Ok((index, slurm_count));
        }
        if let Some(index) = read("JOB_COMPLETION_INDEX")? {
            let Some(count) = count else {
                return Err("JOB_COMPLETION_INDEX is set but a Kubernetes Job does not give the count: use auto/N with the Job's completions".into());
            };
            return Ok((index, count));
        }
        Err("neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set: give I/N".into())
    }

    /// The positions of the documents and of the queries this shard embeds, when `documents` and `queries`
    /// texts are embedded in chunks of `batch_size`.
    pub fn slice(&self, documents: usize, queries: usize, batch_size: usize) -> (Range<usize>, Range<usize>) {
        let batch = batch_size.max(1);
        let (document_chunks, query_chunks) = (documents.div_ceil(batch), queries.div_ceil(batch));
        let chunks = document_chunks + query_chunks;
        let bound =
            |i: usize| usize::try_from(i as u128 * chunks as u128 / self.count as u128).unwrap_or(chunks);
        let (first, end) = (bound(self.index), bound(self.index + 1));
        let in_documents = first.min(document_chunks)..end.min(document_chunks);
        let in_queries =
            first.max(document_chunks) - document_chunks..end.max(document_chunks) - document_chunks;
        let items =
            |chunks: Range<usize>, len: usize| (chunks.start * batch).min(len)..(chunks.end * batch).min(len);
        (items(in_documents, documents), items(in_queries, queries))
    }

    /// The slice of `count` that embeds chunk `chunk` of `chunks` (`chunk < chunks`): the last i with
    /// floor(i·C/N) <= c, which is ceil((c + 1)·N / C) - 1.
    pub fn of_chunk(chunk: usize, count: usize, chunks: usize) -> Shard {
        let (c, n, total) = (chunk as u128 + 1, count.max(1) as u128, chunks.max(1) as u128);
        let index = usize::try_from((c * n).div_ceil(total) - 1).unwrap_or(usize::MAX).min(count.max(1) - 1);
        Shard { index, count: count.max(1) }
    }

    /// The directory of this shard's cache under `work_dir`, for `dataset` (a profile name) and `split`.
    pub fn dir(&self, work_dir: &Path, dataset: &str, split: &str) -> PathBuf {
        shards_dir(work_dir, dataset, split).join(format!("{}-of-{}", self.index, self.count))
    }

    /// Reads a shard directory's name (`2-of-4`): `None` for a name of another form, an error for one of this
    /// form that no `--shard` could have made (an index not below its count, a count above [`MAX_SHARDS`]).
    ///
    /// # Errors
    /// Why the name is out of range.
    pub fn from_dir_name(name: &str) -> Option<Result<Shard, String>> {
        let (index, count) = name.split_once("-of-")?;
        let (index, count): (usize, usize) = (index.parse().ok()?, count.parse().ok()?);
        Some(if index >= count || count > MAX_SHARDS {
            Err(format!(
                "{name} is no shard a build makes (an index below its count, at most {MAX_SHARDS} shards)"
            ))
        } else {
            Ok(Shard { index, count })
        })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Where every shard of `dataset`'s `split` keeps its cache: `<work_dir>/shards/<dataset>-<split>/`, the
/// dataset written as its run files write it ([`crate::file_prefix`]: a forum's `/` as `-`). A directory of the
/// name earlier builds gave a forum (its `/` written `+`) is taken over by renaming it, so its caches are reused.
pub fn shards_dir(work_dir: &Path, dataset: &str, split: &str) -> PathBuf {
    let shards = work_dir.join("shards");
    let dir = shards.join(format!("{}-{split}", crate::file_prefix(dataset)));
    if dataset.contains('/') && !dir.exists() {
        let legacy = shards.join(format!("{}-{split}", dataset.replace('/', "+")));
        if legacy.is_dir() {
            // Best effort: if it cannot be renamed, the build embeds again and says nothing is lost.
            let _ = std::fs::rename(&legacy, &dir);
        }
    }
    dir
}

/// What a shard's cache is bound to besides the model and text policy (its file name's): the archive, the
/// dataset and split, the chunking and the slice. A cache of another is refused, never mixed in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardBinding {
    /// sha256 (hex) of the archive (or dataset directory) the texts were read from.
    pub archive_sha256: String,
    /// The dataset (profile name).
    pub dataset: String,
    /// The qrels split whose queries are embedded.
    pub split: String,
    /// Texts per chunk.
    pub batch_size: usize,
    /// The slice.
    pub shard: Shard,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forums_shards_are_named_as_its_run_files_and_an_earlier_directory_is_taken_over() {
        let work = tempfile::tempdir().unwrap();
        let legacy = work.path().join("shards/cqadupstack+android-test");
        std::fs::create_dir_all(legacy.join("0-of-2")).unwrap();
        let dir = shards_dir(work.path(), "cqadupstack/android", "test");
        assert_eq!(dir, work.path().join("shards/cqadupstack-android-test"));
        assert_eq!(
            dir.file_name().unwrap().to_str().unwrap(),
            format!("{}-test", crate::file_prefix("cqadupstack/android"))
        );
        assert!(dir.join("0-of-2").is_dir() && !legacy.exists(), "the earlier directory was renamed");
        assert_eq!(shards_dir(work.path(), "nfcorpus", "test"), work.path().join("shards/nfcorpus-test"));
    }

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn slices_cover_every_text_once_and_never_split_a_chunk() {
        for (documents, queries, batch) in [(5183, 300, 64), (10, 3, 4), (0, 5, 2), (1, 0, 64), (7, 7, 1)] {
            for count in 1..=9 {
                let mut seen_documents = vec![0u8; documents];
                let mut seen_queries = vec![0u8; queries];
                for index in 0..count {
                    let (d, q) = Shard { index, count }.slice(documents, queries, batch);
                    for range in [&d, &q] {
                        assert!(range.is_empty() || range.start % batch == 0, "a slice starts on a chunk");
                    }
                    d.for_each(|i| seen_documents[i] += 1);
                    q.for_each(|i| seen_queries[i] += 1);
                }
                assert!(
                    seen_documents.iter().chain(&seen_queries).all(|n| *n == 1),
                    "{documents} {queries} {batch} {count}"
                );
            }
        }
        // SciFact in 4: 81 document chunks and 5 query chunks, 21 or 22 chunks each.
        assert_eq!(Shard { index: 0, count: 4 }.slice(5183, 300, 64), (0..1344, 0..0));
        assert_eq!(Shard { index: 3, count: 4 }.slice(5183, 300, 64), (4096..5183, 0..300));
    }

    #[test]
    fn shards_read_from_the_flag_slurm_and_kubernetes() {
        assert_eq!(Shard::parse("2/4", none), Ok(Shard { index: 2, count: 4 }));
        for bad in ["4/4", "1/0", "x/2", "2", "-1/3", "auto"] {
            assert!(Shard::parse(bad, none).is_err(), "{bad}");
        }
        let slurm = |name: &str| match name {
            "SLURM_ARRAY_TASK_ID" => Some("7".to_owned()),
            "SLURM_ARRAY_TASK_MIN" => Some("4".to_owned()),
            "SLURM_ARRAY_TASK_MAX" => Some("7".to_owned()),
            _ => None,
        };
        assert_eq!(Shard::parse("auto", slurm), Ok(Shard { index: 3, count: 4 }));
        assert_eq!(Shard::parse("auto/4", slurm), Ok(Shard { index: 3, count: 4 }));
        assert!(Shard::parse("auto/5", slurm).unwrap_err().reason.contains("4 tasks, not 5"));
        let stepped =
            |name: &str| if name == "SLURM_ARRAY_TASK_STEP" { Some("2".to_owned()) } else { slurm(name) };
        assert!(Shard::parse("auto", stepped).is_err());
        let kubernetes = |name: &str| (name == "JOB_COMPLETION_INDEX").then(|| "1".to_owned());
        assert_eq!(Shard::parse("auto/3", kubernetes), Ok(Shard { index: 1, count: 3 }));
        assert!(Shard::parse("auto", kubernetes).unwrap_err().reason.contains("auto/N"));
        assert!(
            Shard::parse("auto/3", |name: &str| (name == "JOB_COMPLETION_INDEX").then(|| "3".to_owned()))
                .is_err()
        );
        for chunks in 1..40 {
            for count in 1..100 {
                for chunk in 0..chunks {
                    let shard = Shard::of_chunk(chunk, count, chunks);
                    let (held, _) = shard.slice(chunks, 0, 1);
                    assert!(held.contains(&chunk), "chunk {chunk} of {chunks} is not in {shard}: {held:?}");
                }
            }
        }
        assert_eq!(Shard::from_dir_name("2-of-4"), Some(Ok(Shard { index: 2, count: 4 })));
        assert!(matches!(Shard::from_dir_name("4-of-4"), Some(Err(_))));
        assert!(matches!(Shard::from_dir_name("0-of-1000000000000"), Some(Err(_))));
        assert_eq!(Shard::from_dir_name("notes"), None);
        let refused = Shard::parse("0/1000000000000", |_| None).unwrap_err().to_string();
        assert!(refused.contains("is above 65536"), "{refused}");
    }
}
