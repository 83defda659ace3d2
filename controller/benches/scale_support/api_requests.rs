//! The API server's own request counts (`apiserver_request_total`), by verb, resource and
//! subresource, restricted to what the operator's controllers read and write: the kube
//! components (the Deployment, ReplicaSet, Job and DaemonSet controllers, the scheduler, kwok)
//! and the bench's SIMULATED operators write other rows (pods, replicasets, the status of the
//! workloads and of the other operators' kinds), which are left out. Events are the exception:
//! every component records them into the same resource, so their row counts all of them.

use std::collections::BTreeMap;

use kube::Client;

use super::prometheus::{Sample, samples};

/// Request counts by (verb, resource, subresource).
pub type Counts = BTreeMap<(String, String, String), f64>;

/// What the operator's two controllers read or write (the kinds their watches and steps name).
const OPERATOR_RESOURCES: [&str; 26] = [
    "novas",
    "novacomputes",
    "secrets",
    "configmaps",
    "deployments",
    "daemonsets",
    "jobs",
    "cronjobs",
    "services",
    "serviceaccounts",
    "poddisruptionbudgets",
    "horizontalpodautoscalers",
    "verticalpodautoscalers",
    "networkpolicies",
    "httproutes",
    "secretstores",
    "clustersecretstores",
    "externalsecrets",
    "rabbitmqclusters",
    "mariadbs",
    "databases",
    "users",
    "grants",
    "nodes",
    "events",
    "pods",
];

/// Whether a series is the operator's: one of its resources, no WATCH (a watch is a cache
/// being fed, not a read), and no status subresource but the operator's own CRs' (the other
/// status writes are the kube controllers', kwok's and the SIMULATED operators').
fn operators(sample: &Sample) -> bool {
    let resource = sample.label("resource");
    let subresource = sample.label("subresource");
    OPERATOR_RESOURCES.contains(&resource)
        && sample.label("verb") != "WATCH"
        && (subresource.is_empty()
            || (subresource == "status" && matches!(resource, "novas" | "novacomputes")))
        && !(resource == "pods" && sample.label("verb") != "LIST" && sample.label("verb") != "GET")
}

/// The API server's counts now.
pub async fn snapshot(client: &Client) -> Counts {
    let text = nova_testkit::apiserver::apiserver_metrics(client).await;
    let mut counts = Counts::new();
    for sample in samples(&text, "apiserver_request_total")
        .iter()
        .filter(|s| operators(s))
    {
        let key = (
            sample.label("verb").to_owned(),
            sample.label("resource").to_owned(),
            sample.label("subresource").to_owned(),
        );
        *counts.entry(key).or_default() += sample.value;
    }
    counts
}

/// `after - before`, rows that did not change left out.
pub fn delta(after: &Counts, before: &Counts) -> Counts {
    after
        .iter()
        .map(|(key, value)| (key.clone(), value - before.get(key).copied().unwrap_or(0.0)))
        .filter(|(_, value)| *value > 0.0)
        .collect()
}

/// Whether a verb writes.
pub fn is_write(verb: &str) -> bool {
    matches!(verb, "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE")
}
