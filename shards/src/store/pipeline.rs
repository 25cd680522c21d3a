//! A stream's placed appends in flight (`super::place`): the ranges they
//! took, the order they are decided in, and the syncs they share.

use crate::core::index::IndexEnd;

/// A stream's placements in flight.
pub(crate) struct Pipeline {
    /// The stream's bytes are all stored and ranges may be taken: the
    /// first placement flushes what memory holds before it sets this.
    pub ready: bool,
    /// A placement was not decided: no more join; the others drain.
    pub broken: bool,
    /// Where the next range starts: offset, record, index end.
    pub end: u64,
    pub records: u64,
    pub index: IndexEnd,
    /// Placements that took a range, and those done (decided or not):
    /// each is decided once every one before it is done.
    pub taken: u64,
    pub done: u64,
    /// Turns past `done` whose placement was dropped before its turn (its
    /// request went away): counted done when `done` reaches them.
    dropped: Vec<u64>,
    /// Syncs of the stream's files started and finished, by number: a
    /// placement whose writes returned is durable once a sync started
    /// after that finished (one sync covers every write before it).
    sync_started: u64,
    sync_finished: u64,
    syncing: bool,
    /// A sync failed: what it covered is not known to be durable.
    sync_failed: bool,
}

/// What a placement whose writes returned does next to be durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncStep {
    /// A sync that started after its writes finished.
    Durable,
    /// A sync failed: nothing it covered is known to be durable.
    Failed,
    /// Another placement's sync is running: wait for it.
    Wait,
    /// Start sync number `n` of the stream's files, then report it.
    Start(u64),
}

impl Pipeline {
    /// A pipeline whose first placement is storing the stream's bytes.
    pub fn starting() -> Pipeline {
        Pipeline {
            ready: false,
            broken: false,
            end: 0,
            records: 0,
            index: IndexEnd { len: 0, offset: 0, record: 0 },
            taken: 0,
            done: 0,
            dropped: Vec::new(),
            sync_started: 0,
            sync_finished: 0,
            syncing: false,
            sync_failed: false,
        }
    }

    /// The number of the first sync that covers writes returned now.
    pub fn sync_needed(&self) -> u64 {
        self.sync_started + 1
    }

    /// What a placement that needs sync `need` does next.
    pub fn next_sync(&mut self, need: u64) -> SyncStep {
        if self.sync_failed {
            SyncStep::Failed
        } else if self.sync_finished >= need {
            SyncStep::Durable
        } else if self.syncing {
            SyncStep::Wait
        } else {
            (self.syncing, self.sync_started) = (true, self.sync_started + 1);
            SyncStep::Start(self.sync_started)
        }
    }

    /// Sync `n` ended, well or not.
    pub fn synced(&mut self, n: u64, ok: bool) {
        assert!(self.syncing && n == self.sync_started, "one sync at a time, the last one started");
        self.syncing = false;
        match ok {
            true => self.sync_finished = n,
            false => self.sync_failed = true,
        }
    }

    /// Marks `turn` done: in order, or, out of order, once the ones before
    /// it are (the pipeline breaks: its range is not decided).
    pub fn finish(&mut self, turn: u64) {
        if turn != self.done {
            self.broken = true;
            self.dropped.push(turn);
            return;
        }
        self.done += 1;
        while let Some(i) = self.dropped.iter().position(|&t| t == self.done) {
            self.dropped.swap_remove(i);
            self.done += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A placement dropped before its turn breaks the pipeline and counts
    /// as done once the ones before it are; the order of the rest holds.
    #[test]
    fn turns_finish_in_order_and_dropped_ones_when_reached() {
        let mut p = Pipeline::starting();
        p.taken = 4;
        p.finish(2);
        assert_eq!((p.done, p.broken), (0, true));
        p.finish(0);
        assert_eq!(p.done, 1, "turn 2 waits for turn 1");
        p.finish(1);
        assert_eq!(p.done, 3, "turn 2 was dropped: done when reached");
        p.finish(3);
        assert_eq!(p.done, p.taken);
    }

    /// A sync covers the writes that returned before it started; one that
    /// fails fails every placement waiting on a sync.
    #[test]
    fn a_sync_covers_the_writes_before_it_and_a_failed_one_fails_the_rest() {
        let mut p = Pipeline::starting();
        let first = p.sync_needed();
        assert_eq!(p.next_sync(first), SyncStep::Start(1));
        let second = p.sync_needed();
        assert_eq!((second, p.next_sync(second)), (2, SyncStep::Wait), "sync 1 started before these writes");
        p.synced(1, true);
        assert_eq!((p.next_sync(first), p.next_sync(second)), (SyncStep::Durable, SyncStep::Start(2)));
        p.synced(2, false);
        assert_eq!(p.next_sync(p.sync_needed()), SyncStep::Failed);
    }
}
