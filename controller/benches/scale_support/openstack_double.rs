//! SIMULATED OpenStack for the pools of the scale run: one in-process HTTP server playing
//! Keystone (a token whose catalog names no Placement: the pools declare no traits), the Nova
//! API of every Nova (told apart by the Host header the controller's routed calls keep) and its
//! version document for the API health probes. Each Nova's compute services are the kwok nodes
//! of its pool, registered, up and mapped at once; an aggregate is created with every host of
//! its Nova in it (the hypervisor operator's onboarding, played). It answers from memory in
//! microseconds, so the run measures the controller, not nova-api.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The hosts (kwok node names) of each Nova, by the Nova's name.
pub type Hosts = BTreeMap<String, Vec<String>>;

#[derive(Default)]
struct State {
    hosts: Hosts,
    /// Aggregates of each Nova, by the Nova's name.
    aggregates: BTreeMap<String, Vec<Value>>,
    next_id: i64,
    calls: u64,
}

/// The running double: its address and its call count.
#[derive(Clone)]
pub struct OpenStackDouble {
    pub address: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl OpenStackDouble {
    /// Serves on 127.0.0.1 (an OS-chosen port) for the Novas and hosts of `hosts`.
    pub async fn start(hosts: Hosts) -> Self {
        let state = Arc::new(Mutex::new(State {
            hosts,
            ..State::default()
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the SIMULATED OpenStack");
        let address = listener.local_addr().expect("address");
        let shared = state.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = shared.clone();
                async move { answer(&state, &method, &uri, &headers, &body) }
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        println!("SIMULATED OpenStack (Keystone, Nova API) serving on {address}");
        Self { address, state }
    }

    /// Requests answered so far.
    pub fn calls(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .calls
    }
}

/// The Nova a request is for: the first label of its Host header (`<nova>.<ns>.svc...`).
fn nova_of(headers: &HeaderMap) -> String {
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    host.split('.').next().unwrap_or_default().to_owned()
}

fn json_answer(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn answer(
    state: &Mutex<State>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
    state.calls += 1;
    let path = uri.path();
    let query = uri.query().unwrap_or_default();
    let nova = nova_of(headers);
    let hosts = state.hosts.get(&nova).cloned().unwrap_or_default();
    match (method.as_str(), path) {
        ("POST", p) if p.ends_with("/auth/tokens") => (
            StatusCode::CREATED,
            [("x-subject-token", "simulated-token")],
            axum::Json(json!({"token": {"catalog": []}})),
        )
            .into_response(),
        ("GET", "/v2.1/os-services") => json_answer(
            StatusCode::OK,
            json!({"services": hosts.iter().map(|h| json!({
                "id": h, "binary": "nova-compute", "host": h, "status": "enabled",
                "state": "up", "disabled_reason": null
            })).collect::<Vec<_>>()}),
        ),
        ("GET", "/v2.1/os-hypervisors/detail") => {
            let page: Vec<Value> = match query.contains("marker=") {
                true => Vec::new(),
                false => hosts
                    .iter()
                    .map(|h| json!({"id": h, "service": {"host": h}}))
                    .collect(),
            };
            json_answer(StatusCode::OK, json!({"hypervisors": page}))
        }
        ("GET", p) if p.starts_with("/v2.1/servers") => {
            json_answer(StatusCode::OK, json!({"servers": []}))
        }
        ("GET", "/v2.1/os-aggregates") => {
            let listed = state.aggregates.get(&nova).cloned().unwrap_or_default();
            json_answer(StatusCode::OK, json!({"aggregates": listed}))
        }
        ("POST", "/v2.1/os-aggregates") => {
            let asked: Value = serde_json::from_slice(body).unwrap_or_default();
            state.next_id += 1;
            let zone = asked["aggregate"]["availability_zone"].clone();
            let mut metadata = json!({});
            if let Some(zone) = zone.as_str() {
                metadata["availability_zone"] = json!(zone);
            }
            let created = json!({
                "id": state.next_id,
                "name": asked["aggregate"]["name"],
                "availability_zone": zone,
                "hosts": hosts,
                "metadata": metadata,
            });
            state
                .aggregates
                .entry(nova)
                .or_default()
                .push(created.clone());
            json_answer(StatusCode::OK, json!({"aggregate": created}))
        }
        ("POST", p) if p.starts_with("/v2.1/os-aggregates/") => {
            let asked: Value = serde_json::from_slice(body).unwrap_or_default();
            let id = aggregate_id(p);
            let set = asked["set_metadata"]["metadata"].as_object().cloned();
            let aggregates = state.aggregates.entry(nova).or_default();
            match aggregates.iter_mut().find(|a| a["id"].as_i64() == id) {
                Some(aggregate) => {
                    for (key, value) in set.unwrap_or_default() {
                        aggregate["metadata"][key] = value;
                    }
                    json_answer(StatusCode::OK, json!({"aggregate": aggregate}))
                }
                None => json_answer(StatusCode::NOT_FOUND, json!({})),
            }
        }
        ("DELETE", p) if p.starts_with("/v2.1/os-aggregates/") => {
            let id = aggregate_id(p);
            state
                .aggregates
                .entry(nova)
                .or_default()
                .retain(|a| a["id"].as_i64() != id);
            json_answer(StatusCode::OK, json!({}))
        }
        _ => json_answer(
            StatusCode::OK,
            json!({"versions": [{"id": "v2.1", "status": "CURRENT"}]}),
        ),
    }
}

/// The id in `/v2.1/os-aggregates/{id}[/action]`.
fn aggregate_id(path: &str) -> Option<i64> {
    path.trim_start_matches("/v2.1/os-aggregates/")
        .split('/')
        .next()?
        .parse()
        .ok()
}
