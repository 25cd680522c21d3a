//! A tiny harness for the operational tests (disk full, SIGTERM, attacks):
//! starts the real binary on a temporary data directory and a free port and
//! talks to it over std::net. Independent of the protocol test helpers.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn next_offset(&self) -> u64 {
        let v = self.header("stream-next-offset").expect("Stream-Next-Offset");
        v.rsplit('_').next().unwrap().parse().unwrap()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
}

/// Renders a request with `Content-Length` (and `Connection: close` if asked).
pub fn render(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8], close: bool) -> Vec<u8> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    if close {
        req.push_str("Connection: close\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT") {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    let mut out = req.into_bytes();
    out.extend_from_slice(body);
    out
}

/// Reads one response from a keep-alive connection (Content-Length or no body).
pub fn read_response(s: &mut TcpStream, head_only: bool) -> std::io::Result<Resp> {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed before a response"));
        }
        raw.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&raw).to_string();
    let mut lines = head.trim_end().split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len = headers.iter().find(|(k, _)| k == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0; if head_only { 0 } else { len }];
    s.read_exact(&mut body)?;
    Ok(Resp { status, headers, body })
}

/// One request on its own connection.
pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(15)))?;
    s.write_all(&render(method, path, headers, body, true))?;
    read_response(&mut s, method == "HEAD")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub struct Server {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Server {
    /// Starts `sluice serve` with data in `data`, 2 shards, plus `extra` flags.
    pub fn start(data: &Path, extra: &[&str]) -> Server {
        Server::start_with_log(data, &data.with_extension("log"), extra)
    }

    /// As [`Server::start`], with the server's output going to `log`.
    pub fn start_with_log(data: &Path, log: &Path, extra: &[&str]) -> Server {
        let log = log.to_path_buf();
        for _ in 0..5 {
            let port = free_port();
            let out = std::fs::File::create(&log).unwrap();
            let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
                .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--shards", "2", "--data-dir"])
                .arg(data)
                .args(extra)
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .stdin(Stdio::null())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    if text.contains("address already in use") {
                        break;
                    }
                    panic!("server exited at start ({status}): {text}");
                }
                if http(port, "GET", "/v1/healthz", &[], b"").is_ok_and(|r| r.status == 200) {
                    return Server { child, port, log };
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("server did not start within 15 s");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("no free port");
    }

    pub fn req(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        http(self.port, method, path, headers, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}; server output:\n{}", self.output()))
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        s
    }

    pub fn create(&self, path: &str, content_type: &str) {
        let r = self.req("PUT", path, &[("Content-Type", content_type)], b"");
        assert!(r.status == 201 || r.status == 200, "PUT {path}: {} {}", r.status, r.text());
    }

    /// The whole stream and its tail (follows Stream-Next-Offset).
    pub fn read_all(&self, path: &str) -> (Vec<u8>, u64) {
        let mut out = Vec::new();
        let mut at = 0u64;
        loop {
            let r = self.req("GET", &format!("{path}?offset=0000000000000000_{at:016}"), &[], b"");
            assert_eq!(r.status, 200, "GET {path}: {}", r.text());
            out.extend_from_slice(&r.body);
            at = r.next_offset();
            if r.header("stream-up-to-date") == Some("true") {
                return (out, at);
            }
        }
    }

    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Sends SIGTERM and waits up to `limit` for the exit.
    pub fn sigterm(mut self, limit: Duration) -> (ExitStatus, Duration) {
        let t = Instant::now();
        let ok = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(ok.success());
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, t.elapsed());
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                panic!("server did not exit within {limit:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
