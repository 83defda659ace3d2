//! The state a failed wait prints about the object it waited for: its conditions (or its
//! status when it has none), the events recorded on it and the in-process controllers' last
//! log lines about its namespace. Each part is read best-effort: a report never fails.

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use crate::{events, logs};

/// How many of the object's most recent events the report shows.
const EVENTS_SHOWN: usize = 15;

/// The report on `name` (read through `api`) in `namespace`.
pub async fn report(
    api: &Api<DynamicObject>,
    client: &Client,
    namespace: Option<&str>,
    name: &str,
) -> String {
    let mut out = String::new();
    match api.get_opt(name).await {
        Ok(Some(object)) => describe_status(&mut out, &object),
        Ok(None) => out.push_str("  the object does not exist\n"),
        Err(e) => {
            let _ = writeln!(out, "  reading the object failed: {e}");
        }
    }
    if let Some(ns) = namespace {
        describe_events(&mut out, client, ns, name).await;
        let tail = logs::tail(ns);
        if !tail.is_empty() {
            let _ = writeln!(
                out,
                "  controller log about {ns} (last {} lines):",
                tail.len()
            );
            for line in tail {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    out
}

fn describe_status(out: &mut String, object: &DynamicObject) {
    let status = &object.data["status"];
    match status["conditions"].as_array() {
        Some(conditions) if !conditions.is_empty() => {
            out.push_str("  conditions:\n");
            for c in conditions {
                let _ = writeln!(
                    out,
                    "    {} {} {}: {}",
                    c["type"].as_str().unwrap_or("?"),
                    c["status"].as_str().unwrap_or("?"),
                    c["reason"].as_str().unwrap_or("?"),
                    c["message"].as_str().unwrap_or("")
                );
            }
            let mut rest = status.clone();
            if let Some(fields) = rest.as_object_mut() {
                fields.remove("conditions");
            }
            let _ = writeln!(out, "  status besides: {rest}");
        }
        _ => {
            let _ = writeln!(out, "  status: {status}");
        }
    }
}

async fn describe_events(out: &mut String, client: &Client, ns: &str, name: &str) {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let selector = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let Ok(listed) = api.list(&selector).await else {
        out.push_str("  events: the list failed\n");
        return;
    };
    let mut listed = listed.items;
    listed.sort_by_key(|e| e.metadata.creation_timestamp.clone());
    let start = listed.len().saturating_sub(EVENTS_SHOWN);
    let _ = writeln!(
        out,
        "  events ({} of {}):",
        listed.len() - start,
        listed.len()
    );
    for e in &listed[start..] {
        let _ = writeln!(
            out,
            "    {} {} x{}: {}",
            e.type_.as_deref().unwrap_or("?"),
            e.reason.as_deref().unwrap_or("?"),
            events::occurrences(e),
            e.message.as_deref().unwrap_or("")
        );
    }
}
