//! sluice: a Durable Streams server on pinned glommio shards with an fsync-durable log.

use clap::error::ErrorKind;
use clap::Parser;
use sluice::config::{self, Cli, Command};
use sluice::{check, config_file, fatal, logging, server};
use std::io::Write;

fn main() {
    let (args, from_file) = match config_file::apply(std::env::args_os().collect()) {
        Ok(applied) => applied,
        Err(why) => {
            let _ = writeln!(std::io::stderr(), "sluice: {why}");
            std::process::exit(2);
        }
    };
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => e.exit(),
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            std::process::exit(2);
        }
        Err(e) => {
            // One line: clap's first line without its "error: " prefix, and
            // the variable the value came from when it came from one.
            let text = e.to_string();
            let line = text.lines().next().unwrap_or("invalid command line");
            let source =
                config::value_source(&e).or_else(|| config::refused_flag(&e).and_then(|f| from_file.source(&f)));
            let from = source.map(|s| format!(" (from {s})")).unwrap_or_default();
            // Not eprintln!: it panics on a closed stderr.
            let _ = writeln!(
                std::io::stderr(),
                "sluice: {}{from} (see sluice serve --help)",
                line.trim_start_matches("error: ")
            );
            std::process::exit(2);
        }
    };
    match cli.command {
        Command::Check(args) => std::process::exit(check::run(&args.data_dir)),
        Command::Restore(args) => std::process::exit(sluice::tier::restore::run(&args)),
        Command::Serve(cfg) => {
            if let Some(why) = cfg.contradiction().map(str::to_string).or_else(|| cfg.unserved()) {
                let _ = writeln!(std::io::stderr(), "sluice: {why} (see sluice serve --help)");
                std::process::exit(2);
            }
            logging::init(&cfg.log_level, &cfg.log_format);
            fatal::stop_process_on_panic();
            if let Err(code) = server::run(*cfg) {
                std::process::exit(code);
            }
        }
    }
}
