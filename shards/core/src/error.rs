//! The protocol's error type: every outcome that refuses a request about a
//! stream or a bucket, whether the protocol core or the store decides it.
//! Each variant names what went wrong and carries a short reason; the HTTP
//! edge has its own refusals beside these (`sluice::http::error::HttpError`)
//! and maps both to status codes and headers in exactly one place.

use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The request is malformed or its parameters conflict.
    Invalid(&'static str),
    /// A header this resource does not take.
    UnsupportedHeader(&'static str),
    /// A record ordinal past the record tail (reads answer with the tail).
    RecordBeyondTail,
    /// An idempotent producer's epoch is older than the current one.
    StaleEpoch { current: u64 },
    /// The bucket does not exist.
    NoBucket,
    /// The stream does not exist (or has expired).
    NoStream,
    /// A route or sub-resource does not exist.
    NotFound(&'static str),
    /// The request conflicts with the current state.
    Conflict(&'static str),
    /// The stream is closed.
    Closed,
    /// The Content-Type differs from the stream's.
    ContentTypeMismatch,
    /// `Stream-Seq` did not increase.
    SeqRegression,
    /// An idempotent producer skipped sequence numbers.
    ProducerGap { expected: u64, received: u64 },
    /// The bucket is being deleted.
    BucketBusy,
    /// The stream was deleted; its forks still read its data.
    Gone,
    /// The position is before the earliest retained offset or record.
    Trimmed(&'static str),
    /// `Stream-Record-Match` differs from the record tail.
    RecordMismatch,
    /// The request or one of its parts exceeds a limit.
    TooLarge(&'static str),
    /// A feature of HTTP sluice does not implement.
    NotImplemented(&'static str),
    /// Stored data could not be read; the request may be retried.
    ReadFailed,
    /// Stored data fails its checks (an index CRC32C, a record length): the
    /// stream and the damage are named; retrying does not help.
    Damaged(String),
    /// A resource limit or a peer shard refuses for now; retry later.
    Unavailable(&'static str),
    /// The shard's log refused the write.
    Log(LogError),
}

impl Error {
    /// A short, human-readable reason (one line).
    pub fn reason(&self) -> Cow<'static, str> {
        let fixed = match self {
            Error::UnsupportedHeader(name) => return Cow::Owned(format!("the {name} header is not supported here")),
            Error::Damaged(what) => return Cow::Owned(what.clone()),
            Error::Invalid(why)
            | Error::NotFound(why)
            | Error::Conflict(why)
            | Error::Trimmed(why)
            | Error::TooLarge(why)
            | Error::NotImplemented(why)
            | Error::Unavailable(why) => why,
            Error::RecordBeyondTail => "record is beyond the record tail",
            Error::StaleEpoch { .. } => "stale producer epoch",
            Error::NoBucket => "bucket not found",
            Error::NoStream => "stream not found",
            Error::Closed => "stream is closed",
            Error::ContentTypeMismatch => "Content-Type does not match the stream",
            Error::SeqRegression => "Stream-Seq must increase",
            Error::ProducerGap { .. } => "producer sequence gap",
            Error::BucketBusy => "bucket is being deleted",
            Error::Gone => "stream was deleted; its forks keep its data",
            Error::RecordMismatch => "Stream-Record-Match does not equal the record tail",
            Error::ReadFailed => "stored data could not be read; retry later",
            Error::Log(LogError::NoSpace) => "no space left for the log; retry later",
            Error::Log(LogError::Unconfirmed) => "object store behind: local data at --local-bytes; retry later",
            Error::Log(LogError::Failed(_)) => "log unavailable after a write failure; restart required",
        };
        Cow::Borrowed(fixed)
    }

    /// A stable snake_case name for machine-readable error bodies (the
    /// append-batch acknowledgements).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Invalid(_) | Error::UnsupportedHeader(_) | Error::RecordBeyondTail => "bad_request",
            Error::StaleEpoch { .. } => "stale_epoch",
            Error::NoBucket => "bucket_not_found",
            Error::NoStream | Error::NotFound(_) => "not_found",
            Error::Conflict(_) | Error::BucketBusy => "conflict",
            Error::Closed => "stream_closed",
            Error::ContentTypeMismatch => "content_type_mismatch",
            Error::SeqRegression => "seq_regression",
            Error::ProducerGap { .. } => "sequence_gap",
            Error::Gone | Error::Trimmed(_) => "gone",
            Error::RecordMismatch => "record_mismatch",
            Error::TooLarge(_) => "too_large",
            Error::NotImplemented(_) => "not_implemented",
            Error::ReadFailed | Error::Unavailable(_) | Error::Log(LogError::Failed(_)) => "unavailable",
            Error::Damaged(_) => "damaged",
            Error::Log(LogError::NoSpace) => "no_space",
            Error::Log(LogError::Unconfirmed) => "store_behind",
        }
    }
}

impl From<LogError> for Error {
    fn from(e: LogError) -> Self {
        Error::Log(e)
    }
}

/// Why the log cannot take or acknowledge a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogError {
    /// No space for a new segment; nothing was written. Retry later.
    NoSpace,
    /// The cold tier: local stream data the object store has not confirmed
    /// (so cannot be dropped) is at `--local-bytes`; nothing was written.
    /// Retry once the store confirms.
    Unconfirmed,
    /// A write or sync failed; the shard accepts no more writes.
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_short_single_lines() {
        for e in [
            Error::Invalid("bad"),
            Error::RecordBeyondTail,
            Error::StaleEpoch { current: 3 },
            Error::ProducerGap { expected: 1, received: 3 },
            Error::Gone,
            Error::ReadFailed,
            Error::Log(LogError::Failed("disk on fire".into())),
            Error::Log(LogError::Unconfirmed),
            Error::UnsupportedHeader("stream-seq"),
        ] {
            let r = e.reason();
            assert!(!r.is_empty() && r.len() < 80 && !r.contains('\n'), "{e:?}: {r}");
        }
        // The log's own failure text is for the operator's log, not the client.
        assert!(!Error::Log(LogError::Failed("disk on fire".into())).reason().contains("fire"));
        assert_eq!(Error::UnsupportedHeader("stream-seq").reason(), "the stream-seq header is not supported here");
    }
}
