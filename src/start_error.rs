//! Why the server cannot start, or a setting cannot be taken: a flag's
//! value, the config or tokens file, the data dir, a host limit, a shard's
//! recovery. One line: the reason of the `refused to start` event, of a
//! refused tokens-file reload, or of the command line's refusal of a flag.

use std::fmt;

/// A start-up (or setting) error, displayed as its one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError(String);

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

impl From<String> for StartError {
    fn from(why: String) -> StartError {
        StartError(why)
    }
}

impl From<sluice_shards::log::recovery::RecoveryError> for StartError {
    fn from(e: sluice_shards::log::recovery::RecoveryError) -> StartError {
        StartError(e.to_string())
    }
}

impl From<&str> for StartError {
    fn from(why: &str) -> StartError {
        StartError(why.to_string())
    }
}
