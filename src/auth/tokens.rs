//! The tokens file: SHA-256 hashes of bearer tokens (never the tokens) and
//! the scopes each one holds, one scope per line.
//!
//! ```text
//! # sha256(token), hex                                               bucket pattern  actions
//! 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  orders          read,write
//! 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  logs-*          read
//! 60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752  *               admin,operator
//! ```
//! Lines with the same hash add up; `#` starts a comment; blank lines are skipped.

use super::ct::{ct_find, HASH_LEN};
use super::scope::{Action, Actions, Grants, Pattern, Scope};
use crate::edge_limits::{MAX_SCOPES, MAX_TOKENS_FILE_BYTES};
use crate::start_error::StartError;
use sha2::{Digest, Sha256};
use std::path::Path;

/// The tokens in force: hashes and their grants.
#[derive(Debug, Default)]
pub struct TokenTable {
    hashes: Vec<[u8; HASH_LEN]>,
    grants: Vec<Grants>,
}

impl TokenTable {
    /// Reads and parses `path`; errors name the file and the line.
    pub fn load(path: &Path) -> Result<TokenTable, StartError> {
        use std::io::Read;
        let name = path.display();
        let failed = |e: std::io::Error| format!("tokens file {name}: {e}");
        use std::os::unix::fs::PermissionsExt;
        let mut text = String::new();
        let file = std::fs::File::open(path).map_err(failed)?;
        let mode = file.metadata().map_err(failed)?.permissions().mode() & 0o777;
        if mode & 0o022 != 0 {
            return Err(format!(
                "tokens file {name} is writable by group or others (mode {mode:o}): anyone who can write it \
                 can grant themselves access (chmod 600 it)"
            )
            .into());
        }
        if mode & 0o044 != 0 {
            tracing::warn!(file = %name, mode = %format!("{mode:o}"), "tokens file is readable by group or others (chmod 600 it)");
        }
        // Read at most one byte past the limit, however large the file is.
        file.take(MAX_TOKENS_FILE_BYTES + 1).read_to_string(&mut text).map_err(failed)?;
        if text.len() as u64 > MAX_TOKENS_FILE_BYTES {
            return Err(format!("tokens file {name} is larger than {MAX_TOKENS_FILE_BYTES} bytes").into());
        }
        let table = TokenTable::parse(&text).map_err(|e| format!("tokens file {name}: {e}"))?;
        if table.len() == 0 {
            tracing::warn!(file = %name, "tokens file holds no tokens: every request but /v1/healthz gets 401");
        }
        Ok(table)
    }

    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<TokenTable, StartError> {
        let mut table = TokenTable::default();
        let mut scopes = 0;
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            scopes += 1;
            if scopes > MAX_SCOPES {
                return Err(format!("more than {MAX_SCOPES} scope lines").into());
            }
            let (hash, scope) = parse_line(line).map_err(|why| format!("line {}: {why}", n + 1))?;
            match ct_find(&hash, table.hashes.iter()) {
                Some(i) => table.grants[i].scopes.push(scope),
                None => {
                    table.hashes.push(hash);
                    table.grants.push(Grants { scopes: vec![scope] });
                }
            }
        }
        Ok(table)
    }

    /// How many distinct tokens the table holds.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// The grants of `token`, found by its hash in constant time.
    pub fn lookup(&self, token: &[u8]) -> Option<&Grants> {
        let hash: [u8; HASH_LEN] = Sha256::digest(token).into();
        ct_find(&hash, self.hashes.iter()).map(|i| &self.grants[i])
    }
}

fn parse_line(line: &str) -> Result<([u8; HASH_LEN], Scope), StartError> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [hash, pattern, actions] = fields[..] else {
        return Err("expected three fields: sha256-hex bucket-pattern actions".into());
    };
    let hash = parse_hex(hash).ok_or("the first field must be 64 hex digits (the token's SHA-256)")?;
    let pattern = Pattern::parse(pattern)?;
    let actions = Actions::parse(actions)?;
    if actions.contains(Action::Operator) && pattern != Pattern::Any {
        return Err("operator is not bucket-scoped: grant it on the pattern '*'".into());
    }
    Ok((hash, Scope { pattern, actions }))
}

fn parse_hex(s: &str) -> Option<[u8; HASH_LEN]> {
    if s.len() != HASH_LEN * 2 {
        return None;
    }
    let mut out = [0u8; HASH_LEN];
    for (i, pair) in s.as_bytes().chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sha256("test") and sha256("other").
    const TEST: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    const OTHER: &str = "d9298a10d1b0735837dc4bd85dac641b0f3cef27a47e5d53a54f2f3f5b2fcffa";

    #[test]
    fn parses_and_merges_lines_per_hash() {
        let text = format!(
            "# comment\n\n{TEST}  orders  read,write   # trailing comment\n{TEST} logs-* read\n{} * admin,operator\n",
            OTHER.to_uppercase()
        );
        let t = TokenTable::parse(&text).unwrap();
        assert_eq!(t.len(), 2);
        let g = t.lookup(b"test").unwrap();
        assert_eq!(g.scopes.len(), 2);
        assert!(g.allows("orders", Action::Write) && g.allows("logs-x", Action::Read));
        assert!(!g.operator());
        let g = t.lookup(b"other").unwrap();
        assert!(g.operator() && g.allows("anything", Action::Admin));
        assert!(t.lookup(b"tes").is_none());
        assert!(t.lookup(b"").is_none());
        // The hash itself is not a token.
        assert!(t.lookup(TEST.as_bytes()).is_none());
        assert_eq!(TokenTable::parse("").unwrap().len(), 0);
    }

    #[test]
    fn refuses_bad_lines_with_their_number() {
        let cases = [
            (format!("{TEST} orders"), "three fields"),
            (format!("{TEST} orders read extra"), "three fields"),
            ("test orders read".to_string(), "64 hex digits"),
            (format!("{}g orders read", &TEST[..63]), "64 hex digits"),
            (format!("{TEST}00 orders read"), "64 hex digits"),
            (format!("{TEST} Orders read"), "bad bucket pattern"),
            (format!("{TEST} orders rw"), "unknown action"),
            (format!("{TEST} orders operator"), "operator is not bucket-scoped"),
            (format!("{TEST} ü read"), "bad bucket pattern"),
        ];
        for (line, why) in cases {
            let err = TokenTable::parse(&format!("# header\n{line}\n")).unwrap_err().to_string();
            assert!(err.starts_with("line 2: ") && err.contains(why), "{line:?}: {err}");
            assert!(!err.contains(TEST), "errors never repeat a hash: {err}");
        }
    }

    #[test]
    fn limits() {
        let line = format!("{TEST} * read\n");
        assert!(TokenTable::parse(&line.repeat(MAX_SCOPES)).is_ok());
        assert!(TokenTable::parse(&line.repeat(MAX_SCOPES + 1)).unwrap_err().to_string().contains("more than"));
        let dir = std::env::temp_dir().join(format!("sluice-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big");
        std::fs::write(&big, vec![b'#'; MAX_TOKENS_FILE_BYTES as usize + 1]).unwrap();
        assert!(TokenTable::load(&big).unwrap_err().to_string().contains("larger than"));
        assert!(TokenTable::load(&dir.join("missing")).unwrap_err().to_string().contains("missing"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
