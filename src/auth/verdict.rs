//! The access decision as a pure function: the mode in force, where the
//! client connects from, its credential and what the request needs, in;
//! admitted or the one denial that explains why, out.

use super::bearer::Credential;
use super::scope::{Action, Grants};
use super::tokens::TokenTable;
use sluice::http::error::HttpError;
use sluice_shards::core::Error;
use sluice_shards::ids::BUILTIN_BUCKET;

/// How clients are admitted.
pub enum Mode<'a> {
    /// `--open`: everyone, no tokens.
    Open,
    /// Neither `--tokens` nor `--open`: loopback clients only.
    Protected,
    /// `--tokens FILE`: every client needs a bearer token with the right scope.
    Tokens(&'a TokenTable),
}

/// What a request needs, by route and method.
#[derive(Debug, PartialEq, Eq)]
pub enum Need<'a> {
    /// The health probe and CORS preflights: anyone the mode lets in.
    Public,
    /// A valid token, no scope: requests that touch nothing (bad paths).
    Authenticated,
    /// The operator routes under `/v1/`.
    Operator,
    /// An action on a bucket; a fork also reads its source's bucket.
    Bucket { bucket: &'a str, action: Action, fork_source: Option<&'a str> },
}

/// Why access control denies a request (see ARCHITECTURE.md, "Refusals");
/// each maps to one error, so to one status and one short reason.
#[derive(Debug, PartialEq, Eq)]
pub enum Denial {
    /// 403: off loopback in protected mode.
    Protected,
    /// 401: no `Authorization` header.
    NoToken,
    /// 401: not a well-formed bearer token, or not one in the tokens file.
    BadToken(&'static str),
    /// 400: more than one `Authorization` header.
    RepeatedAuthorization,
    /// 403: the token sees the bucket but lacks the action.
    Forbidden(Action),
    /// 404: the token cannot see the bucket; answered as a missing one.
    Concealed { builtin: bool },
    /// 404: the token cannot see the fork source's bucket.
    ConcealedForkSource,
    /// 403: a signed read token (`?token=`) used to write, or outside its scope.
    ReadToken(&'static str),
}

/// Decides whether a request may proceed.
pub fn decide(mode: &Mode, loopback: bool, credential: Credential, need: &Need) -> Result<(), Denial> {
    let table = match mode {
        Mode::Open => return Ok(()),
        Mode::Protected if loopback => return Ok(()),
        Mode::Protected => return Err(Denial::Protected),
        Mode::Tokens(table) => table,
    };
    if *need == Need::Public {
        return Ok(());
    }
    let grants = match credential {
        Credential::None => return Err(Denial::NoToken),
        Credential::Repeated => return Err(Denial::RepeatedAuthorization),
        Credential::Malformed(why) => return Err(Denial::BadToken(why)),
        Credential::Bearer(token) => table.lookup(token.as_bytes()).ok_or(Denial::BadToken(UNKNOWN_TOKEN))?,
    };
    match *need {
        Need::Public | Need::Authenticated => Ok(()),
        Need::Operator if grants.operator() => Ok(()),
        Need::Operator => Err(Denial::Forbidden(Action::Operator)),
        Need::Bucket { bucket, action, fork_source } => {
            permit(grants, bucket, action, Denial::Concealed { builtin: bucket == BUILTIN_BUCKET })?;
            match fork_source {
                Some(source) => permit(grants, source, Action::Read, Denial::ConcealedForkSource),
                None => Ok(()),
            }
        }
    }
}

fn permit(grants: &Grants, bucket: &str, action: Action, concealed: Denial) -> Result<(), Denial> {
    if !grants.sees(bucket) {
        return Err(concealed);
    }
    if !grants.allows(bucket, action) {
        return Err(Denial::Forbidden(action));
    }
    Ok(())
}

const UNKNOWN_TOKEN: &str = "unknown or revoked bearer token";

impl Denial {
    /// The error the denial is refused with (never echoing a token).
    pub fn error(&self) -> HttpError {
        match self {
            Denial::Protected => HttpError::Forbidden(
                "protected mode: sluice serves only loopback clients until started with --tokens FILE or --open",
            ),
            Denial::NoToken => HttpError::Unauthenticated,
            Denial::BadToken(why) => HttpError::InvalidToken(why),
            Denial::RepeatedAuthorization => Error::Invalid("more than one Authorization header").into(),
            Denial::Forbidden(action) => HttpError::InsufficientScope(match action {
                Action::Read => "token lacks the 'read' permission here",
                Action::Write => "token lacks the 'write' permission here",
                Action::Admin => "token lacks the 'admin' permission here",
                Action::Operator => "token lacks the 'operator' permission",
            }),
            // Exactly what a missing bucket, stream or fork source answers.
            Denial::Concealed { builtin: false } => Error::NoBucket.into(),
            Denial::Concealed { builtin: true } => Error::NoStream.into(),
            Denial::ConcealedForkSource => Error::NotFound(FORK_SOURCE_NOT_FOUND).into(),
            Denial::ReadToken(why) => HttpError::InsufficientScope(why),
        }
    }
}

/// The store's answer for a fork source that does not exist.
const FORK_SOURCE_NOT_FOUND: &str = "fork source not found";

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per role, hashed here the way an operator would.
    fn table() -> TokenTable {
        use sha2::{Digest, Sha256};
        let line = |token: &str, pattern: &str, actions: &str| {
            let hash: String = Sha256::digest(token).iter().map(|b| format!("{b:02x}")).collect();
            format!("{hash} {pattern} {actions}\n")
        };
        let text = [
            line("reader", "orders", "read"),
            line("writer", "orders", "read,write"),
            line("writer", "v1-stream", "read,write"),
            line("forker", "logs-*", "write"),
            line("forker", "orders", "read"),
            line("admin", "*", "admin"),
            line("ops", "*", "operator"),
        ]
        .concat();
        TokenTable::parse(&text).unwrap()
    }

    fn bucket(bucket: &str, action: Action) -> Need<'_> {
        Need::Bucket { bucket, action, fork_source: None }
    }

