//! The one error type of the renderers. Every message names a field path or an INI section,
//! never a value: a value may be a URL carrying credentials, and a message travels into
//! conditions, events and logs (DESIGN.md, principle 4).

/// Why a render was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A typed field the renderers write verbatim carries a line break.
    #[error(
        "{field} contains a newline or carriage return: it is rendered verbatim into nova.conf and nova-compute.conf, so a newline injects arbitrary config lines"
    )]
    ControlCharacter {
        /// The field path, e.g. `spec.region`.
        field: String,
    },
    /// An extraConfig section name is empty.
    #[error("extraConfig section name must not be empty")]
    ExtraConfigEmptySection,
    /// An extraConfig section name, or a key or value of the section, carries a line break.
    #[error("extraConfig section {section:?} contains a newline or carriage return")]
    ExtraConfigControlCharacter {
        /// The section as the CR spells it (Debug-escaped when displayed).
        section: String,
    },
    /// An extraConfig key oslo.config would not read back as the key the CR wrote.
    #[error(
        "extraConfig section {section:?} has a key oslo.config would not read back as written: a key must not be empty, start or end with whitespace, start with '#', ';' or '[', or contain '=' or ':'"
    )]
    ExtraConfigUnreadableKey {
        /// The section as the CR spells it (Debug-escaped when displayed).
        section: String,
    },
    /// A section of a rendered document carries a line break (a defence behind the field
    /// checks above, which name the field instead).
    #[error("section {section:?} of {document} contains a newline or carriage return")]
    Section {
        /// The rendered document.
        document: &'static str,
        /// The section (Debug-escaped when displayed).
        section: String,
    },
    /// A typed field holds a value the renderers cannot use.
    #[error("{field}: {reason}")]
    InvalidField {
        /// The field path.
        field: &'static str,
        /// What is wrong, never the value itself.
        reason: &'static str,
    },
    /// The remote contract was asked for while spec.remoteCompute is unset.
    #[error("spec.remoteCompute is not set: there is no remote compute contract to render")]
    RemoteComputeUnset,
}

impl RenderError {
    /// The extraConfig section or rendered section the error is about, for the Config step's
    /// `ConfigError` message and the last-good rule.
    pub fn section(&self) -> Option<&str> {
        match self {
            Self::ExtraConfigControlCharacter { section }
            | Self::ExtraConfigUnreadableKey { section }
            | Self::Section { section, .. } => Some(section),
            _ => None,
        }
    }

    /// Whether the error is a line break or an unreadable key, the invalid renders the Config
    /// step answers with the last-good rule rather than with an error.
    pub fn is_injection(&self) -> bool {
        matches!(
            self,
            Self::ControlCharacter { .. }
                | Self::ExtraConfigControlCharacter { .. }
                | Self::ExtraConfigUnreadableKey { .. }
                | Self::Section { .. }
        )
    }
}
