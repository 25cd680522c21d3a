//! Stream lifetime: `Stream-TTL` (sliding, renewed on access) and
//! `Stream-Expires-At` (absolute), with the strict header syntax the protocol asks for.

/// Largest `Stream-TTL` accepted: the seconds from the Unix epoch to
/// 9999-12-31T23:59:59Z, the end of what `Stream-Expires-At` can express.
/// Any lifetime up to this, counted from any time before then, fits in
/// Unix milliseconds with room to spare.
pub const MAX_TTL_SECS: u64 = 253_402_300_799;

/// Parses `Stream-TTL`: decimal digits, no sign, no leading zeros (but `0` itself).
pub fn parse_ttl(v: &str) -> Option<u64> {
    super::int::parse_canonical_uint(v)
}

/// Parses an RFC 3339 timestamp to Unix milliseconds.
pub fn parse_rfc3339(v: &str) -> Option<u64> {
    let b = v.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = v.get(r)?;
        s.bytes().all(|c| c.is_ascii_digit()).then(|| s.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut millis = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &v[start..i.min(start + 3)];
        millis = frac.parse::<i64>().ok()? * 10i64.pow(3 - frac.len() as u32);
    }
    let offset_secs = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if b.len() == i + 6 && b[i + 3] == b':' => {
            let h = num(i + 1..i + 3)?;
            let m = num(i + 4..i + 6)?;
            let s = (h * 60 + m) * 60;
            if *sign == b'+' {
                s
            } else {
                -s
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset_secs;
    let ms = secs * 1000 + millis;
    u64::try_from(ms).ok()
}

/// Days since 1970-01-01 (Howard Hinnant's civil calendar algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Renders Unix milliseconds as RFC 3339 UTC with milliseconds.
pub fn format_rfc3339(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, ms % 1000)
}

/// Year, month (1-12) and day (1-31) of a day count since 1970-01-01: the
/// inverse of `days_from_civil`.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A stream's lifetime settings and its last access.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lifetime {
    pub ttl_secs: Option<u64>,
    pub expires_at_ms: Option<u64>,
    pub last_access_ms: u64,
}

impl Lifetime {
    /// Whether the stream is gone at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| now_ms >= at)
            || self.ttl_secs.is_some_and(|t| now_ms >= self.last_access_ms.saturating_add(t.saturating_mul(1000)))
    }

    /// Renews the sliding TTL window.
    pub fn touch(&mut self, now_ms: u64) {
        self.last_access_ms = self.last_access_ms.max(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_syntax() {
        assert_eq!(parse_ttl("3600"), Some(3600));
        assert_eq!(parse_ttl("0"), Some(0));
        for bad in ["", "+3600", "03600", "3600.0", "3.6e3", "-1", " 1", "abc"] {
            assert_eq!(parse_ttl(bad), None, "{bad}");
        }
    }

    #[test]
    fn rfc3339_round_trip() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2025-01-01T00:00:00.5Z"), Some(1_735_689_600_500));
        assert_eq!(parse_rfc3339("2025-01-01T01:00:00+01:00"), Some(1_735_689_600_000));
        assert_eq!(format_rfc3339(1_735_689_600_500), "2025-01-01T00:00:00.500Z");
        let ms = parse_rfc3339("2031-07-09T13:14:15.123Z").unwrap();
        assert_eq!(format_rfc3339(ms), "2031-07-09T13:14:15.123Z");
        for bad in
            ["", "not-a-date", "2025-13-01T00:00:00Z", "2025-01-01", "2025-01-01T00:00:00", "2025-01-01T00:00:00+0100"]
        {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn expiry_and_renewal() {
        let mut l = Lifetime { ttl_secs: Some(2), expires_at_ms: None, last_access_ms: 1000 };
        assert!(!l.expired(2999));
        assert!(l.expired(3000));
        l.touch(2500);
        assert!(!l.expired(4000));
        let abs = Lifetime { ttl_secs: None, expires_at_ms: Some(50), last_access_ms: 0 };
        assert!(abs.expired(50) && !abs.expired(49));
    }

    #[test]
    fn huge_ttl_never_wraps_into_the_past() {
        let now = 1_735_689_600_000;
        for ttl in [MAX_TTL_SECS, 18_446_744_073_709_552, u64::MAX] {
            let l = Lifetime { ttl_secs: Some(ttl), expires_at_ms: None, last_access_ms: now };
            assert!(!l.expired(now + 1000), "ttl {ttl}");
        }
        assert!(parse_ttl(&MAX_TTL_SECS.to_string()).is_some());
        assert_eq!(parse_rfc3339("9999-12-31T23:59:59Z"), Some(MAX_TTL_SECS * 1000));
    }
}
