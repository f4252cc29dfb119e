//! Keys as a person makes and uses them at a terminal: the password is asked without echo (under a
//! pseudo-terminal, as a person's shell runs it), scripts give it by file, the public key is world-readable, and a
//! secret key written inside a git work tree draws a warning.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{path_str, scifact_audit};

/// Runs the binary with `args` on a new pseudo-terminal as its controlling terminal, answering each prompt of
/// `answers` (the text it waits for, the line it types) in turn; everything the terminal showed, and the exit
/// code.
fn at_a_terminal(args: &[&str], answers: &[(&str, &str)]) -> (String, Option<i32>) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: two valid out-pointers; no name, settings or window size.
    let opened = unsafe {
        libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null())
    };
    assert_eq!(opened, 0, "openpty failed");
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut command = Command::new(env!("CARGO_BIN_EXE_scifact-audit"));
    command
        .args(args)
        .env_remove("MINISIGN_PASSWORD")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    // SAFETY: setsid and the ioctl are async-signal-safe; they make the terminal on stdin the child's own.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    drop(command);
    let mut terminal = std::fs::File::from(master);
    let mut screen = Vec::new();
    let mut buffer = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(60);
    for (prompt, line) in answers {
        while !String::from_utf8_lossy(&screen).contains(prompt) {
            assert!(
                Instant::now() < deadline,
                "no prompt {prompt:?}; the terminal showed {:?}",
                String::from_utf8_lossy(&screen)
            );
            let n = terminal.read(&mut buffer).unwrap_or(0);
            assert!(n > 0, "the terminal closed before {prompt:?}: {:?}", String::from_utf8_lossy(&screen));
            screen.extend_from_slice(&buffer[..n]);
        }
        // Asked: the answer is typed only now, as a person types after the prompt shows.
        std::thread::sleep(Duration::from_millis(50));
        terminal.write_all(format!("{line}\n").as_bytes()).unwrap();
        // The next prompt is searched for in what the terminal shows after this answer.
        screen.clear();
    }
    let mut rest = Vec::new();
    loop {
        match terminal.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => rest.extend_from_slice(&buffer[..n]),
        }
    }
    let status = child.wait().unwrap();
    (String::from_utf8_lossy(&rest).into_owned(), status.code())
}

#[test]
fn keygen_asks_for_the_password_without_echo_and_the_key_opens_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = (dir.path().join("k.key"), dir.path().join("k.pub"));
    let args = ["keygen", "--secret-key", path_str(&secret), "--public-key", path_str(&public)];
    let (after, code) = at_a_terminal(
        &args,
        &[("Password for the new secret key: ", "hunter2"), ("Password again: ", "hunter2")],
    );
    assert_eq!(code, Some(0), "{after}");
    assert!(!after.contains("hunter2"), "the password was echoed: {after:?}");
    assert!(after.contains("wrote "), "{after:?}");
    let key = receipt_verify::load_secret_key(&secret, Some("hunter2".to_owned()));
    assert!(key.is_ok(), "the key does not open with the password typed");
    assert!(receipt_verify::load_secret_key(&secret, Some("hunter3".to_owned())).is_err());
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&public), 0o644, "the public key is meant to be read by anyone");
    assert_eq!(mode(&secret) & 0o077, 0, "the secret key is its owner's alone");

    // Signing asks for it the same way, without echo.
    let manifest = dir.path().join("bundle");
    std::fs::create_dir(&manifest).unwrap();
    std::fs::write(manifest.join("manifest.json"), b"{}").unwrap();
    let args = ["sign", "--bundle-dir", path_str(&manifest), "--secret-key", path_str(&secret)];
    let prompt = format!("Password for {}: ", secret.display());
    let (after, code) = at_a_terminal(&args, &[(&prompt, "hunter2")]);
    assert_eq!(code, Some(0), "{after}");
    assert!(!after.contains("hunter2"), "the password was echoed: {after:?}");
    assert!(manifest.join("manifest.json.minisig").exists());
}

#[test]
fn scripts_give_the_password_by_file_and_a_key_in_a_work_tree_is_warned_of() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "correct horse\n").unwrap();
    let (secret, public) = (dir.path().join("k.key"), dir.path().join("k.pub"));
    let output = scifact_audit(
        &[
            "keygen",
            "--secret-key",
            path_str(&secret),
            "--public-key",
            path_str(&public),
            "--password-file",
            path_str(&password),
        ],
        "",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("is inside the git work tree"), "{stderr}");
    assert!(receipt_verify::load_secret_key(&secret, Some("correct horse".to_owned())).is_ok());

    let bundle = dir.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    std::fs::write(bundle.join("manifest.json"), b"{}").unwrap();
    let output = scifact_audit(
        &[
            "sign",
            "--bundle-dir",
            path_str(&bundle),
            "--secret-key",
            path_str(&secret),
            "--password-file",
            path_str(&password),
        ],
        "",
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    // The secret key given where the public one belongs is named for what it is.
    let output = scifact_audit(
        &["verify-bundle", "--bundle-dir", path_str(&bundle), "--public-key", path_str(&secret)],
        "",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("this is a secret key, not a public key"), "{stderr}");

    // Outside a work tree: no warning.
    let elsewhere = tempfile::tempdir().unwrap();
    let output = scifact_audit(
        &[
            "keygen",
            "--secret-key",
            path_str(&elsewhere.path().join("k.key")),
            "--public-key",
            path_str(&elsewhere.path().join("k.pub")),
            "--without-password",
        ],
        "",
    );
    assert!(output.status.success());
    assert!(!String::from_utf8_lossy(&output.stderr).contains("work tree"));
}
