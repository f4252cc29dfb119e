//! Who ran the evaluation, where and from what: the executable, the git worktree and the host.
//!
//! Everything here is evidence, collected best-effort: a fact that cannot be read is recorded with the reason,
//! never guessed and never fatal, because a reviewer decides what a missing fact means.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::archive::sha256_hex;

/// The running executable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutableIdentity {
    /// Resolved path of the running binary, or `None` with `unavailable` saying why.
    pub path: Option<String>,
    /// `sha256:` of its bytes.
    pub sha256: Option<String>,
    /// The arguments it was invoked with (`argv`).
    pub invocation: Vec<String>,
    /// `SCIFACT_EVAL_LAUNCHER`, when the caller recorded the outer launcher command there.
    pub launcher: Option<String>,
    /// Why `path` or `sha256` is missing.
    pub unavailable: Option<String>,
}

impl ExecutableIdentity {
    /// Identifies the current process. The executable is read and hashed once per process, when first asked:
    /// what ran is what was there when it started (a file replaced later is not what this process runs), and
    /// a debug build's hundreds of megabytes are not hashed again for every run of an evaluation.
    pub fn current() -> Self {
        static RUNNING: std::sync::OnceLock<Result<(String, String), String>> = std::sync::OnceLock::new();
        let invocation = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
        let launcher = std::env::var("SCIFACT_EVAL_LAUNCHER").ok();
        let found = RUNNING.get_or_init(|| {
            std::env::current_exe()
                .and_then(|path| path.canonicalize())
                .and_then(|path| std::fs::read(&path).map(|bytes| (path, bytes)))
                .map(|(path, bytes)| (path.display().to_string(), format!("sha256:{}", sha256_hex(&bytes))))
                .map_err(|error| format!("cannot read the running executable: {error}"))
        });
        match found {
            Ok((path, sha256)) => ExecutableIdentity {
                path: Some(path.clone()),
                sha256: Some(sha256.clone()),
                invocation,
                launcher,
                unavailable: None,
            },
            Err(reason) => ExecutableIdentity {
                path: None,
                sha256: None,
                invocation,
                launcher,
                unavailable: Some(reason.clone()),
            },
        }
    }
}

/// The git worktree a run started in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitState {
    /// Whether a repository was found.
    pub available: bool,
    /// Why not, when it was not.
    pub unavailable: Option<String>,
    /// The worktree root.
    pub workdir: Option<String>,
    /// The commit HEAD points at.
    pub head: Option<String>,
    /// The branch HEAD names, when not detached.
    pub branch: Option<String>,
    /// True when no tracked file differs from HEAD and nothing untracked (and not ignored) exists.
    pub clean: bool,
    /// Tracked files that differ from HEAD, with their git status.
    pub dirty: Vec<DirtyFile>,
    /// Untracked, not ignored files.
    pub untracked: Vec<String>,
    /// `sha256:` over every dirty and untracked path, status and current content digest, sorted by path; `None`
    /// when clean.
    pub dirty_digest: Option<String>,
}

/// A file that differs from HEAD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirtyFile {
    /// Path relative to the worktree.
    pub path: String,
    /// Git status flags, for example `WT_MODIFIED`.
    pub status: String,
}

impl GitState {
    /// Reads the repository containing `dir` (searching upwards).
    pub fn of(dir: &Path) -> Self {
        match read_git(dir) {
            Ok(state) => state,
            Err(reason) => GitState {
                available: false,
                unavailable: Some(reason),
                workdir: None,
                head: None,
                branch: None,
                clean: false,
                dirty: Vec::new(),
                untracked: Vec::new(),
                dirty_digest: None,
            },
        }
    }
}

fn read_git(dir: &Path) -> Result<GitState, String> {
    let repo = git2::Repository::discover(dir)
        .map_err(|e| format!("no git repository at or above {}: {}", dir.display(), e.message()))?;
    let workdir = repo.workdir().ok_or("the repository is bare (no worktree)")?.to_owned();
    let head_ref = repo.head().map_err(|e| format!("HEAD is unreadable: {}", e.message()))?;
    let head = head_ref.peel_to_commit().map(|c| c.id().to_string()).ok();
    let branch = if head_ref.is_branch() { head_ref.shorthand().ok().map(str::to_owned) } else { None };

    let mut options = git2::StatusOptions::new();
    options.include_untracked(true).include_ignored(false).recurse_untracked_dirs(true);
    let statuses =
        repo.statuses(Some(&mut options)).map_err(|e| format!("git status failed: {}", e.message()))?;
    let mut dirty = Vec::new();
    let mut untracked = Vec::new();
    for entry in statuses.iter() {
        let Ok(path) = entry.path().map(str::to_owned) else { continue };
        let status = entry.status();
        if status == git2::Status::WT_NEW {
            untracked.push(path);
        } else if !status.is_empty() && !status.contains(git2::Status::IGNORED) {
            dirty.push(DirtyFile { path, status: format!("{status:?}") });
        }
    }
    dirty.sort_by(|a, b| a.path.cmp(&b.path));
    untracked.sort();
    let clean = dirty.is_empty() && untracked.is_empty();
    let dirty_digest = (!clean).then(|| dirty_set_digest(&workdir, &dirty, &untracked));
    Ok(GitState {
        available: true,
        unavailable: None,
        workdir: Some(workdir.display().to_string()),
        head,
        branch,
        clean,
        dirty,
        untracked,
        dirty_digest,
    })
}

