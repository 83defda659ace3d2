//! Who recorded the events of the run's namespace: the API server's `events` row counts every
//! component's (the Deployment, ReplicaSet and Job controllers, the scheduler, kwok, and
//! nova-controller), so the operator's own share is read from the Event objects themselves.

use std::collections::BTreeMap;

use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};

/// The reporting controllers of nova-controller's two controllers.
pub const OURS: [&str; 2] = ["nova-controller", "novacompute-controller"];

/// Event objects and their occurrences (a series counts each repeat) by (reporter, kind of
/// the object they regard, reason).
pub type ByReporter = BTreeMap<(String, String, String), (u64, u64)>;

/// The events of `ns` now.
pub async fn count(client: &Client, ns: &str) -> ByReporter {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut out = ByReporter::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await.expect("events");
        for event in &page.items {
            let reporter = event
                .reporting_controller
                .clone()
                .filter(|r| !r.is_empty())
                .or_else(|| event.deprecated_source.as_ref()?.component.clone())
                .unwrap_or_default();
            let kind = event
                .regarding
                .as_ref()
                .and_then(|r| r.kind.clone())
                .unwrap_or_default();
            let occurrences = event
                .series
                .as_ref()
                .map_or(1, |s| u64::try_from(s.count).unwrap_or(1));
            let entry = out
                .entry((reporter, kind, event.reason.clone().unwrap_or_default()))
                .or_default();
            entry.0 += 1;
            entry.1 += occurrences;
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return out,
        }
    }
}

/// The Event objects nova-controller created.
pub fn ours(events: &ByReporter) -> u64 {
    events
        .iter()
        .filter(|((reporter, _, _), _)| OURS.contains(&reporter.as_str()))
        .map(|(_, (objects, _))| objects)
        .sum()
}
