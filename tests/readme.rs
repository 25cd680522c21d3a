//! The README's curl examples run top to bottom, exactly as written, against
//! a fresh server: every `sh` block with a curl command is extracted from
//! README.md and run as one bash script, and any 4xx/5xx answer fails it.

mod common;

use common::{Server, TempDir};
use std::process::Command;

/// The `sh` code blocks of `markdown` that run curl, in order.
fn curl_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(block), "```") => {
                if block.contains("curl ") {
                    blocks.push(std::mem::take(block));
                }
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn readme_curl_examples_run_as_written() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md");
    let blocks = curl_blocks(&readme);
    assert!(blocks.len() >= 2, "the README's API examples were not found");
    // Short live-read limits so the long-poll and SSE examples end quickly.
    let s = Server::start_with(&["--long-poll-timeout", "1s", "--sse-reconnect", "1s"]);
    let script = format!(
        "set -euo pipefail\n\
         curl() {{ echo \"+ curl $*\"; command curl --fail-with-body --silent --show-error --max-time 20 \"$@\"; echo; }}\n{}",
        blocks.join("\n")
    )
    .replace("localhost:4437", &s.addr.to_string());
    let work = TempDir::new("readme");
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(work.path())
        .output()
        .expect("bash and curl are needed to run the README examples");
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "a README example failed ({}):\n{log}", out.status);
    // The script did what the README says: the bucket is gone, the fork exists.
    s.get("/agents").expect(404);
    assert_eq!(s.head("/v1/stream/chat/42-alt").expect(200).h("content-type"), "application/json");
    assert!(log.contains("\"status\":204"), "append-batch acknowledgements: {log}");
}
