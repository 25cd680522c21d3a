//! Access control: protected mode off loopback, bearer tokens scoped to
//! buckets and actions (reloaded on SIGHUP), and CORS origins. Decided at
//! the shard that parses a request, before any cross-shard work.

pub mod bearer;
mod ct;
pub mod need;
pub mod origin;
pub mod scope;
pub mod signed;
pub mod tokens;
pub mod verdict;

use crate::config::Config;
use crate::route::Route;
use crate::start_error::StartError;
use sluice::http::cors::{Cors, CorsPolicy};
use sluice::http::error::HttpError;
use sluice::http::{headers as h, Head, Method, Response};
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use tokens::TokenTable;
use verdict::{decide, Mode};

/// The refusal of a write from a web origin not allowed to write.
const CROSS_ORIGIN_WRITE: &str =
    "cross-origin write refused: list the page's origin in --cors-origins (or send a bearer token)";

/// How clients are admitted, as configured.
enum Kind {
    Open,
    Protected,
    Tokens(PathBuf),
}

/// The access-control state every shard shares. The token table is
/// replaced whole on reload; shards notice through `generation`.
pub struct Access {
    kind: Kind,
    cors: CorsPolicy,
    /// `--cors-origins` was given (not the mode's default).
    cors_explicit: bool,
    table: RwLock<Arc<TokenTable>>,
    generation: AtomicU64,
    /// Signs and checks read tokens (tokens mode, once the data dir is ready).
    read_key: Option<signed::ReadKey>,
}

impl Access {
    /// Builds the state from the configuration, loading the tokens file.
    pub fn from_config(cfg: &Config) -> Result<Access, StartError> {
        assert!(!(cfg.tokens.is_some() && cfg.open), "the CLI refuses --tokens with --open");
        let (kind, table) = match &cfg.tokens {
            Some(path) => {
                // Absolute, so the log names it fully and reloads read the same file.
                let path = std::fs::canonicalize(path).map_err(|e| format!("tokens file {}: {e}", path.display()))?;
                let table = TokenTable::load(&path)?;
                (Kind::Tokens(path), table)
            }
            None if cfg.open => (Kind::Open, TokenTable::default()),
            None => (Kind::Protected, TokenTable::default()),
        };
        // With tokens, browsers get nothing unless origins are listed.
        let default_cors = match kind {
            Kind::Tokens(_) => CorsPolicy::Origins(Vec::new()),
            _ => CorsPolicy::Any,
        };
        Ok(Access {
            kind,
            cors: cfg.cors_origins.clone().unwrap_or(default_cors),
            cors_explicit: cfg.cors_origins.is_some(),
            table: RwLock::new(Arc::new(table)),
            generation: AtomicU64::new(0),
            read_key: None,
        })
    }

    /// In tokens mode, loads (or creates) the read-token key in `data_dir`.
    pub fn load_read_key(&mut self, data_dir: &std::path::Path) -> Result<(), StartError> {
        if let Kind::Tokens(_) = self.kind {
            self.read_key = Some(signed::ReadKey::load_or_create(data_dir)?);
        }
        Ok(())
    }

    /// Logs the mode in force (one line at start).
    pub fn log_mode(&self, listen_loopback: bool) {
        let cors = match &self.cors {
            CorsPolicy::Any => "*".to_string(),
            CorsPolicy::Origins(list) if list.is_empty() => "none".to_string(),
            CorsPolicy::Origins(list) => list.join(","),
        };
        match &self.kind {
            Kind::Open => {
                tracing::warn!(mode = "open", %cors, "access: every client is served without a token (--open)")
            }
            Kind::Protected if listen_loopback => {
                tracing::info!(mode = "protected", %cors, "access: loopback clients only (listening on loopback)")
            }
            Kind::Protected => tracing::info!(
                mode = "protected",
                %cors,
                "access: loopback clients only; others get 403 until started with --tokens FILE or --open"
            ),
            Kind::Tokens(path) => tracing::info!(
                mode = "tokens",
                tokens = self.current().len(),
                file = %path.display(),
                %cors,
                "access: bearer tokens required (all but /v1/healthz and preflights)"
            ),
        }
    }

    /// Re-reads the tokens file (on SIGHUP). A bad file is refused with
    /// one log line and the tokens in force stay in force.
    pub fn reload(&self) {
        let Kind::Tokens(path) = &self.kind else {
            return;
        };
        match TokenTable::load(path) {
            Ok(table) => {
                let n = table.len();
                *self.table.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(table);
                self.generation.fetch_add(1, Ordering::Release);
                tracing::info!(tokens = n, "tokens file reloaded");
            }
            Err(reason) => tracing::error!(%reason, "tokens file refused; the previous tokens stay in force"),
        }
    }

