//! Subscription patterns: `*` matches one path segment, `**` zero or more,
//! anything else literally; and the per-shard trie of segments that finds
//! every subscription interested in a stream path in O(path segments),
//! whatever the number of subscriptions.

use super::bounds::{MAX_PATTERN_BYTES, MAX_PATTERN_SEGMENTS};
use std::collections::{BTreeMap, HashMap};

/// A pattern's segments, checked: non-empty segments, wildcards only as whole segments.
pub fn parse_pattern(pattern: &str) -> Result<Vec<&str>, &'static str> {
    if pattern.is_empty() {
        return Err("pattern must not be empty");
    }
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err("pattern is longer than 256 bytes");
    }
    let segs: Vec<&str> = pattern.split('/').collect();
    if segs.len() > MAX_PATTERN_SEGMENTS {
        return Err("pattern has more than 32 segments");
    }
    for s in &segs {
        if s.is_empty() {
            return Err("pattern has an empty segment");
        }
        if s.contains('*') && *s != "*" && *s != "**" {
            return Err("'*' and '**' must be whole pattern segments");
        }
    }
    Ok(segs)
}

/// Whether `path` matches `pattern` (both without leading or trailing '/').
pub fn matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    match_at(&p, &s)
}

fn match_at(p: &[&str], s: &[&str]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(&"**") => (0..=s.len()).any(|i| match_at(&p[1..], &s[i..])),
        Some(&"*") => !s.is_empty() && match_at(&p[1..], &s[1..]),
        Some(lit) => s.first() == Some(lit) && match_at(&p[1..], &s[1..]),
    }
}

/// The literal prefix of a pattern (for listing candidate streams).
pub fn literal_prefix(pattern: &str) -> String {
    let mut out = String::new();
    for seg in pattern.split('/') {
        if seg == "*" || seg == "**" {
            return out;
        }
        out.push_str(seg);
        out.push('/');
    }
    out.pop();
    out
}

/// Interested subscriptions, by id, with their owner shard.
pub type Interested = BTreeMap<String, usize>;

#[derive(Default)]
struct Node {
    literal: HashMap<String, Node>,
    star: Option<Box<Node>>,
    globstar: Option<Box<Node>>,
    /// Subscriptions whose pattern ends here: id -> (owner, patterns of it ending here).
    here: BTreeMap<String, (usize, u32)>,
}

impl Node {
    fn is_empty(&self) -> bool {
        self.literal.is_empty() && self.star.is_none() && self.globstar.is_none() && self.here.is_empty()
    }
}

/// Patterns of every subscription on the server (each shard holds a copy).
#[derive(Default)]
pub struct Trie {
    root: Node,
    entries: usize,
}

impl Trie {
    /// Registers `pattern` (already checked) for subscription `id` on shard `owner`.
    pub fn insert(&mut self, pattern: &str, id: &str, owner: usize) {
        let mut node = &mut self.root;
        for seg in pattern.split('/') {
            node = match seg {
                "*" => node.star.get_or_insert_with(Box::default),
                "**" => node.globstar.get_or_insert_with(Box::default),
                lit => node.literal.entry(lit.to_string()).or_default(),
            };
        }
        node.here.entry(id.to_string()).or_insert((owner, 0)).1 += 1;
        self.entries += 1;
    }

    /// Unregisters one registration of `pattern` for `id` (absent ones are ignored).
    pub fn remove(&mut self, pattern: &str, id: &str) {
        let segs: Vec<&str> = pattern.split('/').collect();
        if remove_at(&mut self.root, &segs, id) {
            self.entries -= 1;
        }
    }

    /// Registrations held.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Every subscription with a pattern matching `path`.
    pub fn matching(&self, path: &str) -> Interested {
        if self.entries == 0 {
            // No subscriptions (most servers): every append asks.
            return Interested::new();
        }
        let segs: Vec<&str> = path.split('/').collect();
        let mut out = Interested::new();
        collect(&self.root, &segs, &mut out);
        out
    }
}

