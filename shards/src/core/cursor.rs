//! Long-poll and SSE cursors: 20-second intervals since a fixed epoch, moved
//! strictly forward (with jitter) when a client presents a cursor that is not
//! behind, so caches never collapse two consecutive polls into one.

/// 2024-10-09T00:00:00Z in Unix milliseconds.
const CURSOR_EPOCH_MS: u64 = 1_728_432_000_000;
const INTERVAL_MS: u64 = 20_000;

/// The cursor to return. `jitter` (any u64, e.g. random) spreads the forward
/// step over 1..=180 intervals.
pub fn next_cursor(now_ms: u64, client: Option<&str>, jitter: u64) -> u64 {
    let interval = now_ms.saturating_sub(CURSOR_EPOCH_MS) / INTERVAL_MS;
    match client.and_then(super::int::parse_uint) {
        Some(c) if c >= interval => c + 1 + jitter % 180,
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
}
