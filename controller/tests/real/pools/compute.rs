//! The real compute API as the cloud's admin calls it: fake-driver servers on a chosen host,
//! their flavor, the servers per host, and the onboarding openstack-hypervisor-operator does in
//! a cloud (each onboarded host into its zone aggregate and `tenant_filter_tests`), PLAYED here
//! because that operator does not run.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use nova_test_harness::http::{self, Response};
use nova_testkit::wait::{Seen, Wait};
use serde_json::{Value, json};

/// 2.37 is the first microversion that boots a server with `"networks": "none"` (no port: the
/// SIMULATED Neutron has none to give).
pub const MICROVERSION: &str = "2.53";
/// The flavor of the test servers: the fake driver reports 1000 vCPUs and 800 GB of RAM.
pub const FLAVOR: &str = "pool-real-tiny";
/// Any id: the SIMULATED Glance answers every image id with one active raw image.
pub const IMAGE: &str = "a0c5c3a0-0000-4000-8000-000000000001";

/// The cloud admin's view of the compute API at `api` (the Nova's Service).
#[derive(Clone)]
pub struct Admin {
    pub api: SocketAddr,
    pub token: String,
}

impl Admin {
    /// One call; `Err` carries what went wrong (the token is never part of it).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Response, String> {
        let headers = [
            ("X-Auth-Token", self.token.as_str()),
            ("X-OpenStack-Nova-API-Version", MICROVERSION),
            ("Accept", "application/json"),
        ];
        http::request(
            self.api,
            method,
            &format!("/v2.1{path}"),
            &headers,
            body.as_ref(),
        )
        .await
        .map_err(|e| e.to_string())
    }

    /// A call that must answer one of `ok`; its JSON body.
    async fn expect(&self, method: &str, path: &str, body: Option<Value>, ok: &[u16]) -> Value {
        let r = self
            .call(method, path, body)
            .await
            .expect("the compute API answers");
        assert!(
            ok.contains(&r.status),
            "{method} {path}: HTTP {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
        r.json().unwrap_or(Value::Null)
    }

    /// The flavor [`FLAVOR`] (created once; a 409 means it exists).
    pub async fn ensure_flavor(&self) {
        let flavor =
            json!({"flavor": {"name": FLAVOR, "id": FLAVOR, "ram": 64, "vcpus": 1, "disk": 1}});
        self.expect("POST", "/flavors", Some(flavor), &[200, 409])
            .await;
    }

    /// Boots a fake-driver server `name` on `host` (admin's `<zone>:<host>` placement) and
    /// waits until it is ACTIVE there; returns its id.
    pub async fn boot(&self, name: &str, zone: &str, host: &str, timeout: Duration) -> String {
        let server = json!({"server": {"name": name, "imageRef": IMAGE, "flavorRef": FLAVOR,
                                       "networks": "none", "availability_zone": format!("{zone}:{host}")}});
        let created = self.expect("POST", "/servers", Some(server), &[202]).await;
        let id = created["server"]["id"]
            .as_str()
            .expect("a server id")
            .to_owned();
        let shown = Wait::new(format!("server {name} to leave BUILD"), timeout)
            .until(|| async {
                let shown = self
                    .expect("GET", &format!("/servers/{id}"), None, &[200])
                    .await;
                match shown["server"]["status"].as_str().unwrap_or_default() {
                    "ACTIVE" | "ERROR" => Seen::Done(shown),
                    status => Seen::Saw(status.to_owned()),
                }
            })
            .await
            .expect("the server left BUILD");
        assert_eq!(
            shown["server"]["status"], "ACTIVE",
            "server {name} failed: {}",
            shown["server"]["fault"]
        );
        assert_eq!(
            shown["server"]["OS-EXT-SRV-ATTR:host"],
            json!(host),
            "{shown}"
        );
        id
    }

    /// Deletes servers and waits until Nova no longer shows them.
    pub async fn delete_servers(&self, ids: &[String], timeout: Duration) {
        for id in ids {
            self.expect("DELETE", &format!("/servers/{id}"), None, &[204, 404])
                .await;
        }
        let gone = |id: String| async move {
            let status = self
                .call("GET", &format!("/servers/{id}"), None)
                .await
                .map(|r| r.status);
            if status == Ok(404) {
                Seen::Done(())
            } else {
                Seen::Saw(format!("GET answered {status:?}"))
            }
        };
        for id in ids {
            Wait::new(format!("server {id} to be gone"), timeout)
                .until(|| gone(id.clone()))
                .await
                .expect("the server is gone");
        }
    }

    /// A listing the sampler may retry: `Err` when the API did not answer 200.
    async fn list(&self, path: &str) -> Result<Value, String> {
        let r = self.call("GET", path, None).await?;
        if r.status != 200 {
            return Err(format!("GET {path}: HTTP {}", r.status));
        }
        r.json().map_err(|e| e.to_string())
    }

    /// The ids of every server Nova places on a host, per host.
    pub async fn servers_by_host(&self) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
        let listed = self.list("/servers/detail?all_tenants=1").await?;
        let mut by_host: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for server in listed["servers"].as_array().into_iter().flatten() {
            if let (Some(host), Some(id)) = (
                server["OS-EXT-SRV-ATTR:host"].as_str(),
                server["id"].as_str(),
            ) {
                by_host
                    .entry(host.to_owned())
                    .or_default()
                    .insert(id.to_owned());
            }
        }
        Ok(by_host)
    }

    /// The hosts with a registered compute service.
    pub async fn service_hosts(&self) -> Result<BTreeSet<String>, String> {
        let listed = self.list("/os-services?binary=nova-compute").await?;
        Ok(listed["services"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["host"].as_str().map(str::to_owned))
            .collect())
    }

    /// PLAYED onboarding: adds `host` to aggregate `id`, as openstack-hypervisor-operator does
    /// for every host it onboards.
    pub async fn onboard(&self, id: i64, host: &str) {
        eprintln!("PLAYED hypervisor-operator onboarding: host {host} into aggregate {id}");
        let add = json!({"add_host": {"host": host}});
        self.expect(
            "POST",
            &format!("/os-aggregates/{id}/action"),
            Some(add),
            &[200],
        )
        .await;
    }
}