fn remove_at(node: &mut Node, segs: &[&str], id: &str) -> bool {
    let Some((first, rest)) = segs.split_first() else {
        let Some(entry) = node.here.get_mut(id) else { return false };
        entry.1 -= 1;
        if entry.1 == 0 {
            node.here.remove(id);
        }
        return true;
    };
    match *first {
        "*" | "**" => {
            let slot = if *first == "*" { &mut node.star } else { &mut node.globstar };
            let Some(child) = slot.as_mut() else { return false };
            let removed = remove_at(child, rest, id);
            if child.is_empty() {
                *slot = None;
            }
            removed
        }
        lit => {
            let Some(child) = node.literal.get_mut(lit) else { return false };
            let removed = remove_at(child, rest, id);
            if child.is_empty() {
                node.literal.remove(lit);
            }
            removed
        }
    }
}

fn collect(node: &Node, segs: &[&str], out: &mut Interested) {
    if let Some(g) = &node.globstar {
        // `**` takes zero or more segments.
        for i in 0..=segs.len() {
            collect(g, &segs[i..], out);
        }
    }
    let Some((first, rest)) = segs.split_first() else {
        for (id, (owner, _)) in &node.here {
            out.insert(id.clone(), *owner);
        }
        return;
    };
    if let Some(star) = &node.star {
        collect(star, rest, out);
    }
    if let Some(child) = node.literal.get(*first) {
        collect(child, rest, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_is_one_segment_globstar_zero_or_more() {
        assert!(matches("events/*", "events/a"));
        assert!(!matches("events/*", "events"));
        assert!(!matches("events/*", "events/a/b"));
        assert!(matches("events/**", "events"));
        assert!(matches("events/**", "events/a/b"));
        assert!(matches("**/x", "x"));
        assert!(matches("a/**/b/*", "a/q/r/b/z"));
        assert!(!matches("a/**/b/*", "a/q/r/b"));
        assert!(!matches("events/a", "events/b"));
    }

    #[test]
    fn patterns_are_checked() {
        assert!(parse_pattern("events/*").is_ok());
        assert!(parse_pattern("").is_err());
        assert!(parse_pattern("a//b").is_err());
        assert!(parse_pattern("/a").is_err());
        assert!(parse_pattern("a*").is_err());
        assert!(parse_pattern(&"a/".repeat(40)).is_err());
        assert!(parse_pattern(&"x".repeat(300)).is_err());
    }

    #[test]
    fn literal_prefix_stops_at_the_first_wildcard() {
        assert_eq!(literal_prefix("events/*"), "events/");
        assert_eq!(literal_prefix("a/b"), "a/b");
        assert_eq!(literal_prefix("**"), "");
    }

    /// The trie agrees with `matches` on every pattern and path of a small universe.
    #[test]
    fn trie_agrees_with_the_matcher() {
        let patterns = ["a/*", "a/**", "**", "*/b", "a/b", "a/**/c", "**/c", "*", "a/*/c/**"];
        let paths = ["a", "b", "a/b", "a/c", "x/b", "a/b/c", "a/x/y/c", "c", "a/b/c/d", "q/r/s"];
        let mut t = Trie::default();
        for (i, p) in patterns.iter().enumerate() {
            t.insert(p, &format!("s{i}"), i % 3);
        }
        for path in paths {
            let got = t.matching(path);
            let want: Interested = patterns
                .iter()
                .enumerate()
                .filter(|(_, p)| matches(p, path))
                .map(|(i, _)| (format!("s{i}"), i % 3))
                .collect();
            assert_eq!(got, want, "{path}");
        }
    }

    #[test]
    fn removal_is_per_registration_and_prunes() {
        let mut t = Trie::default();
        t.insert("a/b", "s", 0);
        t.insert("a/b", "s", 0);
        t.insert("a/*", "u", 1);
        t.remove("a/b", "s");
        assert!(t.matching("a/b").contains_key("s"));
        t.remove("a/b", "s");
        t.remove("a/b", "s");
        assert!(!t.matching("a/b").contains_key("s"));
        t.remove("a/*", "u");
        assert_eq!(t.len(), 0);
        assert!(t.root.is_empty());
    }

    #[test]
    fn ten_thousand_patterns_cost_a_path_walk() {
        let mut t = Trie::default();
        for i in 0..10_000 {
            t.insert(&format!("tenant-{i}/*"), &format!("s{i}"), 0);
        }
        assert_eq!(t.matching("tenant-77/orders").len(), 1);
        assert!(t.matching("other/orders").is_empty());
    }
}
