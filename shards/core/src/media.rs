//! Content types: the media type of a `Content-Type` value, and whether it
//! selects JSON mode.

/// The media type of a Content-Type value: lower-cased, parameters dropped.
pub fn media_type(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

/// Whether a content type selects JSON mode.
pub fn is_json(content_type: &str) -> bool {
    media_type(content_type) == "application/json"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types() {
        assert_eq!(media_type("Application/JSON; charset=utf-8"), "application/json");
        assert!(is_json("application/json;charset=utf-8"));
        assert!(!is_json("text/plain"));
    }
}