    fn current(&self) -> Arc<TokenTable> {
        self.table.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// One shard's gate: the shared [`Access`] plus a cached token table, so a
/// request costs one shared atomic load, not a lock.
pub struct Gate {
    access: Arc<Access>,
    seen: Cell<u64>,
    table: RefCell<Arc<TokenTable>>,
}

impl Gate {
    pub fn new(access: Arc<Access>) -> Gate {
        let table = RefCell::new(access.current());
        Gate { seen: Cell::new(access.generation.load(Ordering::Acquire)), access, table }
    }

    /// The CORS answer for a request from `origin` (`None` before a head is parsed).
    pub fn cors(&self, origin: Option<&str>) -> Cors {
        self.access.cors.answer(origin)
    }

    /// Admits a routed request (`None`: serve it) or answers it here: a
    /// refusal, or the CORS preflight.
    pub fn admit(&self, loopback: bool, head: &Head, route: &Route, cors: &Cors) -> Option<Response> {
        let source = need::fork_source(head);
        let need = need::classify(head.method, route, source.as_deref());
        let table;
        let mode = match &self.access.kind {
            Kind::Open => Mode::Open,
            Kind::Protected => Mode::Protected,
            Kind::Tokens(_) => {
                table = self.table();
                Mode::Tokens(&table)
            }
        };
        let credential = bearer::credential(head.values(h::AUTHORIZATION));
        let signed = match (&self.access.read_key, &credential) {
            (Some(key), bearer::Credential::None) => signed::from_query(head.target()).map(|t| (key, t)),
            _ => None,
        };
        let decided = match signed {
            Some((key, token)) => signed::decide(key, &token, sluice::http::date::unix_ms(), head.method, &need, route),
            None => decide(&mode, loopback, credential, &need),
        };
        if let origin::Site::Cross(from) = origin::site(head) {
            let authenticated = matches!(mode, Mode::Tokens(_)) && decided.is_ok();
            if !origin::allowed(&self.access.cors, self.access.cors_explicit, cors, authenticated) {
                tracing::debug!(origin = from.as_deref().unwrap_or("-"), "cross-origin write refused");
                return Some(HttpError::Forbidden(CROSS_ORIGIN_WRITE).into());
            }
        }
        match decided {
            Err(denial) => Some(denial.error().into()),
            Ok(()) if head.method == Method::Options => Some(cors.preflight()),
            Ok(()) => None,
        }
    }

    /// A read token for `scope` living `ttl`, and its expiry (Unix ms);
    /// `None` unless tokens are in force.
    pub fn mint(&self, scope: &crate::route::ReadScope, ttl: std::time::Duration) -> Option<(String, u64)> {
        let expires = sluice::http::date::unix_ms() + ttl.as_millis() as u64;
        self.access.read_key.as_ref().map(|key| (key.mint(scope, expires), expires))
    }

    /// The table in force, refreshed if a reload happened since last use.
    fn table(&self) -> std::cell::Ref<'_, Arc<TokenTable>> {
        let generation = self.access.generation.load(Ordering::Acquire);
        if generation != self.seen.get() {
            *self.table.borrow_mut() = self.access.current();
            self.seen.set(generation);
        }
        self.table.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};
    use sluice::http::parse_head;
    use sluice::http::url::parse_target;

    fn line(token: &str) -> String {
        let hash: String = Sha256::digest(token).iter().map(|b| format!("{b:02x}")).collect();
        format!("{hash} * read\n")
    }

    /// The status `gate` gives a read of `/v1/stream/x` with `token`.
    fn status(gate: &Gate, token: &str) -> Option<u16> {
        let raw = format!("GET /v1/stream/x HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\r\n");
        let head = parse_head(raw.as_bytes(), 4096, 16).unwrap();
        let route = crate::route::route(&head, &parse_target(head.target()).unwrap());
        gate.admit(false, &head, &route, &Cors::Denied).map(|r| r.status)
    }

    #[test]
    fn every_gate_sees_a_reload_and_a_bad_file_changes_nothing() {
        let dir = std::env::temp_dir().join(format!("sluice-gate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens");
        std::fs::write(&path, line("old")).unwrap();
        let access = Arc::new(Access {
            kind: Kind::Tokens(path.clone()),
            cors: CorsPolicy::Any,
            cors_explicit: false,
            table: RwLock::new(Arc::new(TokenTable::load(&path).unwrap())),
            generation: AtomicU64::new(0),
            read_key: None,
        });
        let (a, b) = (Gate::new(access.clone()), Gate::new(access.clone()));
        assert_eq!((status(&a, "old"), status(&b, "new")), (None, Some(401)));
        std::fs::write(&path, line("new")).unwrap();
        access.reload();
        for gate in [&a, &b] {
            assert_eq!((status(gate, "old"), status(gate, "new")), (Some(401), None));
        }
        std::fs::write(&path, "garbage\n").unwrap();
        access.reload();
        std::fs::remove_file(&path).unwrap();
        access.reload();
        assert_eq!(access.generation.load(Ordering::Acquire), 1, "refused files are not installed");
        assert_eq!((status(&a, "old"), status(&b, "new")), (Some(401), None));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
