//! An event the controller publishes on a CR: its reason and note. Plain data below the
//! pipeline, so the steps' plans and the start-up CRD check can both name one.

use kube::runtime::events::{Event, EventType};
use nova_api::events::EventReason;

/// An event a plan publishes on its CR; its type and action come with its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventNote {
    /// The event reason.
    pub reason: EventReason,
    /// The event note (never a secret value).
    pub note: String,
}

impl EventNote {
    /// The Kubernetes event type.
    pub fn type_(&self) -> EventType {
        if self.reason.warning() {
            EventType::Warning
        } else {
            EventType::Normal
        }
    }

    /// The event the recorder publishes: the action is the reason's verb (a series per
    /// distinct note is the pipeline's event publisher's business).
    pub fn event(&self) -> Event {
        Event {
            type_: self.type_(),
            reason: self.reason.as_str().to_owned(),
            note: Some(self.note.clone()),
            action: self.reason.action().to_owned(),
            secondary: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_carries_its_reasons_type_and_verb_and_the_whole_note() {
        let note = EventNote {
            reason: EventReason::HostDiscoveryFailed,
            note: "é".repeat(100),
        };
        let event = note.event();
        assert_eq!(event.type_, EventType::Warning);
        assert_eq!(event.reason, "HostDiscoveryFailed");
        assert_eq!(event.action, "Register");
        assert_eq!(event.note.as_deref(), Some("é".repeat(100).as_str()));
    }
}