fn dirty_set_digest(workdir: &Path, dirty: &[DirtyFile], untracked: &[String]) -> String {
    let mut lines: Vec<String> = dirty
        .iter()
        .map(|f| (f.path.as_str(), f.status.as_str()))
        .chain(untracked.iter().map(|p| (p.as_str(), "WT_NEW")))
        .map(|(path, status)| {
            let content = std::fs::read(workdir.join(path))
                .map_or_else(|_| "absent".to_owned(), |bytes| sha256_hex(&bytes));
            format!("{path}\t{status}\t{content}")
        })
        .collect();
    lines.sort();
    format!("sha256:{}", sha256_hex(lines.join("\n").as_bytes()))
}

/// The CPU's name as the kernels saw it: with a cap below AVX-512 in force (`SCIFACT_AUDIT_SIMD`), the name says
/// so, since the latency measured beside it is then not this CPU's as it ships.
fn with_kernel_cap(brand: Option<String>, cap: Option<semantic_memory::SimdCap>) -> Option<String> {
    match cap {
        Some(cap) if cap < semantic_memory::SimdCap::Avx512 => {
            let name = cap.name();
            let var = semantic_memory::SIMD_CAP_VAR;
            Some(format!(
                "{} [kernels capped at {name} by {var}]",
                brand.as_deref().unwrap_or("an unnamed CPU")
            ))
        }
        _ => brand,
    }
}

/// The host, as far as it can be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostIdentity {
    /// OS name, for example `Debian GNU/Linux`.
    pub os: Option<String>,
    /// OS version.
    pub os_version: Option<String>,
    /// Kernel version.
    pub kernel: Option<String>,
    /// CPU architecture.
    pub arch: String,
    /// CPU brand string of the first CPU.
    pub cpu_brand: Option<String>,
    /// Physical cores.
    pub physical_cores: Option<usize>,
    /// Logical CPUs visible to the process.
    pub logical_cores: usize,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// `sha256:` of `/etc/machine-id` (never the id itself), to tell hosts apart without naming them.
    pub machine_id_sha256: Option<String>,
    /// Field name to why it is missing.
    pub unavailable: BTreeMap<String, String>,
    /// The GPU (or the emulator of its kernels) this process's embedder ran on, as the embedder described it;
    /// absent when it ran on the CPU, so a CPU run's receipts keep their shape. Attested: every device gives the
    /// same bits, and verification never depends on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_device: Option<String>,
}

/// The device [`note_embedding_device`] recorded for this process.
static EMBEDDING_DEVICE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Records that this process's embedder runs on `device` (a GPU, described): every [`HostIdentity`] read after
/// it says so.
pub fn note_embedding_device(device: String) {
    if let Ok(mut noted) = EMBEDDING_DEVICE.lock() {
        *noted = Some(device);
    }
}

impl HostIdentity {
    /// Reads the current host.
    pub fn current() -> Self {
        let mut unavailable = BTreeMap::new();
        let mut note = |field: &str, result: Result<String, sysinfo::Error>| match result {
            Ok(value) => Some(value),
            Err(error) => {
                unavailable.insert(field.to_owned(), error.to_string());
                None
            }
        };
        let os = note("os", sysinfo::System::name());
        let os_version = note("os_version", sysinfo::System::long_os_version());
        let kernel = note("kernel", sysinfo::System::kernel_version());
        let physical_cores = match sysinfo::System::physical_core_count() {
            Ok(count) => Some(count),
            Err(error) => {
                unavailable.insert("physical_cores".into(), error.to_string());
                None
            }
        };
        let (cpu_brand, memory_bytes) = match sysinfo::System::new() {
            Ok(mut system) => {
                system.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
                system.refresh_memory();
                let brand = system.cpus().first().map(|cpu| cpu.brand().trim().to_owned());
                if brand.is_none() {
                    unavailable.insert("cpu_brand".into(), "no CPU reported".into());
                }
                (brand, system.total_memory())
            }
            Err(error) => {
                unavailable.insert("cpu_brand".into(), error.to_string());
                unavailable.insert("memory_bytes".into(), error.to_string());
                (None, 0)
            }
        };
        let machine_id = ["/etc/machine-id", "/var/lib/dbus/machine-id"]
            .iter()
            .find_map(|path| std::fs::read_to_string(path).ok())
            .map(|id| id.trim().to_owned())
            .filter(|id| !id.is_empty());
        if machine_id.is_none() {
            unavailable.insert("machine_id_sha256".into(), "no /etc/machine-id or dbus machine-id".into());
        }
        HostIdentity {
            os,
            os_version,
            kernel,
            arch: sysinfo::System::cpu_arch(),
            cpu_brand: with_kernel_cap(cpu_brand, semantic_memory::SimdCap::from_env().ok().flatten()),
            physical_cores,
            logical_cores: std::thread::available_parallelism().map_or(0, usize::from),
            embedding_device: EMBEDDING_DEVICE.lock().ok().and_then(|noted| noted.clone()),
            memory_bytes,
            machine_id_sha256: machine_id.map(|id| format!("sha256:{}", sha256_hex(id.as_bytes()))),
            unavailable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use semantic_memory::SimdCap;

    #[test]
    fn a_kernel_cap_is_named_with_the_cpu() {
        let brand = Some("AMD EPYC".to_owned());
        assert_eq!(with_kernel_cap(brand.clone(), None), brand);
        assert_eq!(with_kernel_cap(brand.clone(), Some(SimdCap::Avx512)), brand);
        assert_eq!(
            with_kernel_cap(brand, Some(SimdCap::Avx2)).as_deref(),
            Some("AMD EPYC [kernels capped at avx2 by SCIFACT_AUDIT_SIMD]")
        );
        assert_eq!(
            with_kernel_cap(None, Some(SimdCap::Portable)).as_deref(),
            Some("an unnamed CPU [kernels capped at portable by SCIFACT_AUDIT_SIMD]")
        );
    }
}
