//! Process facts from /proc: resident memory (VmRSS, VmHWM) and CPU time, for
//! the server (`--server-pid`) and for this load generator itself.

use std::time::Instant;

/// A `Vm*:` field of /proc/PID/status, in KiB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// Resident set size in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// Peak resident set size in KiB.
pub fn hwm_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmHWM:")
}

/// User + system CPU seconds used so far by `pid` (all threads).
pub fn cpu_secs(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

/// Busy CPU seconds of the whole machine (all processes, all cores), from
/// the `cpu` line of /proc/stat: everything but idle and iowait.
pub fn machine_busy_secs() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().next()?.strip_prefix("cpu ")?;
    let f: Vec<u64> = line.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let busy: u64 = f.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, v)| v).sum();
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(busy as f64 / hz)
}

/// Whole-machine busy cores over a window: shows load from other processes.
pub struct MachineWindow {
    start: Option<(Instant, f64)>,
}

impl MachineWindow {
    pub fn begin() -> MachineWindow {
        MachineWindow { start: machine_busy_secs().map(|c| (Instant::now(), c)) }
    }

    pub fn cores(&self) -> Option<f64> {
        let (t0, c0) = self.start?;
        let secs = t0.elapsed().as_secs_f64();
        let c1 = machine_busy_secs()?;
        (secs > 0.0).then(|| (c1 - c0) / secs)
    }
}

/// CPU used between two instants, as cores busy on average.
pub struct CpuWindow {
    pid: u32,
    start: Option<(Instant, f64)>,
}

impl CpuWindow {
    pub fn begin(pid: u32) -> CpuWindow {
        CpuWindow { pid, start: cpu_secs(pid).map(|c| (Instant::now(), c)) }
    }

    pub fn cores(&self) -> Option<f64> {
        let (t0, c0) = self.start?;
        let c1 = cpu_secs(self.pid)?;
        let secs = t0.elapsed().as_secs_f64();
        (secs > 0.0).then(|| (c1 - c0) / secs)
    }
}

/// Sleeps until `t` (no-op if past).
pub fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let me = std::process::id();
        assert!(rss_kib(me).unwrap() > 0);
        assert!(hwm_kib(me).unwrap() >= rss_kib(me).unwrap() / 2);
        assert!(cpu_secs(me).unwrap() >= 0.0);
        assert!(machine_busy_secs().unwrap() > 0.0);
    }
}
