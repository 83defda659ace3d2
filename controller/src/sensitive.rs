//! A secret value in memory: it can be digested and handed to a Secret, but it never
//! formats into a log line, an event, a condition message or an error.

use sha2::{Digest, Sha256};

/// A credential read from a Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Sensitive(String);

impl Sensitive {
    /// Wraps a value read from a Secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place it is written: a Secret's data.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The SHA-256 hex digest stamped on pod templates, so a rotation rolls the pods.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
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
        assert_eq!(
            secret.digest(),
            "f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7"
        );
    }
}
