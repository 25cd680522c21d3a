//! Content types: the media type of a `Content-Type` value, and whether it
//! selects JSON mode.

/// The media type of a Content-Type value as written: parameters dropped.
fn bare(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or("").trim()
}

/// The media type of a Content-Type value: lower-cased, parameters dropped.
pub fn media_type(content_type: &str) -> String {
    bare(content_type).to_ascii_lowercase()
}

/// Whether two Content-Type values name the same media type (compared
/// without a lower-cased copy of either: every append with a type asks).
pub fn same_media_type(a: &str, b: &str) -> bool {
    bare(a).eq_ignore_ascii_case(bare(b))
}

/// Whether a content type selects JSON mode.
pub fn is_json(content_type: &str) -> bool {
    bare(content_type).eq_ignore_ascii_case("application/json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types() {
        assert_eq!(media_type("Application/JSON; charset=utf-8"), "application/json");
        assert!(is_json("application/json;charset=utf-8"));
        assert!(!is_json("text/plain"));
        assert!(same_media_type("Text/Plain; charset=utf-8", " text/plain"));
        assert!(!same_media_type("text/plain", "text/plainer"));
    }
}
