//! A shard that cannot continue stops the whole process: a panic on any
//! thread prints one line naming the thread and exits with [`EXIT_PANIC`],
//! so a supervisor restarts sluice instead of it serving with a dead shard.
//! Acknowledged writes are already durable, so exiting loses nothing.
//!
//! `SLUICE_FAULT=panic-shard-N` makes shard N panic once it is serving:
//! fault injection for the test that proves the above.

use std::io::Write;

/// Exit status after a panic (EX_SOFTWARE).
pub const EXIT_PANIC: i32 = 70;

/// Environment variable read by [`injected_panic`].
pub const FAULT_VAR: &str = "SLUICE_FAULT";

/// Installs the panic hook: the default report, then one line, then exit.
pub fn stop_process_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        let _ = writeln!(
            std::io::stderr(),
            "sluice: fatal: thread {name} panicked; stopping the process (exit {EXIT_PANIC}) so it can be restarted"
        );
        std::process::exit(EXIT_PANIC);
    }));
}

/// Whether the fault-injection variable asks shard `id` to panic.
pub fn injected_panic(id: usize) -> bool {
    std::env::var(FAULT_VAR).is_ok_and(|v| v == format!("panic-shard-{id}"))
}
