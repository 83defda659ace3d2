//! The Events recorded in a namespace or on one object.

use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};

pub use crate::diagnose::occurrences;

/// Every event reason published in `ns`, oldest first.
pub async fn event_reasons(client: &Client, ns: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut listed = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items;
    listed.sort_by_key(|e| e.metadata.creation_timestamp.clone());
    listed.into_iter().filter_map(|e| e.reason).collect()
}

/// The events recorded on the object `name` in `ns`, oldest first: (reason, note, how often).
pub async fn events_on(
    client: &Client,
    ns: &str,
    name: &str,
) -> kube::Result<Vec<(String, String, i32)>> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut listed = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await?
        .items;
    listed.sort_by_key(|e| e.metadata.creation_timestamp.clone());
    Ok(listed
        .into_iter()
        .map(|e| {
            (
                e.reason.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default(),
                occurrences(&e),
            )
        })
        .collect())
}

/// Waits until an event with `reason` is recorded in `ns`; returns every reason recorded
/// there by then, oldest first.
pub async fn wait_for_event(
    client: &Client,
    ns: &str,
    reason: &str,
    timeout: std::time::Duration,
) -> Vec<String> {
    crate::wait::Wait::new(format!("a {reason} event in {ns}"), timeout)
        .until(|| async {
            let reasons = event_reasons(client, ns).await;
            if reasons.iter().any(|r| r == reason) {
                crate::wait::Seen::Done(reasons)
            } else {
                crate::wait::Seen::Saw(format!("{reasons:?}"))
            }
        })
        .await
        .expect("the event")
}
