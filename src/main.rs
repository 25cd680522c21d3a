//! sluice: a Durable Streams server on pinned glommio shards with an fsync-durable log.

mod config;
mod conn;
mod forward;
mod handlers;
mod mesh;
mod relay;
mod server;
mod shard;
mod sse;
mod watchdog;

use config::{parse_args, Command, USAGE};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse_args(&args) {
        Ok(Command::Help) => print!("{USAGE}"),
        Ok(Command::Serve(cfg)) => {
            if let Err(e) = server::run(cfg) {
                eprintln!("sluice: {e}");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("sluice: {e}");
            std::process::exit(2);
        }
    }
}
