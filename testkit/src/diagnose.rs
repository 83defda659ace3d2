//! The state a failed wait prints about the object it waited for: its conditions (or its
//! status when it has none), the events recorded on it and the in-process controllers' last
//! log lines about its namespace. Each part is read best-effort: a report never fails. And what
//! a failing real run prints about its whole namespace ([`dump`]).

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_test_harness::pods;

use crate::logs;

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
            occurrences(e),
            e.message.as_deref().unwrap_or("")
        );
    }
}

/// How often an event was recorded: kube's Recorder records a repeat within its cache window
/// as `series.count` on the same Event (a patch), never as a new Event or in `count`.
pub fn occurrences(event: &Event) -> i32 {
    let series = event.series.as_ref().and_then(|s| s.count).unwrap_or(1);
    series.max(event.count.unwrap_or(1))
}

/// Prints the conditions of the Nova and the state and log tail of every pod in `ns`: what a
/// failing real run needs to be understood.
pub async fn dump(client: &Client, ns: &str) {
    let novas: Api<Nova> = Api::namespaced(client.clone(), ns);
    if let Ok(nova) = novas.get("nova").await {
        for c in nova.status.iter().flat_map(|s| s.conditions.iter()) {
            eprintln!(
                "condition {} {} {}: {}",
                c.type_, c.status, c.reason, c.message
            );
        }
    }
    let all: Api<Pod> = Api::namespaced(client.clone(), ns);
    for pod in all
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let name = pod.name_any();
        let states = serde_json::to_string(
            &pod.status
                .as_ref()
                .map(|s| (&s.init_container_statuses, &s.container_statuses)),
        )
        .unwrap_or_default();
        eprintln!("pod {name}: {states}");
        let spec = pod.spec.iter();
        let init = spec
            .clone()
            .flat_map(|s| s.init_containers.iter().flatten());
        for container in init.chain(spec.flat_map(|s| s.containers.iter())) {
            let log = pods::logs(client, ns, &name, &container.name)
                .await
                .unwrap_or_else(|e| e.to_string());
            let tail: Vec<&str> = log.lines().rev().take(25).collect();
            eprintln!("--- {name}/{}:", container.name);
            for line in tail.iter().rev() {
                eprintln!("    {line}");
            }
        }
    }
}
