//! The tier's one error: what failed talking to the object store, reading
//! or writing the data dir for it, or in a manifest, in one line (the
//! credentials never in it). Start-up refusals, backup cycle failures and
//! `sluice restore` report it as such.

sluice_shards::core::line_error! {
    /// Why a tier operation failed.
    pub struct TierError;
}
