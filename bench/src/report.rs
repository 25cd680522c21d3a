//! Results: a JSON object (for --json and scripts) and the same facts as a
//! two-column table for people, printed on stdout.

use serde_json::{Map, Value};

pub struct Report {
    pub title: String,
    rows: Vec<(String, String)>,
    pub json: Map<String, Value>,
}

impl Report {
    pub fn new(title: String) -> Report {
        Report { title, rows: Vec::new(), json: Map::new() }
    }

    /// A table row only.
    pub fn row(&mut self, name: &str, value: impl std::fmt::Display) {
        self.rows.push((name.to_string(), value.to_string()));
    }

    /// A JSON field only.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) {
        self.json.insert(key.to_string(), value.into());
    }

    pub fn print(&self) {
        let width = self.rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        println!("== {}", self.title);
        for (n, v) in &self.rows {
            println!("  {n:<width$}  {v}");
        }
    }

    pub fn write_json(&self, path: &str) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(&Value::Object(self.json.clone())).expect("json");
        std::fs::write(path, text + "\n")
    }
}

/// `12345.6` as `12,346`.
pub fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Milliseconds with three decimals.
pub fn ms(x: f64) -> String {
    format!("{x:.3} ms")
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(mib(2048), "2.0 MiB");
    }
}
