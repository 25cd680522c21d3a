//! Errors that are one line of text saying what is wrong (damaged files, a
//! start the server refuses, a failed webhook delivery): [`line_error!`]
//! declares each as a type of its own, displayed as its line.

/// Declares `$name`, an error that is one line of text: `Display` shows
/// the line, `From<String>` and `From<&str>` make one, and the defining module builds one
/// as `$name(line)`.
#[macro_export]
macro_rules! line_error {
    ($(#[$doc:meta])* $vis:vis struct $name:ident;) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        $vis struct $name(String);

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::std::error::Error for $name {}

        impl ::std::convert::From<String> for $name {
            fn from(why: String) -> $name {
                $name(why)
            }
        }

        impl ::std::convert::From<&str> for $name {
            fn from(why: &str) -> $name {
                $name(why.to_string())
            }
        }
    };
}
