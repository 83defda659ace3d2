//! A secret value in memory: it can be digested and handed to a Secret, but it never formats
//! into a log line, an event, a condition message or an error. Each value also carries its
//! printable form, where the credential is replaced by a marked placeholder, so `render` can
//! print a derived Secret (a DSN, a URL) without the credential it embeds.

use sha2::{Digest, Sha256};

/// What `render` prints in place of a credential.
pub const REDACTED: &str = "REDACTED";

/// A credential read from a Secret, or a value built from one.
#[derive(Clone, PartialEq, Eq)]
pub struct Sensitive {
    value: String,
    shown: String,
}

impl Sensitive {
    /// Wraps a value read from a Secret; it prints as [`REDACTED`].
    pub fn new(value: impl Into<String>) -> Self {
        Self {
            value: value.into(),
            shown: REDACTED.to_owned(),
        }
    }

    /// A value built from credentials by `build`, which runs twice: on the values, and on
    /// their printable forms (so a DSN prints with its password as [`REDACTED`]).
    pub fn derive<const N: usize>(
        parts: [&Sensitive; N],
        build: impl Fn([&str; N]) -> String,
    ) -> Self {
        Self {
            value: build(parts.map(|p| p.value.as_str())),
            shown: build(parts.map(|p| p.shown.as_str())),
        }
    }

    /// A value that is not a credential but travels with them (a rendered contract key); it
    /// prints as itself.
    pub fn plain(value: impl Into<String>) -> Self {
        let value = value.into();
        Self {
            shown: value.clone(),
            value,
        }
    }

    /// The value, for the one place it is written: a Secret's data.
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// The printable form, with every credential it embeds masked.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    /// The SHA-256 hex digest stamped on pod templates, so a rotation rolls the pods.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.value.as_bytes()))
    }
}

impl std::fmt::Debug for Sensitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sensitive(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Sensitive::new("hunter2");
        assert_eq!(format!("{secret:?}"), "Sensitive(<redacted>)");
        assert_eq!(secret.shown(), REDACTED);
        assert_eq!(
            secret.digest(),
            "f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7"
        );
    }

    #[test]
    fn a_derived_value_prints_with_its_credentials_masked() {
        let user = Sensitive::plain("nova");
        let password = Sensitive::new("hunter2");
        let url = Sensitive::derive([&user, &password], |[u, p]| {
            format!("rabbit://{u}:{p}@h:5672/")
        });
        assert_eq!(url.expose(), "rabbit://nova:hunter2@h:5672/");
        assert_eq!(url.shown(), "rabbit://nova:REDACTED@h:5672/");
        assert!(!format!("{url:?}").contains("hunter2"));
    }
}
