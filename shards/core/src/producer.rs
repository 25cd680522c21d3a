//! Idempotent producers: epoch fencing and per-request sequence numbers,
//! scoped to one (stream, Producer-Id).

use crate::record::ProducerStamp;
use std::collections::HashMap;

/// What the stream remembers about one producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerState {
    pub epoch: u64,
    pub last_seq: u64,
    /// What the last accepted request was answered with: next offset and
    /// its record range, returned again to a deduplicated retry.
    pub ack: (u64, u64, u64),
    /// When this producer last wrote, counted in the stream's producer writes.
    pub written: u64,
}

/// A stream's producers, at most `cap` of them: beyond it the least recently
/// written producer is forgotten (as Kafka expires idle producer ids), and
/// its next request is judged as a new producer's. Only accepted writes
/// count as use, so replaying the log forgets exactly the producers the live
/// server forgot (given the same cap). The cap is the store's, passed in:
/// every stream of a shard has the same.
#[derive(Clone, Debug, Default)]
pub struct Producers {
    /// `None` until a producer first writes: most streams never have one,
    /// and an idle stream then pays one pointer for the table.
    table: Option<Box<Table>>,
}

#[derive(Clone, Debug, Default)]
struct Table {
    by_id: HashMap<String, ProducerState>,
    /// Accepted producer writes so far (the clock of `written`).
    writes: u64,
}

impl Producers {
    /// A table as a checkpoint recorded it: `writes` so far and the
    /// producers, at most `cap` (at least one) of them remembered.
    pub fn restore(cap: usize, writes: u64, by_id: HashMap<String, ProducerState>) -> Producers {
        let mut p = Producers::default();
        if writes > 0 || !by_id.is_empty() {
            p.table = Some(Box::new(Table { by_id, writes }));
        }
        // A smaller cap than when checkpointed forgets the least recently written.
        p.evict(cap);
        p
    }

    /// The write counter and every remembered producer, for a checkpoint.
    pub fn entries(&self) -> (u64, impl Iterator<Item = (&String, &ProducerState)>) {
        (self.table.as_ref().map_or(0, |t| t.writes), self.table.iter().flat_map(|t| t.by_id.iter()))
    }

    pub fn get(&self, id: &str) -> Option<&ProducerState> {
        self.table.as_ref()?.by_id.get(id)
    }

    pub fn len(&self) -> usize {
        self.table.as_ref().map_or(0, |t| t.by_id.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records `stamp`'s accepted write, answered with `ack`; forgets the
    /// least recently written producer if the table is then over `cap`.
    pub fn record(&mut self, stamp: &ProducerStamp, ack: (u64, u64, u64), cap: usize) {
        let t = self.table.get_or_insert_with(Box::default);
        t.writes += 1;
        let state = ProducerState { epoch: stamp.epoch, last_seq: stamp.seq, ack, written: t.writes };
        t.by_id.insert(stamp.id.clone(), state);
        self.evict(cap);
    }

    /// Forgets the least recently written producers beyond `cap`.
    fn evict(&mut self, cap: usize) {
        assert!(cap > 0, "a producer table must hold at least one producer");
        let Some(t) = self.table.as_mut() else { return };
        while t.by_id.len() > cap {
            let oldest = t.by_id.iter().min_by_key(|(_, p)| p.written).map(|(id, _)| id.clone());
            t.by_id.remove(&oldest.expect("over the cap, so not empty"));
        }
    }
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

pub use crate::limits::MAX_PRODUCER_INT;

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
        let s = ProducerState { epoch: 1, last_seq: 2, ack: (0, 0, 0), written: 0 };
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

    #[test]
    fn least_recently_written_producer_is_forgotten_beyond_the_cap() {
        let mut t = Producers::default();
        t.record(&ProducerStamp { id: "a".into(), epoch: 0, seq: 0 }, (1, 0, 1), 2);
        t.record(&ProducerStamp { id: "b".into(), epoch: 0, seq: 0 }, (2, 1, 2), 2);
        t.record(&ProducerStamp { id: "a".into(), epoch: 0, seq: 1 }, (3, 2, 3), 2);
        t.record(&ProducerStamp { id: "c".into(), epoch: 0, seq: 0 }, (4, 3, 4), 2);
        assert_eq!(t.len(), 2);
        assert!(t.get("b").is_none(), "b wrote least recently");
        assert_eq!(t.get("a").map(|p| p.last_seq), Some(1));
        assert_eq!(check(t.get("b"), &stamp(0, 1)), ProducerCheck::Gap { expected: 0, received: 1 });
    }
}
