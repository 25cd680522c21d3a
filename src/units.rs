//! Values with units on the command line: durations (`500ms`, `30s`, `5m`,
//! `2h`, `7d`, or sums such as `1h30m`) and sizes (`4096`, `64KiB`, `64MiB`,
//! `1GiB`, or decimal `64MB`). Integers only, overflow refused.

use crate::start_error::StartError;
use std::time::Duration;

/// Duration units, longest suffix first so `ms` is not read as `m`.
const DURATION_UNITS: [(&str, u64); 5] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)];

/// Size units (case-insensitive); a bare number is bytes.
const SIZE_UNITS: [(&str, u64); 9] = [
    ("b", 1),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
];

/// Parses `500ms`, `30s`, `5m`, `2h`, `7d` or a sum of those (`1h30m`).
pub fn parse_duration(s: &str) -> Result<Duration, StartError> {
    let bad = || format!("'{s}' is not a duration (use e.g. 500ms, 30s, 5m, 2h, 7d)");
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(bad().into());
    }
    let mut total_ms: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let (unit, ms) = DURATION_UNITS.iter().find(|(u, _)| rest.starts_with(u)).ok_or_else(bad)?;
        rest = &rest[unit.len()..];
        total_ms = n.checked_mul(*ms).and_then(|v| total_ms.checked_add(v)).ok_or_else(bad)?;
    }
    Ok(Duration::from_millis(total_ms))
}

/// Parses `4096`, `64KiB`, `64MiB`, `64 MiB`, `1GiB`, `64MB` into bytes.
pub fn parse_size(s: &str) -> Result<u64, StartError> {
    let bad = || format!("'{s}' is not a size (use e.g. 4096, 64KiB, 64MiB, 1GiB)");
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..digits].parse().map_err(|_| bad())?;
    let unit = t[digits..].trim_start().to_ascii_lowercase();
    let mult = if unit.is_empty() {
        1
    } else {
        SIZE_UNITS.iter().find(|(u, _)| *u == unit).map(|(_, m)| *m).ok_or_else(bad)?
    };
    Ok(n.checked_mul(mult).ok_or_else(bad)?)
}

/// Renders a duration the way the parser reads it (`90s` as `1m30s`).
pub fn format_duration(d: Duration) -> String {
    let mut ms = d.as_millis() as u64;
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in DURATION_UNITS.iter().rev() {
        if ms >= *size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    out
}

/// Renders a size in the largest binary unit that divides it exactly.
pub fn format_size(bytes: u64) -> String {
    for (unit, size) in [("TiB", 1u64 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = [
            ("500ms", 500),
            ("2s", 2_000),
            ("1m", 60_000),
            ("2h", 7_200_000),
            ("7d", 604_800_000),
            ("1h30m", 5_400_000),
            ("1m500ms", 60_500),
        ];
        for (s, ms) in ok {
            assert_eq!(parse_duration(s), Ok(Duration::from_millis(ms)), "{s}");
            assert_eq!(parse_duration(&format_duration(Duration::from_millis(ms))), Ok(Duration::from_millis(ms)));
        }
        for bad in ["", "2", "s", "2w", "-1s", "1.5s", "2 s", "s2", "99999999999999999999d", "213503982334602d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be refused");
        }
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
    }

    #[test]
    fn sizes() {
        let ok = [
            ("4096", 4096),
            ("0", 0),
            ("64KiB", 64 << 10),
            ("64MiB", 64 << 20),
            ("64 MiB", 64 << 20),
            ("64mib", 64 << 20),
            ("1GiB", 1 << 30),
            ("2TiB", 2 << 40),
            ("64MB", 64_000_000),
            ("10b", 10),
        ];
        for (s, n) in ok {
            assert_eq!(parse_size(s), Ok(n), "{s}");
        }
        for bad in ["", "MiB", "64XB", "1.5GiB", "-1", "20000000TiB", "64 M iB"] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be refused");
        }
        assert_eq!(format_size(64 << 20), "64MiB");
        assert_eq!(format_size(4097), "4097");
    }
}
