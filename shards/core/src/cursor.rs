//! Long-poll and SSE cursors: 20-second intervals since a fixed epoch, moved
//! strictly forward (with jitter) when a client presents a cursor that is not
//! behind, so caches never collapse two consecutive polls into one.

/// 2024-10-09T00:00:00Z in Unix milliseconds.
const CURSOR_EPOCH_MS: u64 = 1_728_432_000_000;
const INTERVAL_MS: u64 = 20_000;
/// The forward step is 1..=STEP_MAX intervals.
const STEP_MAX: u64 = 180;
/// Largest client cursor that can still move forward by a whole step.
pub const MAX_CURSOR: u64 = u64::MAX - STEP_MAX;

/// Whether a client's `cursor` can be answered: anything that is not a
/// decimal number is ignored (as if absent); a number must be at most
/// [`MAX_CURSOR`], or the next cursor would wrap backwards.
pub fn cursor_in_range(client: &str) -> bool {
    if client.is_empty() || !client.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    super::int::parse_uint(client).is_some_and(|c| c <= MAX_CURSOR)
}

/// The cursor to return. `jitter` (any u64, e.g. random) spreads the forward
/// step over 1..=STEP_MAX intervals. A client cursor beyond [`MAX_CURSOR`]
/// must have been refused before (see [`cursor_in_range`]).
pub fn next_cursor(now_ms: u64, client: Option<&str>, jitter: u64) -> u64 {
    let interval = now_ms.saturating_sub(CURSOR_EPOCH_MS) / INTERVAL_MS;
    match client.and_then(super::int::parse_uint) {
        Some(c) if c >= interval => {
            debug_assert!(c <= MAX_CURSOR, "cursor {c} was not range-checked");
            c.saturating_add(1 + jitter % STEP_MAX)
        }
        _ => interval,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_moves_forward() {
        let now = CURSOR_EPOCH_MS + 45_000;
        assert_eq!(next_cursor(now, None, 7), 2);
        assert_eq!(next_cursor(now, Some("1"), 7), 2);
        assert_eq!(next_cursor(now, Some("2"), 0), 3);
        assert_eq!(next_cursor(now, Some("50"), 9), 60);
        assert_eq!(next_cursor(now, Some("junk"), 9), 2);
        assert_eq!(next_cursor(now, Some("+50"), 9), 2, "the one integer grammar: no sign");
    }

    #[test]
    fn cursor_range() {
        assert!(cursor_in_range("junk") && cursor_in_range("") && cursor_in_range("12"));
        assert!(cursor_in_range(&MAX_CURSOR.to_string()));
        assert!(!cursor_in_range(&(MAX_CURSOR + 1).to_string()));
        assert!(!cursor_in_range("18446744073709551615"));
        assert!(!cursor_in_range("99999999999999999999999"));
        let now = CURSOR_EPOCH_MS + 45_000;
        for jitter in [0, 179, u64::MAX] {
            assert!(next_cursor(now, Some(&MAX_CURSOR.to_string()), jitter) > MAX_CURSOR);
        }
    }
}
