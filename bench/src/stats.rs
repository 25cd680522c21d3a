//! Latency histograms (nanoseconds, 3 significant digits) and response
//! tallies, kept per thread on the hot path and merged at the end.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// A histogram from 1 ns to 100 s at 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds")
}

/// Records a latency in nanoseconds (clamped into range).
#[inline]
pub fn record(h: &mut Histogram<u64>, nanos: u64) {
    h.saturating_record(nanos.max(1));
}

/// Percentiles of a histogram, in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Latency {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

pub fn latency(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    Latency {
        count: h.len(),
        mean_ms: h.mean() / 1e6,
        p50_ms: ms(h.value_at_quantile(0.50)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        p999_ms: ms(h.value_at_quantile(0.999)),
        max_ms: ms(h.max()),
    }
}

impl Latency {
    pub fn json(&self) -> Value {
        json!({
            "count": self.count,
            "mean_ms": round3(self.mean_ms),
            "p50_ms": round3(self.p50_ms),
            "p99_ms": round3(self.p99_ms),
            "p999_ms": round3(self.p999_ms),
            "max_ms": round3(self.max_ms),
        })
    }
}

pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Outcomes of requests: successes, every status seen, transport failures.
#[derive(Clone, Debug)]
pub struct Tally {
    /// 2xx responses.
    pub ok: u64,
    /// Count per status code (index = code, 0..600).
    pub statuses: Vec<u64>,
    /// Connection failures, resets, malformed responses.
    pub io_errors: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally { ok: 0, statuses: vec![0; 600], io_errors: 0 }
    }
}

impl Tally {
    #[inline]
    pub fn status(&mut self, code: u16) {
        if (200..300).contains(&code) {
            self.ok += 1;
        }
        if let Some(c) = self.statuses.get_mut(code as usize) {
            *c += 1;
        }
    }

    pub fn merge(&mut self, o: &Tally) {
        self.ok += o.ok;
        self.io_errors += o.io_errors;
        for (a, b) in self.statuses.iter_mut().zip(&o.statuses) {
            *a += b;
        }
    }

    /// Non-2xx responses plus transport errors.
    pub fn errors(&self) -> u64 {
        let non_2xx: u64 =
            self.statuses.iter().enumerate().filter(|(c, _)| !(200..300).contains(c)).map(|(_, n)| n).sum();
        non_2xx + self.io_errors
    }

    /// `{"204": 1000, "404": 3}`.
    pub fn statuses_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (code, n) in self.statuses.iter().enumerate().filter(|(_, n)| **n > 0) {
            m.insert(code.to_string(), json!(n));
        }
        Value::Object(m)
    }

    /// `204x1000 404x3` for humans.
    pub fn statuses_text(&self) -> String {
        let parts: Vec<String> =
            self.statuses.iter().enumerate().filter(|(_, n)| **n > 0).map(|(c, n)| format!("{c}x{n}")).collect();
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(" ")
        }
    }
}

/// Median of a few numbers (the middle one, or the mean of the two middle).
pub fn median(xs: &mut [f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if !n.is_multiple_of(2) {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_tallies() {
        let mut h = histogram();
        for i in 1..=1000 {
            record(&mut h, i * 1_000_000);
        }
        let l = latency(&h);
        assert_eq!(l.count, 1000);
        assert!((l.p50_ms - 500.0).abs() < 1.0, "{}", l.p50_ms);
        assert!((l.p99_ms - 990.0).abs() < 1.0);
        let mut t = Tally::default();
        t.status(204);
        t.status(404);
        t.io_errors += 1;
        let mut u = Tally::default();
        u.merge(&t);
        assert_eq!((u.ok, u.errors()), (1, 2));
        assert_eq!(u.statuses_text(), "204x1 404x1");
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
    }
}
