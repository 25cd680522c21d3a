//! Stream lifetime: `Stream-TTL` (sliding, renewed on access) and
//! `Stream-Expires-At` (absolute), with the strict header syntax the protocol asks for.

pub use crate::limits::MAX_TTL_SECS;

/// Parses `Stream-TTL`: decimal digits, no sign, no leading zeros (but `0` itself).
pub fn parse_ttl(v: &str) -> Option<u64> {
    super::int::parse_canonical_uint(v)
}

/// The latest `Stream-Expires-At`, in Unix milliseconds: the last
/// millisecond of year 9999, the largest date four year digits render.
pub const MAX_EXPIRES_AT_MS: u64 = MAX_TTL_SECS * 1000 + 999;

/// Parses `Stream-Expires-At` as the absolute expiry it sets, in Unix
/// milliseconds: an RFC 3339 timestamp naming a real day (no February 30),
/// with an offset of at most 23:59, at most [`MAX_EXPIRES_AT_MS`] and after
/// `now_ms` (a stream that would be gone at once is refused, not created).
/// The error is the reason the request is refused.
pub fn parse_expires_at(v: &str, now_ms: u64) -> Result<u64, &'static str> {
    let at = parse_rfc3339(v)?;
    if at <= now_ms {
        return Err("Stream-Expires-At is in the past");
    }
    Ok(at)
}

/// Parses an RFC 3339 timestamp to Unix milliseconds, refusing what
/// names no instant from 1970 to the end of year 9999.
pub fn parse_rfc3339(v: &str) -> Result<u64, &'static str> {
    const SYNTAX: &str = "Stream-Expires-At must be an RFC 3339 timestamp";
    let b = v.as_bytes();
    if b.len() < 20 {
        return Err(SYNTAX);
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, &'static str> {
        let s = v.get(r).ok_or(SYNTAX)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(SYNTAX);
        }
        s.parse().map_err(|_| SYNTAX)
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return Err(SYNTAX);
    }
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[13] != b':' || b[16] != b':' {
        return Err(SYNTAX);
    }
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return Err(SYNTAX);
    }
    if day > days_in_month(year, month) {
        return Err("Stream-Expires-At names no such day (the month is shorter)");
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
            return Err(SYNTAX);
        }
        let frac = &v[start..i.min(start + 3)];
        millis = frac.parse::<i64>().map_err(|_| SYNTAX)? * 10i64.pow(3 - frac.len() as u32);
    }
    let offset_secs = match b.get(i).ok_or(SYNTAX)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if b.len() == i + 6 && b[i + 3] == b':' => {
            let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return Err(SYNTAX);
            }
            let s = (h * 60 + m) * 60;
            if *sign == b'+' {
                s
            } else {
                -s
            }
        }
        _ => return Err(SYNTAX),
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset_secs;
    match u64::try_from(secs * 1000 + millis) {
        Ok(ms) if ms <= MAX_EXPIRES_AT_MS => Ok(ms),
        Ok(_) => Err("Stream-Expires-At is beyond 9999-12-31T23:59:59Z"),
        Err(_) => Err("Stream-Expires-At is before 1970"),
    }
}

