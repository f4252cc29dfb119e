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
        Err(_) if let Some(key) = cli_unencrypted_key(&text) => Ok(key),
        Err(_) => SecretKeyBox::from_string(&text)
            .and_then(|b| SecretKey::from_box(b, password))
            .map_err(|e| Error::Minisign(format!("{}: {e}", path.display()))),
    }
}

/// The `minisign` CLI (0.11, `-W`) writes unencrypted secret keys with an all-zero checksum, which the
/// library's loader calls corrupted. Such a key is read field by field; a damaged one still fails later,
/// when the signature does not verify against its public key.
fn cli_unencrypted_key(text: &str) -> Option<SecretKey> {
    let encoded = text.lines().nth(1)?.trim();
    let bytes = base64_decode(encoded)?;
    let unencrypted = bytes.get(2..4) == Some(&[0, 0][..]);
    let zero_checksum = bytes.len() == 158 && bytes[126..].iter().all(|b| *b == 0);
    if unencrypted && zero_checksum { SecretKey::from_bytes(&bytes).ok() } else { None }
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let digits = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0;
    for c in digits {
        buffer = (buffer << 6) | u32::from(value(*c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    Some(out)
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
