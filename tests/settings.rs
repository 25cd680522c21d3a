//! Settings through the real binary: `--config sluice.toml` (flag names as
//! keys; flags win over `SLUICE_*` variables, variables over the file, the
//! file over the defaults; unknown keys and bad values refused in one line)
//! and `--log-format json` (one JSON object per line, access log included).

mod common;

use common::{run_to_exit, Launch, Server, TempDir};

/// A 2 KiB body: above a 1KiB limit, below a 4KiB one.
const BODY: [u8; 2048] = [b'x'; 2048];

/// Starts a server with `file` as its config file plus `extra` flags and
/// `env`; answers the status of a 2 KiB append.
fn append_status(dir: &TempDir, file: &str, extra: &[&str], env: &[(&str, &str)]) -> u16 {
    let path = dir.path().join("sluice.toml");
    std::fs::write(&path, file).unwrap();
    let mut args = vec!["--config", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut launch = Launch::quick(1, &args);
    launch.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let s = Server::launch(&dir.path().join(format!("data-{}", extra.len() + env.len())), launch);
    s.create("/v1/stream/a", "text/plain");
    s.post("/v1/stream/a", "text/plain", &BODY).status
}

#[test]
fn the_config_file_sits_below_variables_and_flags() {
    let dir = TempDir::new("config");
    let file =
        "# sluice settings\nmax-body-bytes = \"1KiB\"\naccess-log = true\ncors-origins = [\"http://a.example\"]\n";
    assert_eq!(append_status(&dir, file, &[], &[]), 413, "the file's limit applies");
    assert_eq!(append_status(&dir, file, &[], &[("SLUICE_MAX_BODY_BYTES", "4KiB")]), 204, "a variable wins");
    let flag = ["--max-body-bytes", "4KiB"];
    assert_eq!(append_status(&dir, file, &flag, &[("SLUICE_MAX_BODY_BYTES", "1KiB")]), 204, "a flag wins");
    // SLUICE_CONFIG names the file as --config does.
    let path = dir.path().join("sluice.toml");
    let mut launch = Launch::quick(1, &[]);
    launch.env = vec![("SLUICE_CONFIG".into(), path.to_str().unwrap().into())];
    let s = Server::launch(&dir.path().join("data-env"), launch);
    s.create("/v1/stream/a", "text/plain");
    assert_eq!(s.post("/v1/stream/a", "text/plain", &BODY).status, 413);
}

#[test]
fn a_bad_config_file_is_refused_in_one_line() {
    let dir = TempDir::new("config-bad");
    let path = dir.path().join("sluice.toml");
    let p = path.to_str().unwrap();
    let data = dir.path().join("data");
    let run = |text: &str| {
        std::fs::write(&path, text).unwrap();
        let (status, err) = run_to_exit(&["serve", "--config", p, "--data-dir", data.to_str().unwrap()]);
        assert_eq!(status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        err
    };
    let e = run("shard = 2\n");
    assert!(e.starts_with(&format!("sluice: config file {p}: unknown key 'shard'")), "{e}");
    assert!(run("data_dir = '/x'\n").contains("unknown key 'data_dir' (keys are the flags' names: 'data-dir')"));
    assert!(run("config = 'other.toml'\n").contains("unknown key 'config'"));
    assert!(run("shards = [1, 2]\n").contains("'shards' must be a string, number, boolean or list of strings"));
    assert!(run("shards = \n").starts_with(&format!("sluice: config file {p}: ")));
    let e = run("shards = 0\n");
    assert!(
        e.contains("invalid value '0' for '--shards <N>'") && e.contains(&format!("(from config file {p})")),
        "{e}"
    );
    let (status, err) = run_to_exit(&["serve", "--config", "/nonexistent/sluice.toml"]);
    assert_eq!(status.code(), Some(2));
    assert!(err.starts_with("sluice: config file /nonexistent/sluice.toml: No such file"), "{err}");
    assert!(!data.exists(), "a refused start creates nothing");
}

#[test]
fn json_logs_are_one_object_per_line_access_log_included() {
    let dir = TempDir::new("json-log");
    let log = dir.path().join("server.log");
    let mut s =
        Server::launch(&dir.path().join("data"), Launch::logged(&log, &["--log-format", "json", "--access-log"]));
    s.create("/v1/stream/j", "text/plain");
    s.get("/v1/stream/j?offset=-1&token=secret-value");
    let (status, _) = s.sigterm(std::time::Duration::from_secs(15));
    assert!(status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let find = |what: &str| {
        lines.iter().find(|l| l["fields"]["message"] == what).unwrap_or_else(|| panic!("no {what}: {text}"))
    };
    assert_eq!(find("started")["level"], "INFO");
    assert!(find("started")["fields"]["shards"].is_u64(), "fields keep their types: {text}");
    let read = lines
        .iter()
        .find(|l| {
            l["target"] == "sluice::access" && l["fields"]["target"].as_str().is_some_and(|t| t.contains("offset"))
        })
        .unwrap_or_else(|| panic!("no access line for the read: {text}"));
    assert_eq!(read["fields"]["target"], "/v1/stream/j?offset=-1&token=REDACTED");
    assert!(!text.contains("secret-value"), "{text}");
    find("stopped");
}
