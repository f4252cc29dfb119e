//! minisign keys and signatures over a bundle's `manifest.json`, compatible with the `minisign` CLI.
//!
//! The trusted comment (covered by the global signature) carries the manifest's digest, so a signature
//! cannot be moved to another manifest even by editing the comment. Key and signature files are parsed
//! strictly before the minisign library sees them: exactly the lines the format has, canonical base64 of
//! exactly the right length, nothing else; and only prehashed signatures verify unless the caller allows
//! legacy ones.

use std::io::Cursor;
use std::path::Path;

use minisign::{KeyPair, PublicKey, SecretKey, SecretKeyBox, SignatureBox};

use crate::canonical::sha256_tagged;
use crate::error::{Error, Result};

/// The prefix of the trusted comment; the manifest digest follows.
pub const TRUSTED_COMMENT_PREFIX: &str = "scifact-audit bundle manifest ";
/// The largest key or signature file read (real ones are under 400 bytes).
pub const MAX_KEY_FILE_BYTES: u64 = 4096;

const UNTRUSTED: &str = "untrusted comment: ";
const TRUSTED: &str = "trusted comment: ";

fn minisign_error(error: impl std::fmt::Display) -> Error {
    Error::Minisign(error.to_string())
}

/// A public key, with the id minisign shows for it.
#[derive(Clone)]
pub struct VerifyingKey {
    key: PublicKey,
    keynum: [u8; 8],
}

impl std::fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VerifyingKey({})", self.id())
    }
}

impl VerifyingKey {
    /// The key id as minisign prints it (16 uppercase hex digits), for comparing with a copy of the key
    /// obtained elsewhere.
    pub fn id(&self) -> String {
        key_id(&self.keynum)
    }
}

fn key_id(keynum: &[u8; 8]) -> String {
    format!("{:016X}", u64::from_le_bytes(*keynum))
}

/// Generates a key pair and writes both files (refusing to overwrite either). With `password`, the secret
/// key is encrypted (scrypt, as the CLI does); without, it is stored unencrypted.
///
/// # Errors
/// [`Error::Usage`] when a file exists, [`Error::Minisign`] / [`Error::Input`] otherwise.
pub fn keygen(secret_key: &Path, public_key: &Path, password: Option<String>) -> Result<()> {
    for path in [secret_key, public_key] {
        if path.symlink_metadata().is_ok() {
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
    safe_fs::write_new(secret_key, secret_box.to_string().as_bytes()).map_err(Error::file)?;
    safe_fs::write_new(public_key, public_box.to_string().as_bytes()).map_err(Error::file)?;
    // The public key is meant to be read by anyone; the secret key stays private to its owner.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(public_key, std::fs::Permissions::from_mode(0o644))
            .map_err(|source| Error::file(safe_fs::Error::Io { path: public_key.to_path_buf(), source }))?;
    }
    Ok(())
}

/// Reads a secret key file (ours or the `minisign` CLI's). An unencrypted key needs no password; an encrypted
/// one uses `password`, or prompts when it is `None`.
///
/// # Errors
/// [`Error::Input`] / [`Error::Minisign`] (wrong password, damaged key).
pub fn load_secret_key(path: &Path, password: Option<String>) -> Result<SecretKey> {
    let bytes = safe_fs::read_regular(path, MAX_KEY_FILE_BYTES).map_err(Error::file)?;
    let text = String::from_utf8(bytes).map_err(|e| Error::input(path, e))?;
    let unencrypted = SecretKeyBox::from_string(&text).and_then(SecretKey::from_unencrypted_box);
    match unencrypted {
        Ok(key) => Ok(key),
        Err(_) if let Some(key) = cli_unencrypted_key(&text) => Ok(key),
        Err(_) => SecretKeyBox::from_string(&text)
            .and_then(|b| SecretKey::from_box(b, password))
            .map_err(|e| Error::Minisign(format!("{}: {e}", path.display()))),
    }
}

/// Returns true if and only if the secret key file at `path` is encrypted (needs a password).
///
/// # Errors
/// [`Error::Input`] when it cannot be read or is not a minisign secret key.
pub fn secret_key_is_encrypted(path: &Path) -> Result<bool> {
    let bytes = safe_fs::read_regular(path, MAX_KEY_FILE_BYTES).map_err(Error::file)?;
    let text = String::from_utf8(bytes).map_err(|e| Error::input(path, e))?;
    let encoded = text.lines().nth(1).map(str::trim).unwrap_or("");
    let decoded = decode_base64(encoded).ok_or_else(|| Error::input(path, "not a minisign secret key"))?;
    // Bytes 2..4 name the key derivation: "Sc" (scrypt) when encrypted, two zero bytes when not.
    match decoded.get(2..4) {
        Some(b"Sc") => Ok(true),
        Some([0, 0]) => Ok(false),
        _ => Err(Error::input(path, "not a minisign secret key")),
    }
}

/// The `minisign` CLI (0.11, `-W`) writes unencrypted secret keys with an all-zero checksum, which the
/// library's loader calls corrupted. Such a key is read field by field; a damaged one still fails later,
/// when the signature does not verify against its public key.
fn cli_unencrypted_key(text: &str) -> Option<SecretKey> {
    let encoded = text.lines().nth(1)?.trim();
    let bytes = decode_base64(encoded)?;
    let unencrypted = bytes.get(2..4) == Some(&[0, 0][..]);
    let zero_checksum = bytes.len() == 158 && bytes[126..].iter().all(|b| *b == 0);
    if unencrypted && zero_checksum { SecretKey::from_bytes(&bytes).ok() } else { None }
}

/// Canonical base64 (standard alphabet, `=` padding exactly as needed, unused bits zero), or `None`.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let bytes = text.as_bytes();
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return None;
    }
    let padding = bytes.iter().rev().take_while(|c| **c == b'=').count();
    if padding > 2 {
        return None;
    }
    let digits = &bytes[..bytes.len() - padding];
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
    // Leftover bits must be zero, or two encodings would decode to the same bytes.
    if buffer & ((1 << bits) - 1) != 0 {
        return None;
    }
    Some(out)
}

