//! The `Date` header (RFC 9110 §6.6.1, IMF-fixdate): rendered at most once per
//! second per shard thread and reused by every response in that second.

use super::headers as h;
use sluice_shards::core::ttl::civil_from_days;
use std::cell::RefCell;
use std::time::Duration;

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// Renders Unix seconds as an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn imf_fixdate(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    // 1970-01-01 was a Thursday.
    let weekday = DAYS[(days % 7) as usize];
    let month = MONTHS[(m - 1) as usize];
    format!("{weekday}, {d:02} {month} {y:04} {:02}:{:02}:{:02} GMT", rem / 3600, rem % 3600 / 60, rem % 60)
}

thread_local! {
    /// (second, rendered value) of the last `now()` on this thread.
    static CACHE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// Wall-clock time since the Unix epoch, from the kernel's coarse clock
/// (`CLOCK_REALTIME_COARSE`: the time at the last tick, at most one tick
/// (1-10 ms) behind): a read costs a quarter of a precise one (4 against
/// 17 ns on these machines), and every request reads it for its TTL checks
/// and its `Date`, which count milliseconds and seconds.
fn coarse_now() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut t) };
    assert_eq!(r, 0, "CLOCK_REALTIME_COARSE is always there on Linux");
    Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec as u32)
}

/// Wall-clock Unix milliseconds ([`coarse_now`]).
pub fn unix_ms() -> u64 {
    coarse_now().as_millis() as u64
}

/// Bytes of a rendered `Date` field: name, `: `, an IMF-fixdate (29 bytes
/// with a four-digit year), CRLF.
pub const FIELD_BYTES: usize = h::DATE.len() + 2 + 29 + 2;

/// Renders the `Date` field for the current time, from the copy kept for
/// this second (re-rendered only when the second changes).
pub fn render_field(out: &mut Vec<u8>) {
    let secs = coarse_now().as_secs();
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs {
            *c = (secs, imf_fixdate(secs));
        }
        for part in [h::DATE.as_bytes(), b": ", c.1.as_bytes(), b"\r\n"] {
            out.extend_from_slice(part);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_imf_fixdate() {
        assert_eq!(imf_fixdate(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(imf_fixdate(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(imf_fixdate(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    }

    /// The coarse clock is at most a tick behind the precise one: the field
    /// names the second before, of, or after a precise reading.
    #[test]
    fn the_field_renders_the_current_second() {
        use std::time::{SystemTime, UNIX_EPOCH};
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let mut out = Vec::new();
        render_field(&mut out);
        let field = String::from_utf8(out).unwrap();
        let near: Vec<String> = (secs - 1..=secs + 1).map(|s| format!("date: {}\r\n", imf_fixdate(s))).collect();
        assert!(near.contains(&field), "{field}");
        assert_eq!(field.len(), FIELD_BYTES);
    }

    /// Coarse milliseconds trail the precise clock by at most a tick.
    #[test]
    fn coarse_milliseconds_trail_by_at_most_a_tick() {
        use std::time::{SystemTime, UNIX_EPOCH};
        let coarse = unix_ms();
        let precise = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        assert!(coarse <= precise + 1 && precise.saturating_sub(coarse) <= 20, "coarse {coarse}, precise {precise}");
    }
}
