//! What text the rendered INI files can carry verbatim. Admission refuses exactly what the
//! renderer cannot write, so both binaries take the rules from here.

/// Whether `text` carries a character that ends a line for oslo.config (Python's universal
/// newlines split on `\n`, `\r` and `\r\n`, and on nothing else): a value carrying one would
/// inject further config lines past the ownership and catalog gates.
pub fn has_line_break(text: &str) -> bool {
    text.contains(['\n', '\r'])
}

/// Whether oslo.config's INI parser would read `key` back as a different key, or as none: it
/// strips the key, splits the line at the first `=` or `:`, reads a line that starts with
/// whitespace as a continuation and one that starts with `#`, `;` or `[` as a comment or a
/// section header. `password=x` would otherwise reach the file as `password`, past an
/// exact-match owned-key guard.
pub fn misread_key(key: &str) -> bool {
    let padding = |c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c);
    match (key.chars().next(), key.chars().last()) {
        (Some(first), Some(last)) => {
            padding(first)
                || padding(last)
                || matches!(first, '#' | ';' | '[')
                || key.contains(['=', ':'])
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_oslo_would_misread() {
        for key in [
            "",
            " password",
            "password ",
            "#x",
            ";x",
            "[x",
            "password=x",
            "a:b",
            "\tx",
            "x\u{1f}",
        ] {
            assert!(misread_key(key), "{key:?}");
        }
        for key in [
            "password",
            "build_failure_weight_multiplier",
            "a.b",
            "x-y",
            "é",
        ] {
            assert!(!misread_key(key), "{key:?}");
        }
    }

    #[test]
    fn line_breaks() {
        assert!(has_line_break("a\nb") && has_line_break("a\r") && !has_line_break("a\tb"));
    }
}
