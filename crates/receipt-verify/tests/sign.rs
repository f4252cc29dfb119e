//! Keys and signatures: round trip, wrong key, edited trusted comment, encrypted keys.

use receipt_verify::{keygen, load_public_key, load_secret_key, sign_bytes, verify_bytes};

#[test]
fn a_signature_verifies_only_with_its_key_and_its_comment() {
    let dir = tempfile::tempdir().unwrap();
    let (sk, pk) = (dir.path().join("a.sec"), dir.path().join("a.pub"));
    keygen(&sk, &pk, None).unwrap();
    let secret = load_secret_key(&sk, None).unwrap();
    let public = load_public_key(&pk).unwrap();
    let data = b"{\"_type\": \"statement\"}\n";
    let signature = sign_bytes(&secret, data).unwrap();
    let comment = verify_bytes(&public, &signature, data).unwrap();
    assert!(comment.starts_with("scifact-audit bundle manifest sha256:"), "{comment}");

    assert!(verify_bytes(&public, &signature, b"other data").is_err(), "other data");
    let edited = signature.replace("scifact-audit bundle manifest", "scifact-audit bundle manifest!");
    assert!(verify_bytes(&public, &edited, data).is_err(), "edited trusted comment");

    let (sk2, pk2) = (dir.path().join("b.sec"), dir.path().join("b.pub"));
    keygen(&sk2, &pk2, None).unwrap();
    assert!(verify_bytes(&load_public_key(&pk2).unwrap(), &signature, data).is_err(), "wrong key");
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
    verify_bytes(&load_public_key(&pk).unwrap(), &signature, b"x").unwrap();
}
