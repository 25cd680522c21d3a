//! Why the server cannot start, or a setting cannot be taken: a flag's
//! value, the config or tokens file, the data dir, a host limit, a shard's
//! recovery. One line: the reason of the `refused to start` event, of a
//! refused tokens-file reload, or of the command line's refusal of a flag.

use sluice_shards::log::recovery::RecoveryError;

sluice_shards::core::line_error! {
    /// A start-up (or setting) error.
    pub struct StartError;
}

impl From<RecoveryError> for StartError {
    fn from(e: RecoveryError) -> StartError {
        StartError(e.to_string())
    }
}
