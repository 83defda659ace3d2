//! The API server's own request counters (`apiserver_request_total` by verb, resource and
//! subresource): how the steady-state tests see every request a controller made. They count the
//! whole server, so a test that reads them runs on a control plane of its own.

use kube::Client;

/// The resources a Nova pass reads, as the API server's metrics name them (the Nova itself is
/// left out: the tests poll it).
pub const READ_RESOURCES: [&str; 16] = [
    "secrets",
    "configmaps",
    "deployments",
    "services",
    "poddisruptionbudgets",
    "horizontalpodautoscalers",
    "networkpolicies",
    "httproutes",
    "verticalpodautoscalers",
    "secretstores",
    "clustersecretstores",
    "externalsecrets",
    "rabbitmqclusters",
    "databases",
    "users",
    "grants",
];

/// Read verbs that reach the API server (a WATCH is the cache, not a read).
pub const READ_VERBS: [&str; 2] = ["GET", "LIST"];
/// Every resource a Nova pass could write besides the Nova itself (its events included).
pub const WRITTEN_RESOURCES: [&str; 11] = [
    "secrets",
    "configmaps",
    "events",
    "deployments",
    "services",
    "poddisruptionbudgets",
    "horizontalpodautoscalers",
    "networkpolicies",
    "databases",
    "users",
    "grants",
];
/// Write verbs.
pub const WRITE_VERBS: [&str; 5] = ["POST", "PUT", "PATCH", "APPLY", "DELETE"];

/// The API server's own metrics, as text.
pub async fn apiserver_metrics(client: &Client) -> String {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    client
        .request_text(request)
        .await
        .expect("apiserver metrics")
}

/// The API server's request count (`apiserver_request_total`, summed) over the series whose
/// labels pass `selected`.
async fn request_total(client: &Client, selected: impl Fn(&str) -> bool) -> u64 {
    let text = apiserver_metrics(client).await;
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && selected(l))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn has_label(series: &str, label: &str, values: &[&str]) -> bool {
    values.iter().any(|v| {
        series.contains(&format!(",{label}=\"{v}\""))
            || series.contains(&format!("{{{label}=\"{v}\""))
    })
}

/// The API server's count of write requests for one resource and subresource.
pub async fn writes(client: &Client, resource: &str, subresource: &str) -> u64 {
    request_total(client, |l| {
        has_label(l, "resource", &[resource])
            && has_label(l, "subresource", &[subresource])
            && has_label(l, "verb", &WRITE_VERBS)
    })
    .await
}

/// The API server's count of write requests for one resource and subresource that it
/// answered with `code` (409: refused as stale or conflicting).
pub async fn writes_answered(
    client: &Client,
    resource: &str,
    subresource: &str,
    code: &str,
) -> u64 {
    request_total(client, |l| {
        has_label(l, "resource", &[resource])
            && has_label(l, "subresource", &[subresource])
            && has_label(l, "verb", &WRITE_VERBS)
            && has_label(l, "code", &[code])
    })
    .await
}

/// The API server's count of requests with one of `verbs` against one of `resources`, any
/// subresource.
pub async fn requests(client: &Client, resources: &[&str], verbs: &[&str]) -> u64 {
    request_total(client, |l| {
        has_label(l, "resource", resources) && has_label(l, "verb", verbs)
    })
    .await
}

/// Lets a controller go idle before (or after) a window the request counters measure: they
/// must not catch the tail of a pass an earlier step woke (or miss the requests of the last
/// pass of the window), and nothing the controller publishes says it went idle, so this is a
/// sleep, not a wait for state.
pub async fn quiet_window(length: std::time::Duration) {
    tokio::time::sleep(length).await;
}

/// A negative over time: lets the controller run a few more passes, so that what must not
/// happen (a new object, a released finalizer, a replaced pod) would have happened by the end.
/// There is no state to wait for, since what matters is that nothing changes.
pub async fn absence_window(length: std::time::Duration) {
    tokio::time::sleep(length).await;
}