/// The lines of a small text file: every line ends with `\n` except perhaps the last, no `\r`, no empty line.
fn strict_lines(text: &str, expected: usize, what: &str) -> std::result::Result<Vec<String>, String> {
    if text.contains('\r') {
        return Err(format!("{what} contains a carriage return"));
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    let lines: Vec<String> = body.split('\n').map(str::to_owned).collect();
    if lines.len() != expected || lines.iter().any(String::is_empty) {
        return Err(format!("{what} has {} lines, the format has {expected}", lines.len()));
    }
    Ok(lines)
}

/// Reads a public key file strictly: the CLI's two lines (`untrusted comment: ...`, then base64 of the
/// 42-byte key), or one bare base64 line.
///
/// # Errors
/// [`Error::Input`] naming what is wrong.
pub fn load_public_key(path: &Path) -> Result<VerifyingKey> {
    let bytes = safe_fs::read_regular(path, MAX_KEY_FILE_BYTES).map_err(Error::file)?;
    let text = String::from_utf8(bytes).map_err(|e| Error::input(path, e))?;
    parse_public_key(&text).map_err(|reason| Error::input(path, reason))
}

fn parse_public_key(text: &str) -> std::result::Result<VerifyingKey, String> {
    let encoded = match strict_lines(text, 2, "the public key file") {
        Ok(lines) if lines[0].starts_with(UNTRUSTED) => lines[1].clone(),
        Ok(_) => return Err("the first line of the public key file is not an untrusted comment".into()),
        Err(two) => strict_lines(text, 1, "the public key file").map_err(|_| two)?.remove(0),
    };
    let decoded = decode_base64(&encoded).ok_or("the public key is not canonical base64")?;
    // A minisign secret key box (ours or the CLI's) is 158 bytes: "Ed", a KDF and checksum algorithm, then the
    // key. Named as what it is, since passing the wrong file of a pair is the usual mistake.
    if decoded.len() == 158 && &decoded[..2] == b"Ed" {
        return Err(
            "this is a secret key, not a public key: pass the public key file (keygen's --public-key, *.pub); \
             never hand the secret key to a verifier"
                .into(),
        );
    }
    if decoded.len() != 42 || &decoded[..2] != b"Ed" {
        return Err(format!(
            "the public key decodes to {} bytes, not an Ed25519 minisign key (42)",
            decoded.len()
        ));
    }
    let key = PublicKey::from_bytes(&decoded).map_err(|e| e.to_string())?;
    let mut keynum = [0u8; 8];
    keynum.copy_from_slice(&decoded[2..10]);
    Ok(VerifyingKey { key, keynum })
}

/// Signs `data`, prehashed, with the trusted comment naming its digest; returns the signature file's text.
///
/// # Errors
/// [`Error::Minisign`].
pub fn sign_bytes(secret_key: &SecretKey, data: &[u8]) -> Result<String> {
    sign_with_comment(secret_key, data, &format!("{TRUSTED_COMMENT_PREFIX}{}", sha256_tagged(data)))
}

/// Checks the signature beside a signed statement (`<statement>.minisig`) over `bytes`, the statement's content:
/// made by `key`, with the trusted comment [`sign_document`] writes for `what`. Returns the evidence, or why not.
pub(crate) fn verify_statement(
    statement: &Path,
    bytes: &[u8],
    key: &VerifyingKey,
    what: &str,
) -> std::result::Result<String, String> {
    let signature = statement.with_file_name(format!(
        "{}.minisig",
        statement.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    let text = safe_fs::read_regular(&signature, MAX_KEY_FILE_BYTES).map_err(|e| e.to_string())?;
    let text = String::from_utf8(text).map_err(|_| "the signature is not UTF-8".to_owned())?;
    let comment = verify_bytes(key, &text, bytes, false).map_err(|e| e.to_string())?;
    let expected = format!("scifact-audit {what} {}", sha256_tagged(bytes));
    if comment == expected {
        Ok(format!("signed by key id {}; trusted comment names the statement's sha256", key.id()))
    } else {
        Err(format!("trusted comment {comment:?}, expected {expected:?}"))
    }
}

/// Signs `data`, prehashed, with the trusted comment `scifact-audit <what> sha256:<hex>` (e.g. `what` =
/// `preregistration`), for documents published on their own before the bundle exists.
///
/// # Errors
/// [`Error::Minisign`].
pub fn sign_document(secret_key: &SecretKey, data: &[u8], what: &str) -> Result<String> {
    sign_with_comment(secret_key, data, &format!("scifact-audit {what} {}", sha256_tagged(data)))
}

fn sign_with_comment(secret_key: &SecretKey, data: &[u8], comment: &str) -> Result<String> {
    let public = PublicKey::from_secret_key(secret_key).map_err(minisign_error)?;
    let signature = minisign::sign(
        Some(&public),
        secret_key,
        Cursor::new(data),
        Some(comment),
        Some("signature from scifact-audit"),
    )
    .map_err(minisign_error)?;
    Ok(signature.into_string())
}

/// The public key of `secret_key`, for checking a signature this process made or found.
///
/// # Errors
/// [`Error::Minisign`].
pub fn public_key_of(secret_key: &SecretKey) -> Result<VerifyingKey> {
    let key = PublicKey::from_secret_key(secret_key).map_err(minisign_error)?;
    let mut keynum = [0u8; 8];
    keynum.copy_from_slice(key.keynum());
    Ok(VerifyingKey { key, keynum })
}

/// Verifies a signature file's text over `data` and returns its trusted comment. The file must have exactly
/// the four lines of the format; a legacy (not prehashed) signature is refused unless `allow_legacy`.
///
/// # Errors
/// [`Error::Minisign`] naming what failed: the format, the algorithm, the key id, the signature or the
/// comment's signature.
pub fn verify_bytes(key: &VerifyingKey, signature: &str, data: &[u8], allow_legacy: bool) -> Result<String> {
    let lines = strict_lines(signature, 4, "the signature file").map_err(Error::Minisign)?;
    if !lines[0].starts_with(UNTRUSTED) || !lines[2].starts_with(TRUSTED) {
        return Err(Error::Minisign("the signature file's comment lines are malformed".into()));
    }
    let signature_bytes = decode_base64(&lines[1])
        .filter(|bytes| bytes.len() == 74)
        .ok_or_else(|| Error::Minisign("the signature is not 74 bytes of canonical base64".into()))?;
    if decode_base64(&lines[3]).is_none_or(|bytes| bytes.len() != 64) {
        return Err(Error::Minisign("the comment signature is not 64 bytes of canonical base64".into()));
    }
    match &signature_bytes[..2] {
        b"ED" => {}
        b"Ed" if allow_legacy => {}
        b"Ed" => {
            return Err(Error::Minisign(
                "a legacy (not prehashed) signature; pass --allow-legacy-signature to accept it".into(),
            ));
        }
        other => return Err(Error::Minisign(format!("unknown signature algorithm {other:?}"))),
    }
    let mut keynum = [0u8; 8];
    keynum.copy_from_slice(&signature_bytes[2..10]);
    if keynum != key.keynum {
        return Err(Error::Minisign(format!(
            "signed by key id {}, but the public key given is {}",
            key_id(&keynum),
            key.id()
        )));
    }
    let parsed = SignatureBox::from_string(signature).map_err(minisign_error)?;
    minisign::verify(&key.key, &parsed, Cursor::new(data), true, false, allow_legacy)
        .map_err(minisign_error)?;
    parsed.trusted_comment().map_err(minisign_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_canonical_only() {
        assert_eq!(decode_base64("TWFu"), Some(b"Man".to_vec()));
        assert_eq!(decode_base64("TWE="), Some(b"Ma".to_vec()));
        assert_eq!(decode_base64("TQ=="), Some(b"M".to_vec()));
        for bad in ["", "TWE", "TWF=", "TR==", "TQ===", "T Q==", "TQ=A", "TWFu\n"] {
            assert_eq!(decode_base64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_published_key_parses_and_has_the_documented_id() {
        let text = "untrusted comment: minisign public key: AA426A6793DD26C4\nRWTEJt2TZ2pCqkClqa6i4l0dGskuiscByVt1i/AFR1R6WzjWC9T/PSsZ\n";
        assert_eq!(parse_public_key(text).map(|k| k.id()).ok().as_deref(), Some("AA426A6793DD26C4"));
        let bare = "RWTEJt2TZ2pCqkClqa6i4l0dGskuiscByVt1i/AFR1R6WzjWC9T/PSsZ";
        assert!(parse_public_key(bare).is_ok());
        for bad in [
            format!("{text}extra line\n"),
            text.replace('\n', "\r\n"),
            format!("\n{text}"),
            text.replace("untrusted comment", "comment"),
            text.replace("PSsZ", "PSs="),
        ] {
            assert!(parse_public_key(&bad).is_err(), "{bad:?}");
        }
    }
}
