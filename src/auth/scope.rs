//! Scopes: what one bearer token may do, as bucket patterns times actions.

use crate::start_error::StartError;

/// What a request does, from the table of actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// GET, HEAD, SSE, bootstrap, snapshots, attrs, listing.
    Read,
    /// Create, append, append-batch, close, attrs, snapshot publish, retention.
    Write,
    /// Bucket create and delete, stream delete.
    Admin,
    /// `/v1/metrics` and the other operator routes.
    Operator,
}

impl Action {
    pub const ALL: [Action; 4] = [Action::Read, Action::Write, Action::Admin, Action::Operator];

    /// The name used in the tokens file and in refusals.
    pub fn name(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Write => "write",
            Action::Admin => "admin",
            Action::Operator => "operator",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of actions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Actions(u8);

impl Actions {
    /// Parses `read,write,...` (at least one, no unknown names).
    pub fn parse(s: &str) -> Result<Actions, StartError> {
        let mut set = Actions::default();
        for name in s.split(',') {
            let a = Action::ALL
                .into_iter()
                .find(|a| a.name() == name)
                .ok_or_else(|| format!("unknown action '{name}' (use read, write, admin, operator)"))?;
            set.0 |= a.bit();
        }
        Ok(set)
    }

    pub fn contains(self, a: Action) -> bool {
        self.0 & a.bit() != 0
    }

    /// Whether any bucket action (not operator) is in the set.
    fn any_bucket_action(self) -> bool {
        self.0 & !Action::Operator.bit() != 0
    }
}

/// Which buckets a scope covers: one, those starting with a prefix, or all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    Exact(String),
    Prefix(String),
    Any,
}

impl Pattern {
    /// Parses `orders`, `orders-*` or `*`. Only bucket-id characters are
    /// allowed, so a pattern can never match something no bucket is called.
    pub fn parse(s: &str) -> Result<Pattern, StartError> {
        let id_chars =
            |p: &str| p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if s == "*" {
            return Ok(Pattern::Any);
        }
        match s.strip_suffix('*') {
            Some(prefix)
                if !prefix.is_empty() && prefix.len() < sluice_shards::ids::MAX_BUCKET_ID && id_chars(prefix) =>
            {
                Ok(Pattern::Prefix(prefix.to_string()))
            }
            None if sluice_shards::ids::valid_bucket_id(s) => Ok(Pattern::Exact(s.to_string())),
            _ => Err(format!(
                "bad bucket pattern '{s}' (a bucket id, a prefix ending in '*' such as 'orders-*', or '*')"
            )
            .into()),
        }
    }

    pub fn matches(&self, bucket: &str) -> bool {
        match self {
            Pattern::Exact(b) => b == bucket,
            Pattern::Prefix(p) => bucket.starts_with(p.as_str()),
            Pattern::Any => true,
        }
    }
}

/// One line of the tokens file: a pattern and the actions allowed on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    pub pattern: Pattern,
    pub actions: Actions,
}

/// Everything one token may do: the union of its scopes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    pub scopes: Vec<Scope>,
}

impl Grants {
    /// Whether the token may know that `bucket` exists: some bucket action
    /// on a pattern that covers it. Otherwise the bucket is concealed (404).
    pub fn sees(&self, bucket: &str) -> bool {
        self.scopes.iter().any(|s| s.actions.any_bucket_action() && s.pattern.matches(bucket))
    }

    /// Whether the token may do `action` on `bucket`.
    pub fn allows(&self, bucket: &str, action: Action) -> bool {
        self.scopes.iter().any(|s| s.actions.contains(action) && s.pattern.matches(bucket))
    }

    /// Whether the token may use the operator routes.
    pub fn operator(&self) -> bool {
        self.scopes.iter().any(|s| s.actions.contains(Action::Operator))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(lines: &[(&str, &str)]) -> Grants {
        Grants {
            scopes: lines
                .iter()
                .map(|(p, a)| Scope { pattern: Pattern::parse(p).unwrap(), actions: Actions::parse(a).unwrap() })
                .collect(),
        }
    }

    #[test]
    fn patterns() {
        assert_eq!(Pattern::parse("*"), Ok(Pattern::Any));
        assert_eq!(Pattern::parse("orders"), Ok(Pattern::Exact("orders".into())));
        assert_eq!(Pattern::parse("ord*"), Ok(Pattern::Prefix("ord".into())));
        assert_eq!(Pattern::parse("o*"), Ok(Pattern::Prefix("o".into())));
        for bad in ["", "abc", "Orders", "*orders", "or*ders", "a**", "**", "orders/x", &"a".repeat(65)] {
            assert!(Pattern::parse(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(Pattern::parse(&format!("{}*", "a".repeat(63))).is_ok());
        assert!(Pattern::parse(&format!("{}*", "a".repeat(64))).is_err());
        let p = Pattern::parse("logs-*").unwrap();
        assert!(p.matches("logs-eu") && p.matches("logs-") && !p.matches("logs") && !p.matches("xlogs-eu"));
        assert!(Pattern::parse("logs").unwrap().matches("logs"));
        assert!(!Pattern::parse("logs").unwrap().matches("logs2"));
    }

    #[test]
    fn actions() {
        let a = Actions::parse("read,admin").unwrap();
        assert!(a.contains(Action::Read) && a.contains(Action::Admin));
        assert!(!a.contains(Action::Write) && !a.contains(Action::Operator));
        for bad in ["", "read,", "Read", "all", "read write", "read,,write"] {
            assert!(Actions::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn visibility_and_permission_are_separate() {
        let g = grants(&[("orders", "read"), ("logs-*", "read,write"), ("*", "operator")]);
        assert!(g.sees("orders") && g.allows("orders", Action::Read) && !g.allows("orders", Action::Write));
        assert!(g.sees("logs-a") && g.allows("logs-a", Action::Write) && !g.allows("logs-a", Action::Admin));
        // Operator over `*` grants no sight of buckets.
        assert!(!g.sees("billing") && !g.allows("billing", Action::Read));
        assert!(g.operator());
        assert!(!grants(&[("*", "read")]).operator());
    }
}
