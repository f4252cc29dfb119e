//! Archive download: the published md5 admits, anything else needs an explicit accepted sha256.

use std::io::{BufRead, BufReader, Write};

use scifact_eval::{DigestPolicy, Error, NoProgress, fetch_archive, judge_download};

fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    md5::Md5::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Serves `body` to every GET on 127.0.0.1; returns the URL.
fn serve(body: Vec<u8>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/scifact.zip", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let head =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body));
        }
    });
    url
}

#[test]
fn the_published_md5_admits_a_download() {
    let body = b"archive bytes".to_vec();
    let url = serve(body.clone());
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("scifact.zip");
    let policy = fetch_archive(&url, &dest, &md5_hex(&body), None, &NoProgress).unwrap();
    assert_eq!(policy, DigestPolicy::DownloadMatchedPublishedMd5 { md5: md5_hex(&body) });
    assert_eq!(std::fs::read(&dest).unwrap(), body);
}

#[test]
fn another_digest_is_refused_and_nothing_is_written() {
    let url = serve(b"repackaged".to_vec());
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("scifact.zip");
    match fetch_archive(&url, &dest, &"0".repeat(32), None, &NoProgress) {
        Err(Error::Download { reason, .. }) => {
            assert!(reason.contains("--accept-archive-digest sha256:"), "{reason}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!dest.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no partial file left");
}

#[test]
fn an_explicitly_accepted_sha256_admits_and_is_recorded() {
    let body = b"repackaged".to_vec();
    let sha = format!("sha256:{}", scifact_eval::sha256_hex(&body));
    let policy = judge_download("u", &body, &"0".repeat(32), Some(&sha)).unwrap();
    assert_eq!(policy, DigestPolicy::DownloadAcceptedSha256 { sha256: sha });
    let wrong = format!("sha256:{}", "1".repeat(64));
    assert!(judge_download("u", &body, &"0".repeat(32), Some(&wrong)).is_err());
}