    #[test]
    fn open_and_protected_modes() {
        let need = bucket("orders", Action::Admin);
        assert_eq!(decide(&Mode::Open, false, Credential::None, &need), Ok(()));
        assert_eq!(decide(&Mode::Protected, true, Credential::None, &need), Ok(()));
        assert_eq!(decide(&Mode::Protected, false, Credential::None, &need), Err(Denial::Protected));
        // Protected mode refuses off-loopback clients everything, probes included.
        assert_eq!(decide(&Mode::Protected, false, Credential::Bearer("x"), &Need::Public), Err(Denial::Protected));
    }

    #[test]
    fn tokens_mode_authenticates_first() {
        let t = table();
        let m = Mode::Tokens(&t);
        let need = bucket("orders", Action::Read);
        assert_eq!(decide(&m, true, Credential::None, &Need::Public), Ok(()));
        // Loopback earns nothing once tokens are configured.
        assert_eq!(decide(&m, true, Credential::None, &need), Err(Denial::NoToken));
        assert_eq!(decide(&m, true, Credential::Repeated, &need), Err(Denial::RepeatedAuthorization));
        assert_eq!(decide(&m, true, Credential::Malformed("m"), &need), Err(Denial::BadToken("m")));
        assert_eq!(decide(&m, true, Credential::Bearer("nope"), &need), Err(Denial::BadToken(UNKNOWN_TOKEN)));
        let refused = decide(&m, true, Credential::Bearer("nope"), &Need::Authenticated);
        assert_eq!(refused.unwrap_err().error(), HttpError::InvalidToken(UNKNOWN_TOKEN));
        assert_eq!(decide(&m, false, Credential::Bearer("ops"), &Need::Authenticated), Ok(()));
    }

    #[test]
    fn scopes_decide_404_then_403() {
        let t = table();
        let m = Mode::Tokens(&t);
        let d = |token: &'static str, need: &Need| decide(&m, false, Credential::Bearer(token), need);
        assert_eq!(d("reader", &bucket("orders", Action::Read)), Ok(()));
        assert_eq!(d("reader", &bucket("orders", Action::Write)), Err(Denial::Forbidden(Action::Write)));
        assert_eq!(d("reader", &bucket("billing", Action::Read)), Err(Denial::Concealed { builtin: false }));
        assert_eq!(d("reader", &bucket(BUILTIN_BUCKET, Action::Read)), Err(Denial::Concealed { builtin: true }));
        assert_eq!(d("writer", &bucket(BUILTIN_BUCKET, Action::Write)), Ok(()));
        assert_eq!(d("writer", &bucket("orders", Action::Admin)), Err(Denial::Forbidden(Action::Admin)));
        assert_eq!(d("admin", &bucket("anything", Action::Admin)), Ok(()));
        assert_eq!(d("admin", &bucket("anything", Action::Read)), Err(Denial::Forbidden(Action::Read)));
        assert_eq!(d("admin", &Need::Operator), Err(Denial::Forbidden(Action::Operator)));
        assert_eq!(d("ops", &Need::Operator), Ok(()));
        // An operator token sees no bucket.
        assert_eq!(d("ops", &bucket("orders", Action::Read)), Err(Denial::Concealed { builtin: false }));
    }

    #[test]
    fn forks_need_read_on_the_source() {
        let t = table();
        let m = Mode::Tokens(&t);
        let fork = |source| Need::Bucket { bucket: "logs-1", action: Action::Write, fork_source: Some(source) };
        let d = |token: &'static str, need: &Need| decide(&m, false, Credential::Bearer(token), need);
        assert_eq!(d("forker", &fork("orders")), Ok(()));
        assert_eq!(d("forker", &fork("logs-0")), Err(Denial::Forbidden(Action::Read)));
        assert_eq!(d("forker", &fork("billing")), Err(Denial::ConcealedForkSource));
        // The target is checked first.
        let into_orders = Need::Bucket { bucket: "orders", action: Action::Write, fork_source: Some("billing") };
        assert_eq!(d("forker", &into_orders), Err(Denial::Forbidden(Action::Write)));
    }

    #[test]
    fn refusals_never_echo_the_token() {
        use sluice::http::Response;
        let t = table();
        let m = Mode::Tokens(&t);
        let secret = "s3cr3t-token-value";
        let need = bucket("orders", Action::Read);
        let r = Response::from(decide(&m, false, Credential::Bearer(secret), &need).unwrap_err().error());
        assert_eq!(r.status, 401);
        assert!(!String::from_utf8_lossy(&r.body).contains(secret));
        assert!(r.headers.iter().all(|(_, v)| !v.contains(secret)));
        assert!(r.headers.iter().any(|(n, v)| *n == "www-authenticate" && v.contains("invalid_token")));
    }
}
