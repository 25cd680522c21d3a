//! What the seeded simulations share: a reproducible random source with
//! JSON generators, the stream key of the built-in bucket, canonical JSON
//! records, and the driver that runs seeds (`SLUICE_SIM_SEED=S` reruns one;
//! `SLUICE_SIM_SECONDS=N` runs seeds for N seconds from
//! `SLUICE_SIM_FIRST_SEED`; otherwise `SLUICE_SIM_SEEDS`, default 64, of
//! `SLUICE_SIM_STEPS` steps each).

#![allow(dead_code)]

use sluice_shards::ids::BUILTIN_BUCKET;
use sluice_shards::store::StreamKey;

/// splitmix64: small, seedable, identical everywhere.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// 1 to `max` random bytes.
    pub fn bytes(&mut self, max: u64) -> Vec<u8> {
        let n = 1 + self.below(max);
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// Optional JSON whitespace, which normalization drops.
    pub fn space(&mut self) -> &'static str {
        [" ", "", "\n ", "\t", ""][self.below(5) as usize]
    }

    /// One JSON value as sent (with whitespace) and its canonical record;
    /// an array only if `arrays` (inside an array body, where it is one message).
    pub fn json_value(&mut self, arrays: bool) -> (String, String) {
        let n = self.below(1000);
        let (sp1, sp2) = (self.space(), self.space());
        match self.below(if arrays { 4 } else { 3 }) {
            0 => (n.to_string(), n.to_string()),
            1 => (format!("\"v {n}\""), format!("\"v {n}\"")),
            2 => (format!("{{{sp1}\"k\"{sp2}:{sp1}{n}}}"), format!("{{\"k\":{n}}}")),
            // A nested array is one message: only the top level is flattened.
            _ => (format!("[{sp1}{n},{sp2}true]"), format!("[{n},true]")),
        }
    }

    /// A JSON body (an array of `0..=max` values, or one bare value) and the
    /// canonical records the stream must store for it.
    pub fn json_body(&mut self, max: u64) -> (Vec<u8>, Vec<String>) {
        if self.chance(20) {
            // A bare array would be flattened: a bare value is never one.
            let (sent, record) = self.json_value(false);
            return (sent.into_bytes(), vec![record]);
        }
        let (mut sent, mut records) = (Vec::new(), Vec::new());
        for _ in 0..self.below(max + 1) {
            let (v, r) = self.json_value(true);
            sent.push(v);
            records.push(r);
        }
        let sep = format!(",{}", self.space());
        (format!("{}[{}]", self.space(), sent.join(&sep)).into_bytes(), records)
    }
}

pub fn key(name: &str) -> StreamKey {
    (BUILTIN_BUCKET.to_string(), name.to_string())
}

/// The stored bytes and message ends of canonical JSON records.
pub fn canonical(records: &[String]) -> (Vec<u8>, Vec<u64>) {
    let (mut data, mut ends) = (Vec::new(), Vec::new());
    for r in records {
        data.extend_from_slice(r.as_bytes());
        data.push(b'\n');
        ends.push(data.len() as u64);
    }
    (data, ends)
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name} must be a number")))
}

/// Runs `run(seed, steps)` over the seeds the environment asks for.
pub fn seeds(default_steps: u64, run: impl Fn(u64, usize)) {
    let steps = env("SLUICE_SIM_STEPS").unwrap_or(default_steps) as usize;
    if let Some(seed) = env("SLUICE_SIM_SEED") {
        run(seed, steps);
        return;
    }
    if let Some(secs) = env("SLUICE_SIM_SECONDS") {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        let mut seed = env("SLUICE_SIM_FIRST_SEED").unwrap_or(0);
        while std::time::Instant::now() < until {
            run(seed, steps);
            seed += 1;
        }
        println!("simulated seeds up to {seed}");
        return;
    }
    for seed in 0..env("SLUICE_SIM_SEEDS").unwrap_or(64) {
        run(seed, steps);
    }
}
