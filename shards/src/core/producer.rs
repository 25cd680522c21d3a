//! Idempotent producers: epoch fencing and per-request sequence numbers,
//! scoped to one (stream, Producer-Id).

use crate::log::ProducerStamp;

/// What the stream remembers about one producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerState {
    pub epoch: u64,
    pub last_seq: u64,
    /// What the last accepted request was answered with: next offset and
    /// its record range, returned again to a deduplicated retry.
    pub ack: (u64, u64, u64),
}

/// The verdict on a producer stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProducerCheck {
    /// New data: write it and record the stamp.
    Accept,
    /// Already written: answer 204 with the highest accepted seq.
    Duplicate { epoch: u64, last_seq: u64 },
    /// 403: an older epoch than the stream knows.
    StaleEpoch { current: u64 },
    /// 400: a new epoch must start at seq 0.
    EpochNeedsSeqZero,
    /// 409: a seq was skipped.
    Gap { expected: u64, received: u64 },
}

/// Largest value the headers may carry (2^53-1, for JavaScript clients).
pub const MAX_PRODUCER_INT: u64 = (1 << 53) - 1;

/// Parses Producer-Epoch / Producer-Seq: plain decimal digits within range.
pub fn parse_producer_int(v: &str) -> Option<u64> {
    super::int::parse_uint(v).filter(|n| *n <= MAX_PRODUCER_INT)
}

/// Judges `stamp` against the producer's current state.
pub fn check(state: Option<&ProducerState>, stamp: &ProducerStamp) -> ProducerCheck {
    let Some(s) = state else {
        return if stamp.seq == 0 {
            ProducerCheck::Accept
        } else {
            ProducerCheck::Gap { expected: 0, received: stamp.seq }
        };
    };
    if stamp.epoch < s.epoch {
        return ProducerCheck::StaleEpoch { current: s.epoch };
    }
    if stamp.epoch > s.epoch {
        return if stamp.seq == 0 { ProducerCheck::Accept } else { ProducerCheck::EpochNeedsSeqZero };
    }
    if stamp.seq <= s.last_seq {
        ProducerCheck::Duplicate { epoch: s.epoch, last_seq: s.last_seq }
    } else if stamp.seq == s.last_seq + 1 {
        ProducerCheck::Accept
    } else {
        ProducerCheck::Gap { expected: s.last_seq + 1, received: stamp.seq }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(epoch: u64, seq: u64) -> ProducerStamp {
        ProducerStamp { id: "p".into(), epoch, seq }
    }

    #[test]
    fn state_machine() {
        let s = ProducerState { epoch: 1, last_seq: 2, ack: (0, 0, 0) };
        assert_eq!(check(None, &stamp(0, 0)), ProducerCheck::Accept);
        assert_eq!(check(None, &stamp(3, 0)), ProducerCheck::Accept);
        assert_eq!(check(None, &stamp(0, 1)), ProducerCheck::Gap { expected: 0, received: 1 });
        assert_eq!(check(Some(&s), &stamp(0, 9)), ProducerCheck::StaleEpoch { current: 1 });
        assert_eq!(check(Some(&s), &stamp(2, 0)), ProducerCheck::Accept);
        assert_eq!(check(Some(&s), &stamp(2, 5)), ProducerCheck::EpochNeedsSeqZero);
        assert_eq!(check(Some(&s), &stamp(1, 1)), ProducerCheck::Duplicate { epoch: 1, last_seq: 2 });
        assert_eq!(check(Some(&s), &stamp(1, 3)), ProducerCheck::Accept);
        assert_eq!(check(Some(&s), &stamp(1, 5)), ProducerCheck::Gap { expected: 3, received: 5 });
    }

    #[test]
    fn integer_syntax() {
        assert_eq!(parse_producer_int("0"), Some(0));
        assert_eq!(parse_producer_int("9007199254740991"), Some(MAX_PRODUCER_INT));
        for bad in ["", "-1", "1e3", "0xyz", "1abc", "9007199254740992", " 1"] {
            assert_eq!(parse_producer_int(bad), None, "{bad}");
        }
    }
}
