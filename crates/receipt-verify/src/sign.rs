//! minisign keys and signatures over a bundle's `manifest.json`, compatible with the `minisign` CLI.
//!
//! The trusted comment (covered by the global signature) carries the manifest's digest, so a signature
//! cannot be moved to another manifest even by editing the comment.

use std::io::Cursor;
use std::path::Path;

use minisign::{KeyPair, PublicKey, PublicKeyBox, SecretKey, SecretKeyBox, SignatureBox};

use crate::canonical::sha256_tagged;
use crate::error::{Error, Result};

/// The signature file beside the manifest.
pub const SIGNATURE_FILE: &str = "manifest.json.minisig";
/// The prefix of the trusted comment; the manifest digest follows.
pub const TRUSTED_COMMENT_PREFIX: &str = "scifact-audit bundle manifest ";

fn minisign_error(error: impl std::fmt::Display) -> Error {
    Error::Minisign(error.to_string())
}

/// Generates a key pair and writes both files (refusing to overwrite either). With `password`, the secret
/// key is encrypted (scrypt, as the CLI does); without, it is stored unencrypted.
///
/// # Errors
/// [`Error::Usage`] when a file exists, [`Error::Minisign`] / [`Error::Input`] otherwise.
pub fn keygen(secret_key: &Path, public_key: &Path, password: Option<String>) -> Result<()> {
    for path in [secret_key, public_key] {
        if path.exists() {
            return Err(Error::Usage(format!("{} exists; keys are never overwritten", path.display())));
        }
    }
    let pair = match password {
        Some(password) => KeyPair::generate_encrypted_keypair(Some(password)),
        None => KeyPair::generate_unencrypted_keypair(),
    }
    .map_err(minisign_error)?;
    let secret_box = pair.sk.to_box(Some("scifact-audit secret key")).map_err(minisign_error)?;
    let public_box = pair.pk.to_box().map_err(minisign_error)?;
    embedding::write_atomically(secret_key, secret_box.to_string().as_bytes())
        .map_err(|e| Error::input(secret_key, e))?;
    embedding::write_atomically(public_key, public_box.to_string().as_bytes())
        .map_err(|e| Error::input(public_key, e))?;
    Ok(())
}

/// Reads a secret key file (ours or the `minisign` CLI's). An unencrypted key needs no password; an encrypted
/// one uses `password`, or prompts when it is `None`.
///
/// # Errors
/// [`Error::Input`] / [`Error::Minisign`] (wrong password, damaged key).
pub fn load_secret_key(path: &Path, password: Option<String>) -> Result<SecretKey> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::input(path, e))?;
    let unencrypted = SecretKeyBox::from_string(&text).and_then(SecretKey::from_unencrypted_box);
    match unencrypted {
        Ok(key) => Ok(key),
        Err(_) => SecretKeyBox::from_string(&text)
            .and_then(|b| SecretKey::from_box(b, password))
            .map_err(|e| Error::Minisign(format!("{}: {e}", path.display()))),
    }
}

/// Reads a public key file (two lines, as the CLI writes) or a bare base64 key.
///
/// # Errors
/// [`Error::Input`] / [`Error::Minisign`].
pub fn load_public_key(path: &Path) -> Result<PublicKey> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::input(path, e))?;
    let trimmed = text.trim();
    if trimmed.lines().count() == 1 {
        return PublicKey::from_base64(trimmed)
            .map_err(|e| Error::Minisign(format!("{}: {e}", path.display())));
    }
    PublicKeyBox::from_string(&text)
        .and_then(PublicKeyBox::into_public_key)
        .map_err(|e| Error::Minisign(format!("{}: {e}", path.display())))
}

/// Signs `data`, with the trusted comment naming its digest; returns the signature file's text.
///
/// # Errors
/// [`Error::Minisign`].
pub fn sign_bytes(secret_key: &SecretKey, data: &[u8]) -> Result<String> {
    let comment = format!("{TRUSTED_COMMENT_PREFIX}{}", sha256_tagged(data));
    let public = PublicKey::from_secret_key(secret_key).map_err(minisign_error)?;
    let signature = minisign::sign(
        Some(&public),
        secret_key,
        Cursor::new(data),
        Some(&comment),
        Some("signature from scifact-audit"),
    )
    .map_err(minisign_error)?;
    Ok(signature.into_string())
}

/// Verifies a signature over `data` (prehashed or legacy) and returns its trusted comment.
///
/// # Errors
/// [`Error::Minisign`] when the signature, the key or the comment's signature does not verify.
pub fn verify_bytes(public_key: &PublicKey, signature: &str, data: &[u8]) -> Result<String> {
    let signature = SignatureBox::from_string(signature).map_err(minisign_error)?;
    minisign::verify(public_key, &signature, Cursor::new(data), true, false, true).map_err(minisign_error)?;
    signature.trusted_comment().map_err(minisign_error)
}
