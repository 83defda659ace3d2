//! The INI document type and its renderer (`common-types.md` §3.14).
//!
//! Sections are sorted by name in byte order, so `DEFAULT` precedes every lower-case name;
//! keys are sorted; each option is one `key = value` line; a blank line separates sections; a
//! section is written with its header even when it holds no key. A key whose value is empty is
//! written as `key =`, without trailing whitespace, the way the fixed overlays write
//! `[api_database] connection =`.
//!
//! The renderer writes every section name, key and value verbatim, so it refuses a newline or
//! carriage return anywhere: oslo.config reads the file line by line, and such a character
//! would inject further lines past the ownership and catalog gates. The refusal names the
//! section, never the value.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The options of one section, sorted by key.
pub type Section = BTreeMap<String, String>;

pub use nova_api::ini_text::has_line_break;

/// A section of a document carries a line break in its name, a key or a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("section {section:?} contains a newline or carriage return")]
pub struct IniError {
    /// The offending section's name (Debug-escaped when displayed).
    pub section: String,
}

/// An INI document: section name to key to value, all sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IniDocument {
    sections: BTreeMap<String, Section>,
}

impl IniDocument {
    /// An empty document.
    pub fn new() -> Self {
        Self::default()
    }

    /// The section called `name`, created empty when absent (so its header is rendered).
    pub fn section_mut(&mut self, name: &str) -> &mut Section {
        self.sections.entry(name.to_owned()).or_default()
    }

    /// Sets `[section] key = value`, creating the section when needed.
    pub fn set(&mut self, section: &str, key: &str, value: impl Into<String>) {
        self.section_mut(section)
            .insert(key.to_owned(), value.into());
    }

    /// Sets `[section] key = value` when `value` is `Some`.
    pub fn set_opt(&mut self, section: &str, key: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.set(section, key, value);
        }
    }

    /// Adds a whole section, replacing one of the same name.
    pub fn insert_section(&mut self, name: &str, section: Section) {
        self.sections.insert(name.to_owned(), section);
    }

    /// The value of `[section] key`.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.sections
            .get(section)
            .and_then(|s| s.get(key))
            .map(String::as_str)
    }

    /// The section called `name`.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.get(name)
    }

    /// Every section, sorted by name.
    pub fn sections(&self) -> &BTreeMap<String, Section> {
        &self.sections
    }

    /// Whether the document has a section called `name`.
    pub fn has_section(&self, name: &str) -> bool {
        self.sections.contains_key(name)
    }

    /// Renders the document, or names the first section (in render order) that carries a
    /// newline or carriage return in its name, a key or a value.
    pub fn render(&self) -> Result<String, IniError> {
        let mut out = String::with_capacity(self.estimated_len());
        for (index, (name, section)) in self.sections.iter().enumerate() {
            let clean = !has_line_break(name)
                && section
                    .iter()
                    .all(|(k, v)| !has_line_break(k) && !has_line_break(v));
            if !clean {
                return Err(IniError {
                    section: name.clone(),
                });
            }
            if index > 0 {
                out.push('\n');
            }
            // Writing into a String cannot fail.
            let _ = writeln!(out, "[{name}]");
            for (key, value) in section {
                if value.is_empty() {
                    let _ = writeln!(out, "{key} =");
                } else {
                    let _ = writeln!(out, "{key} = {value}");
                }
            }
        }
        Ok(out)
    }

    fn estimated_len(&self) -> usize {
        self.sections
            .iter()
            .map(|(name, section)| {
                name.len()
                    + 4
                    + section
                        .iter()
                        .map(|(k, v)| k.len() + v.len() + 4)
                        .sum::<usize>()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_keys_sort_by_byte_order_with_default_first() {
        let mut doc = IniDocument::new();
        doc.set("vnc", "enabled", "true");
        doc.set("api", "b", "2");
        doc.set("api", "a", "1");
        doc.set("DEFAULT", "debug", "false");
        doc.section_mut("empty");
        assert_eq!(
            doc.render().unwrap(),
            "[DEFAULT]\ndebug = false\n\n[api]\na = 1\nb = 2\n\n[empty]\n\n[vnc]\nenabled = true\n"
        );
    }

    #[test]
    fn an_empty_value_has_no_trailing_space() {
        let mut doc = IniDocument::new();
        doc.set("api_database", "connection", "");
        assert_eq!(doc.render().unwrap(), "[api_database]\nconnection =\n");
    }

    #[test]
    fn an_empty_document_renders_nothing() {
        assert_eq!(IniDocument::new().render().unwrap(), "");
    }

    #[test]
    fn a_line_break_anywhere_is_refused_naming_the_section() {
        for (section, key, value) in [
            ("a\nb", "k", "v"),
            ("s", "k\r", "v"),
            ("s", "k", "v\nx = y"),
        ] {
            let mut doc = IniDocument::new();
            doc.set("DEFAULT", "debug", "false");
            doc.set(section, key, value);
            let err = doc.render().unwrap_err();
            assert_eq!(err.section, section);
            assert!(!err.to_string().contains("x = y"));
        }
    }
}