/// Days in `month` (1-12) of `year` (Gregorian leap years).
fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
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
        self.deadline_ms().is_some_and(|at| now_ms >= at)
    }

    /// The first moment the stream is gone, as its lifetime stands now (a
    /// touch moves a sliding TTL's deadline later, never earlier); `None`
    /// for a stream without TTL or Expires-At.
    pub fn deadline_ms(&self) -> Option<u64> {
        let sliding = self.ttl_secs.map(|t| self.last_access_ms.saturating_add(t.saturating_mul(1000)));
        match (self.expires_at_ms, sliding) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
    fn the_deadline_is_the_earlier_bound_and_a_touch_only_moves_it_later() {
        let mut l = Lifetime { ttl_secs: Some(10), expires_at_ms: None, last_access_ms: 1_000 };
        assert_eq!(l.deadline_ms(), Some(11_000));
        assert!(!l.expired(10_999) && l.expired(11_000));
        l.touch(5_000);
        assert_eq!(l.deadline_ms(), Some(15_000));
        l.touch(2_000);
        assert_eq!(l.deadline_ms(), Some(15_000), "an older access moves nothing");
        l.expires_at_ms = Some(12_000);
        assert_eq!(l.deadline_ms(), Some(12_000));
        assert!(l.expired(12_000));
        let fixed = Lifetime { ttl_secs: None, expires_at_ms: Some(7), last_access_ms: 100 };
        assert_eq!(fixed.deadline_ms(), Some(7));
        assert_eq!(Lifetime { ttl_secs: None, expires_at_ms: None, last_access_ms: 9 }.deadline_ms(), None);
        let huge = Lifetime { ttl_secs: Some(u64::MAX), expires_at_ms: None, last_access_ms: 9 };
        assert_eq!(huge.deadline_ms(), Some(u64::MAX));
        assert!(!huge.expired(u64::MAX - 1));
    }

    #[test]
    fn rfc3339_round_trip() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_rfc3339("2025-01-01T00:00:00.5Z"), Ok(1_735_689_600_500));
        assert_eq!(parse_rfc3339("2025-01-01T01:00:00+01:00"), Ok(1_735_689_600_000));
        assert_eq!(format_rfc3339(1_735_689_600_500), "2025-01-01T00:00:00.500Z");
        let ms = parse_rfc3339("2031-07-09T13:14:15.123Z").unwrap();
        assert_eq!(format_rfc3339(ms), "2031-07-09T13:14:15.123Z");
        for bad in
            ["", "not-a-date", "2025-13-01T00:00:00Z", "2025-01-01", "2025-01-01T00:00:00", "2025-01-01T00:00:00+0100"]
        {
            assert!(parse_rfc3339(bad).unwrap_err().contains("RFC 3339"), "{bad}");
        }
    }

    /// Issue #11: every accepted value is a real day up to the end of year
    /// 9999 and renders back as itself; February 30 used to roll over to
    /// March 2 and `9999-12-31T23:59:59-23:59` to a year-10000 date.
    #[test]
    fn expires_at_is_a_real_future_day_up_to_year_9999() {
        let now = parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        for (v, why) in [
            ("2030-02-30T00:00:00Z", "no such day"),
            ("2029-02-29T00:00:00Z", "no such day"),
            ("2100-02-29T00:00:00Z", "no such day"),
            ("2031-11-31T00:00:00Z", "no such day"),
            ("9999-12-31T23:59:59-23:59", "beyond 9999-12-31T23:59:59Z"),
            ("9999-12-31T23:59:60Z", "beyond 9999-12-31T23:59:59Z"),
            ("2030-01-01T00:00:00+24:00", "RFC 3339"),
            ("2030-01-01T00:00:00-01:60", "RFC 3339"),
            ("2025-12-31T23:59:59.999Z", "in the past"),
            ("2026-01-01T00:00:00Z", "in the past"),
            ("1970-01-01T00:00:00+00:01", "before 1970"),
        ] {
            let e = parse_expires_at(v, now).expect_err(v);
            assert!(e.starts_with("Stream-Expires-At") && e.contains(why), "{v}: {e}");
        }
        for v in
            ["2028-02-29T00:00:00Z", "2000-02-29T12:00:00Z", "2031-12-31T23:59:59+23:59", "9999-12-31T23:59:59.999Z"]
        {
            let Ok(ms) = parse_rfc3339(v) else { panic!("{v} refused") };
            assert_eq!(parse_rfc3339(&format_rfc3339(ms)), Ok(ms), "{v}");
        }
        assert_eq!(parse_expires_at("2026-01-01T00:00:00.001Z", now), Ok(now + 1));
        assert_eq!(parse_rfc3339("9999-12-31T23:59:59.999Z"), Ok(MAX_EXPIRES_AT_MS));
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
        assert_eq!(parse_rfc3339("9999-12-31T23:59:59Z"), Ok(MAX_TTL_SECS * 1000));
    }
}
