//! The webhook retry schedule: exponential from 1 s, capped at 60 s, with
//! ±20% jitter; pure, so the bounds are tested.

use super::bounds::{RETRY_FIRST_MS, RETRY_JITTER, RETRY_MAX_MS};

/// The delay before retry number `attempt` (1 for the first retry), given a
/// uniform random `unit` in [0, 1).
pub fn retry_delay_ms(attempt: u32, unit: f64) -> u64 {
    assert!(attempt >= 1, "retries count from 1");
    assert!((0.0..1.0).contains(&unit), "unit must be in [0, 1)");
    let base = RETRY_FIRST_MS.saturating_mul(1 << (attempt - 1).min(20)).min(RETRY_MAX_MS) as f64;
    let jitter = base * RETRY_JITTER * (unit * 2.0 - 1.0);
    (base + jitter).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_one_second_to_the_cap() {
        let mid: Vec<u64> = (1..=8).map(|a| retry_delay_ms(a, 0.5)).collect();
        assert_eq!(mid, [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
        assert_eq!(retry_delay_ms(1_000, 0.5), 60_000);
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        for attempt in 1..=10 {
            let base = retry_delay_ms(attempt, 0.5);
            for i in 0..100 {
                let d = retry_delay_ms(attempt, i as f64 / 100.0);
                assert!(d >= base * 8 / 10 && d <= base * 12 / 10, "attempt {attempt}: {d} vs {base}");
            }
        }
        assert_eq!(retry_delay_ms(1, 0.0), 800);
        assert!(retry_delay_ms(1, 0.999_999) <= 1_200);
    }
}
