//! `sluice serve --config FILE` (or `SLUICE_CONFIG`): a TOML file of
//! settings whose keys are the flags' names (`data-dir = "/var/lib/sluice"`,
//! `shards = 4`, `access-log = true`). Its values join the command line as
//! `--key=value` unless the flag is already there or its `SLUICE_*`
//! variable is set, so clap checks them like any other value and the
//! precedence is: flags, then variables, then the file, then the defaults.
//! An unknown key is refused with one line.

use crate::config::Cli;
use crate::edge_limits::MAX_CONFIG_FILE_BYTES;
use crate::start_error::StartError;
use clap::CommandFactory;
use std::ffi::OsString;
use std::path::PathBuf;

/// The file a command line took settings from, and which.
#[derive(Debug, Default)]
pub struct Applied {
    pub file: Option<PathBuf>,
    keys: Vec<String>,
}

impl Applied {
    /// "config file F" when flag `long` got its value from the file.
    pub fn source(&self, long: &str) -> Option<String> {
        let file = self.file.as_ref()?;
        self.keys.iter().any(|k| k == long).then(|| format!("config file {}", file.display()))
    }
}

/// `args` (the whole command line) with the config file's settings added.
pub fn apply(mut args: Vec<OsString>) -> Result<(Vec<OsString>, Applied), StartError> {
    if args.get(1).is_none_or(|a| a != "serve") {
        return Ok((args, Applied::default()));
    }
    let given = |long: &str| {
        args.iter().filter_map(|a| a.to_str()).any(|a| a == format!("--{long}") || a.starts_with(&format!("--{long}=")))
    };
    let named = args.iter().position(|a| a == "--config").and_then(|i| args.get(i + 1)).map(PathBuf::from);
    let inline = args.iter().filter_map(|a| a.to_str()?.strip_prefix("--config=")).next().map(PathBuf::from);
    let Some(path) = named.or(inline).or_else(|| std::env::var_os("SLUICE_CONFIG").map(PathBuf::from)) else {
        return Ok((args, Applied::default()));
    };
    let table = read(&path)?;
    let failed = |why: String| format!("config file {}: {why}", path.display());
    let cmd = Cli::command();
    let serve = cmd.find_subcommand("serve").expect("the serve command exists");
    let mut applied = Applied { file: Some(path.clone()), keys: Vec::new() };
    let mut extra = Vec::new();
    for (key, value) in &table {
        let arg = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && !matches!(key.as_str(), "help" | "config"))
            .ok_or_else(|| failed(unknown(key)))?;
        let value = render(value)
            .ok_or_else(|| failed(format!("'{key}' must be a string, number, boolean or list of strings")))?;
        let from_env = arg.get_env().is_some_and(|v| std::env::var_os(v).is_some());
        if !given(key) && !from_env {
            extra.push(OsString::from(format!("--{key}={value}")));
            applied.keys.push(key.clone());
        }
    }
    args.splice(2..2, extra);
    Ok((args, applied))
}

fn read(path: &std::path::Path) -> Result<toml::Table, StartError> {
    use std::io::Read;
    let failed = |why: String| format!("config file {}: {why}", path.display());
    let file = std::fs::File::open(path).map_err(|e| failed(e.to_string()))?;
    let mut text = String::new();
    file.take(MAX_CONFIG_FILE_BYTES + 1).read_to_string(&mut text).map_err(|e| failed(e.to_string()))?;
    if text.len() as u64 > MAX_CONFIG_FILE_BYTES {
        return Err(failed(format!("larger than {MAX_CONFIG_FILE_BYTES} bytes")).into());
    }
    // toml's message spans lines (a caret under the spot): keep its first.
    Ok(text.parse::<toml::Table>().map_err(|e| failed(e.message().lines().next().unwrap_or("not TOML").to_string()))?)
}

fn unknown(key: &str) -> String {
    let dashed = key.replace('_', "-");
    if dashed != key {
        return format!("unknown key '{key}' (keys are the flags' names: '{dashed}')");
    }
    format!("unknown key '{key}' (keys are the flags' names without '--', see sluice serve --help)")
}

/// A value as its flag would take it.
fn render(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(n) => Some(n.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        toml::Value::Array(items) => {
            items.iter().map(|i| i.as_str().map(str::to_string)).collect::<Option<Vec<_>>>().map(|v| v.join(","))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_render_as_flags_take_them() {
        let t: toml::Table = "a = 's'\nb = 4\nc = true\nd = ['x', 'y']\ne = 1.5\nf = [1]".parse().expect("TOML");
        let r: Vec<Option<String>> = ["a", "b", "c", "d", "e", "f"].iter().map(|k| render(&t[*k])).collect();
        assert_eq!(r, [Some("s".into()), Some("4".into()), Some("true".into()), Some("x,y".into()), None, None]);
        assert!(unknown("data_dir").contains("'data-dir'"));
    }
}
