//! A minimal HTTP/1.1 server on 127.0.0.1 for tests: one thread, `Connection: close`, a handler per request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

/// A request as the handler sees it.
pub(crate) struct Request {
    pub(crate) path: String,
    pub(crate) body: Vec<u8>,
}

/// Starts a server answering every request with `handler`'s (status, content type, body); returns its base
/// URL. The thread lives as long as the test process.
pub(crate) fn serve(handler: impl Fn(&Request) -> (u16, &'static str, Vec<u8>) + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let (status, content_type, payload) = handler(&Request { path, body });
            let head = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                payload.len()
            );
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&payload));
        }
    });
    format!("http://{address}")
}
