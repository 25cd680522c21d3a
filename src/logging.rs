//! The log: the `tracing` facade writing one line per event to stderr, as
//! text (`key=value`) or, with `--log-format json`, one JSON object.
//! `RUST_LOG` (a full filter, e.g. `sluice=debug,glommio=warn`) wins over
//! `--log-level`; glommio's own `log` records are forwarded into it.

use tracing_subscriber::EnvFilter;

/// Installs the subscriber (`format` is `text` or `json`); call once,
/// before anything logs.
pub fn init(level: &str, format: &str) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(level),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(true)
        // Its own error report is an eprintln!, which panics on a full or
        // closed stderr: a lost log line must not take the server down.
        .log_internal_errors(false);
    // A second init (tests) or a broken stderr must never stop the server.
    let _ = match format {
        // One object per line: timestamp, level, target and the event's
        // `fields` (not flattened: the access log has a field named target).
        "json" => builder.json().with_current_span(false).with_span_list(false).try_init(),
        _ => builder.try_init(),
    };
}
