//! Keys and signatures: round trip, wrong key, edited trusted comment, encrypted keys.

use receipt_verify::{
    keygen, load_public_key, load_secret_key, public_key_of, secret_key_is_encrypted, sign_bytes,
    verify_bytes,
};

#[test]
fn a_signature_verifies_only_with_its_key_and_its_comment() {
    let dir = tempfile::tempdir().unwrap();
    let (sk, pk) = (dir.path().join("a.sec"), dir.path().join("a.pub"));
    keygen(&sk, &pk, None).unwrap();
    let secret = load_secret_key(&sk, None).unwrap();
    let public = load_public_key(&pk).unwrap();
    let data = b"{\"_type\": \"statement\"}\n";
    let signature = sign_bytes(&secret, data).unwrap();
    let comment = verify_bytes(&public, &signature, data, false).unwrap();
    assert!(comment.starts_with("scifact-audit bundle manifest sha256:"), "{comment}");

    assert!(verify_bytes(&public, &signature, b"other data", false).is_err(), "other data");
    let edited = signature.replace("scifact-audit bundle manifest", "scifact-audit bundle manifest!");
    assert!(verify_bytes(&public, &edited, data, false).is_err(), "edited trusted comment");

    let (sk2, pk2) = (dir.path().join("b.sec"), dir.path().join("b.pub"));
    keygen(&sk2, &pk2, None).unwrap();
    let wrong =
        verify_bytes(&load_public_key(&pk2).unwrap(), &signature, data, false).unwrap_err().to_string();
    assert!(wrong.contains(&format!("signed by key id {}", public.id())), "{wrong}");
    assert_eq!(public_key_of(&secret).unwrap().id(), public.id());
    assert!(keygen(&sk2, &pk2, None).is_err(), "keys are never overwritten");
}

#[test]
fn an_encrypted_key_needs_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let (sk, pk) = (dir.path().join("e.sec"), dir.path().join("e.pub"));
    keygen(&sk, &pk, Some("hunter2".into())).unwrap();
    assert!(load_secret_key(&sk, Some("wrong".into())).is_err());
    let secret = load_secret_key(&sk, Some("hunter2".into())).unwrap();
    let signature = sign_bytes(&secret, b"x").unwrap();
    verify_bytes(&load_public_key(&pk).unwrap(), &signature, b"x", false).unwrap();
}

#[test]
fn signature_and_key_files_are_parsed_strictly() {
    let dir = tempfile::tempdir().unwrap();
    let (sk, pk) = (dir.path().join("a.sec"), dir.path().join("a.pub"));
    keygen(&sk, &pk, None).unwrap();
    assert!(!secret_key_is_encrypted(&sk).unwrap());
    let public = load_public_key(&pk).unwrap();
    let signature = sign_bytes(&load_secret_key(&sk, None).unwrap(), b"x").unwrap();
    verify_bytes(&public, &signature, b"x", false).unwrap();
    let lines: Vec<&str> = signature.lines().collect();
    for (what, bad) in [
        ("an extra line", format!("{signature}extra\n")),
        ("a missing line", format!("{}\n{}\n{}\n", lines[0], lines[1], lines[2])),
        ("carriage returns", signature.replace('\n', "\r\n")),
        ("a blank line", format!("{}\n\n{}\n{}\n{}\n", lines[0], lines[1], lines[2], lines[3])),
        ("a non-canonical signature", signature.replace(lines[1], &format!("{} ", lines[1]))),
        ("no untrusted comment", signature.replace("untrusted comment: ", "comment: ")),
    ] {
        assert!(verify_bytes(&public, &bad, b"x", false).is_err(), "{what} accepted");
    }
    let key_text = std::fs::read_to_string(&pk).unwrap();
    for (what, bad) in [
        ("an extra line", format!("{key_text}# note\n")),
        (
            "a truncated key",
            key_text.replacen(key_text.lines().nth(1).unwrap(), &key_text.lines().nth(1).unwrap()[..40], 1),
        ),
    ] {
        let path = dir.path().join("bad.pub");
        std::fs::write(&path, bad).unwrap();
        assert!(load_public_key(&path).is_err(), "{what} accepted");
    }
    let fifo = dir.path().join("fifo.pub");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    assert!(load_public_key(&fifo).is_err(), "a FIFO key is refused without blocking");
    let (esk, epk) = (dir.path().join("e.sec"), dir.path().join("e.pub"));
    keygen(&esk, &epk, Some("pw".into())).unwrap();
    assert!(secret_key_is_encrypted(&esk).unwrap());
}
