//! The compute API calls of a pass (`novacompute.md` §7.3). The disable, delete, aggregate and
//! host-filtered server calls are admin-only under Nova's default policy; a 403 surfaces as
//! the call's error like any other status.

use std::collections::{BTreeMap, BTreeSet};

use http::Method;
use serde::Deserialize;
use serde_json::json;

use super::{Api, Client, OpenStackError, decode, segment};

/// The default microversion: the first that addresses services by UUID.
pub const DEFAULT_VERSION: &str = "2.53";
/// The first microversion at which a cell that did not answer shows in a listing as records
/// with status `UNKNOWN` (below it, Nova's default `[api] list_records_by_skipping_down_cells`
/// leaves that cell's records out without a word): the service listing's and the server
/// count's.
pub const DOWN_CELLS_VERSION: &str = "2.69";
/// The hypervisor listing's: entries carry `service.host` and unmapped hosts are left out.
pub const HYPERVISORS_VERSION: &str = "2.88";
/// The page size of the hypervisor listing.
const HYPERVISOR_PAGE: usize = 500;
/// The pages after which the hypervisor listing is given up.
const HYPERVISOR_PAGES: usize = 100;

const COMPUTE: Api = Api::Compute(DEFAULT_VERSION);

/// A `nova-compute` service as Nova lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComputeService {
    /// The service UUID.
    pub id: String,
    /// The host (the node name).
    pub host: String,
    /// `enabled` or `disabled`.
    pub status: String,
    /// `up` or `down`.
    pub state: String,
    /// The reason recorded on a disabled service (empty when none).
    pub disabled_reason: String,
}

/// A host aggregate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Aggregate {
    /// Nova's integer id.
    pub id: i64,
    /// The name.
    pub name: String,
    /// The availability zone (empty when none).
    pub availability_zone: String,
    /// The hosts in it.
    pub hosts: Vec<String>,
    /// Its metadata (the zone appears here too, as `availability_zone`).
    pub metadata: BTreeMap<String, String>,
}

/// How a service deletion ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceDeletion {
    /// Deleted, or already gone.
    Deleted,
    /// 409: instances or migrations remain on the host.
    InUse,
}

#[derive(Deserialize)]
struct Services {
    #[serde(default)]
    services: Vec<ServiceEntry>,
}

#[derive(Deserialize)]
struct ServiceEntry {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    disabled_reason: Option<String>,
}

#[derive(Deserialize)]
struct Hypervisors {
    #[serde(default)]
    hypervisors: Vec<HypervisorEntry>,
}

#[derive(Deserialize)]
struct HypervisorEntry {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    service: Option<HypervisorService>,
}

#[derive(Deserialize)]
struct HypervisorService {
    #[serde(default)]
    host: Option<String>,
}

#[derive(Deserialize)]
struct Servers {
    #[serde(default)]
    servers: Vec<ServerEntry>,
}

#[derive(Deserialize)]
struct ServerEntry {
    #[serde(default)]
    status: Option<String>,
}

#[derive(Deserialize)]
struct Aggregates {
    #[serde(default)]
    aggregates: Vec<AggregateEntry>,
}

#[derive(Deserialize)]
struct OneAggregate {
    aggregate: AggregateEntry,
}

#[derive(Deserialize)]
struct AggregateEntry {
    id: i64,
    #[serde(default)]
    name: String,
    #[serde(default)]
    availability_zone: Option<String>,
    #[serde(default)]
    hosts: Option<Vec<String>>,
    #[serde(default)]
    metadata: Option<BTreeMap<String, Option<String>>>,
}

impl From<AggregateEntry> for Aggregate {
    fn from(a: AggregateEntry) -> Self {
        Self {
            id: a.id,
            name: a.name,
            availability_zone: a.availability_zone.unwrap_or_default(),
            hosts: a.hosts.unwrap_or_default(),
            metadata: a
                .metadata
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.unwrap_or_default()))
                .collect(),
        }
    }
}

/// A JSON id (a UUID string, or an integer in older documents) as text.
fn id_text(id: Option<serde_json::Value>) -> String {
    match id {
        Some(serde_json::Value::String(s)) => s,
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

impl Client {
    /// Every `nova-compute` service (microversion 2.69). A cell that did not answer makes the
    /// list incomplete, so it fails the call rather than reading its hosts as serviceless.
    pub async fn compute_services(&self) -> Result<Vec<ComputeService>, OpenStackError> {
        let path = "/v2.1/os-services?binary=nova-compute";
        let response = self
            .expect(
                Api::Compute(DOWN_CELLS_VERSION),
                Method::GET,
                path,
                None,
                &[200],
            )
            .await?;
        let listed: Services = decode("GET", path, &response)?;
        listed
            .services
            .into_iter()
            .map(|s| {
                let host = s.host.unwrap_or_default();
                let status = s.status.unwrap_or_default();
                if status == "UNKNOWN" {
                    return Err(OpenStackError::CellDown(host));
                }
                Ok(ComputeService {
                    id: id_text(s.id),
                    host,
                    status,
                    state: s.state.unwrap_or_default(),
                    disabled_reason: s.disabled_reason.unwrap_or_default(),
                })
            })
            .collect()
    }

    /// The hosts Nova lists a hypervisor for (microversion 2.88): Nova leaves out the compute
    /// nodes of hosts without a host mapping, so "registered but absent" is "not mapped yet".
    /// Paged until a page comes back empty (a short page does not end it).
    pub async fn mapped_hosts(&self) -> Result<BTreeSet<String>, OpenStackError> {
        let mut hosts = BTreeSet::new();
        let mut marker: Option<String> = None;
        for _ in 0..HYPERVISOR_PAGES {
            let path = match &marker {
                None => format!("/v2.1/os-hypervisors/detail?limit={HYPERVISOR_PAGE}"),
                Some(m) => format!(
                    "/v2.1/os-hypervisors/detail?limit={HYPERVISOR_PAGE}&marker={}",
                    segment(m)
                ),
            };
            let response = self
                .expect(
                    Api::Compute(HYPERVISORS_VERSION),
                    Method::GET,
                    &path,
                    None,
                    &[200],
                )
                .await?;
            let page: Hypervisors = decode("GET", &path, &response)?;
            let Some(last) = page.hypervisors.last() else {
                return Ok(hosts);
            };
            marker = Some(id_text(last.id.clone()));
            hosts.extend(
                page.hypervisors
                    .into_iter()
                    .filter_map(|h| h.service.and_then(|s| s.host))
                    .filter(|h| !h.is_empty()),
            );
        }
        Err(OpenStackError::EndlessHypervisors)
    }

    /// Disables a service with `reason`.
    pub async fn disable_service(&self, id: &str, reason: &str) -> Result<(), OpenStackError> {
        let body = json!({ "status": "disabled", "disabled_reason": reason });
        let path = format!("/v2.1/os-services/{}", segment(id));
        self.status(COMPUTE, Method::PUT, &path, Some(body), &[])
            .await
            .map(drop)
    }

    /// Deletes a service; Nova drops its host mapping, resource providers and aggregate
    /// memberships with it. 404 counts as deleted, 409 means the host still has work.
    pub async fn delete_service(&self, id: &str) -> Result<ServiceDeletion, OpenStackError> {
        let path = format!("/v2.1/os-services/{}", segment(id));
        let accepted = [200, 202, 204, 404, 409];
        match self
            .status(COMPUTE, Method::DELETE, &path, None, &accepted)
            .await?
        {
            409 => Ok(ServiceDeletion::InUse),
            _ => Ok(ServiceDeletion::Deleted),
        }
    }

    /// The servers of every project on `host` (one page: only zero versus some matters), asked
    /// at 2.69 so a cell that did not answer shows instead of reading as no server. Nova cannot
    /// filter a down cell's servers by host, so any `UNKNOWN` record fails the count: whether
    /// the host still carries servers cannot be told, and "none" would release it.
    pub async fn count_servers(&self, host: &str) -> Result<usize, OpenStackError> {
        let path = format!("/v2.1/servers?all_tenants=1&host={}", segment(host));
        let response = self
            .expect(
                Api::Compute(DOWN_CELLS_VERSION),
                Method::GET,
                &path,
                None,
                &[200],
            )
            .await?;
        let servers: Servers = decode("GET", &path, &response)?;
        if servers
            .servers
            .iter()
            .any(|s| s.status.as_deref() == Some("UNKNOWN"))
        {
            return Err(OpenStackError::ServersUncountable(host.to_owned()));
        }
        Ok(servers.servers.len())
    }

    /// Every host aggregate.
    pub async fn aggregates(&self) -> Result<Vec<Aggregate>, OpenStackError> {
        let path = "/v2.1/os-aggregates";
        let response = self
            .expect(COMPUTE, Method::GET, path, None, &[200])
            .await?;
        let listed: Aggregates = decode("GET", path, &response)?;
        Ok(listed.aggregates.into_iter().map(Aggregate::from).collect())
    }

    /// Creates an aggregate (in availability zone `zone` when given); None when the name
    /// already exists (409: created concurrently).
    pub async fn create_aggregate(
        &self,
        name: &str,
        zone: Option<&str>,
    ) -> Result<Option<Aggregate>, OpenStackError> {
        let path = "/v2.1/os-aggregates";
        let body = match zone {
            Some(zone) => json!({ "aggregate": { "name": name, "availability_zone": zone } }),
            None => json!({ "aggregate": { "name": name } }),
        };
        let response = self
            .expect(COMPUTE, Method::POST, path, Some(body), &[200, 201, 409])
            .await?;
        if response.status == 409 {
            return Ok(None);
        }
        let created: OneAggregate = decode("POST", path, &response)?;
        Ok(Some(created.aggregate.into()))
    }

    /// Sets one metadata key of an aggregate (keys not named stay).
    pub async fn set_aggregate_metadata(
        &self,
        id: i64,
        key: &str,
        value: &str,
    ) -> Result<(), OpenStackError> {
        let body = json!({ "set_metadata": { "metadata": { key: value } } });
        let path = format!("/v2.1/os-aggregates/{id}/action");
        self.status(COMPUTE, Method::POST, &path, Some(body), &[])
            .await
            .map(drop)
    }

    /// Deletes an aggregate; 404 counts as deleted.
    pub async fn delete_aggregate(&self, id: i64) -> Result<(), OpenStackError> {
        let path = format!("/v2.1/os-aggregates/{id}");
        self.status(COMPUTE, Method::DELETE, &path, None, &[200, 202, 204, 404])
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{Fake, client};
    use super::*;

    #[tokio::test]
    async fn services_are_listed_at_2_69_and_an_unknown_cell_fails_the_list() {
        let fake = Fake::new().answer(
            "GET",
            "/v2.1/os-services?binary=nova-compute",
            200,
            r#"{"services": [
                {"id": "u-1", "host": "node-a", "status": "enabled", "state": "up", "disabled_reason": null, "binary": "nova-compute"},
                {"id": "u-2", "host": "node-b", "status": "disabled", "state": "down", "disabled_reason": "maintenance"}
            ]}"#,
        );
        let c = client(&fake, None);
        assert_eq!(
            c.compute_services().await.expect("listed"),
            [
                ComputeService {
                    id: "u-1".into(),
                    host: "node-a".into(),
                    status: "enabled".into(),
                    state: "up".into(),
                    disabled_reason: String::new(),
                },
                ComputeService {
                    id: "u-2".into(),
                    host: "node-b".into(),
                    status: "disabled".into(),
                    state: "down".into(),
                    disabled_reason: "maintenance".into(),
                },
            ]
        );
        let seen = fake.requests();
        assert_eq!(
            seen[1].header("OpenStack-API-Version"),
            Some("compute 2.69")
        );

        let fake = Fake::new().answer(
            "GET",
            "/v2.1/os-services?binary=nova-compute",
            200,
            r#"{"services": [{"binary": "nova-compute", "host": "node-c", "status": "UNKNOWN"}]}"#,
        );
        assert_eq!(
            client(&fake, None)
                .compute_services()
                .await
                .expect_err("incomplete")
                .to_string(),
            "the cell of host node-c did not answer, so the service list is incomplete"
        );
    }

    #[tokio::test]
    async fn mapped_hosts_page_until_an_empty_page() {
        let fake = Fake::new()
            .answer(
                "GET",
                "/v2.1/os-hypervisors/detail?limit=500",
                200,
                r#"{"hypervisors": [{"id": "h-1", "service": {"host": "node-a"}}, {"id": "h-2", "service": null}]}"#,
            )
            .answer(
                "GET",
                "/v2.1/os-hypervisors/detail?limit=500&marker=h-2",
                200,
                r#"{"hypervisors": [{"id": "h-3", "service": {"host": "node-b"}}]}"#,
            )
            .answer(
                "GET",
                "/v2.1/os-hypervisors/detail?limit=500&marker=h-3",
                200,
                r#"{"hypervisors": []}"#,
            );
        let c = client(&fake, None);
        assert_eq!(
            c.mapped_hosts().await.expect("listed"),
            BTreeSet::from(["node-a".to_owned(), "node-b".to_owned()])
        );
        assert_eq!(
            fake.requests()[1].header("X-OpenStack-Nova-API-Version"),
            Some("2.88")
        );

        let endless = Fake::new()
            .answer(
                "GET",
                "/v2.1/os-hypervisors/detail?limit=500",
                200,
                r#"{"hypervisors": [{"id": "h-1", "service": {"host": "node-a"}}]}"#,
            )
            .answer(
                "GET",
                "/v2.1/os-hypervisors/detail?limit=500&marker=h-1",
                200,
                r#"{"hypervisors": [{"id": "h-1", "service": {"host": "node-a"}}]}"#,
            );
        assert_eq!(
            client(&endless, None).mapped_hosts().await,
            Err(OpenStackError::EndlessHypervisors)
        );
    }

    #[tokio::test]
    async fn service_writes_and_server_counts() {
        let fake = Fake::new()
            .answer("PUT", "/v2.1/os-services/u-1", 200, "{}")
            .answer("DELETE", "/v2.1/os-services/u-1", 204, "")
            .answer("DELETE", "/v2.1/os-services/u-2", 409, "instances remain")
            .answer("DELETE", "/v2.1/os-services/u-3", 404, "")
            .answer("DELETE", "/v2.1/os-services/u-4", 403, "policy")
            .answer(
                "GET",
                "/v2.1/servers?all_tenants=1&host=node-a",
                200,
                r#"{"servers": [{"id": "s-1"}, {"id": "s-2"}]}"#,
            );
        let c = client(&fake, None);
        c.disable_service("u-1", "c5c3.io: leaving NovaCompute ns/pool")
            .await
            .expect("disabled");
        let put = &fake.requests()[1];
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&put.body).expect("json"),
            json!({ "status": "disabled", "disabled_reason": "c5c3.io: leaving NovaCompute ns/pool" })
        );
        assert_eq!(put.header("Content-Type"), Some("application/json"));
        assert_eq!(put.header("OpenStack-API-Version"), Some("compute 2.53"));
        assert_eq!(c.delete_service("u-1").await, Ok(ServiceDeletion::Deleted));
        assert_eq!(c.delete_service("u-2").await, Ok(ServiceDeletion::InUse));
        assert_eq!(c.delete_service("u-3").await, Ok(ServiceDeletion::Deleted));
        assert_eq!(
            c.delete_service("u-4").await.expect_err("403").to_string(),
            "DELETE /v2.1/os-services/u-4: HTTP 403: policy"
        );
        assert_eq!(c.count_servers("node-a").await, Ok(2));
        let count = fake
            .requests()
            .into_iter()
            .find(|r| r.url.contains("/servers?"))
            .expect("the count");
        assert_eq!(
            (
                count.header("X-OpenStack-Nova-API-Version"),
                count.header("OpenStack-API-Version")
            ),
            (Some("2.69"), Some("compute 2.69")),
            "asked at 2.69, so a down cell cannot pass for no server"
        );
    }

    /// Injects a server listing holding Nova's minimal record of a down cell's server (status
    /// UNKNOWN, beside a real one and alone); asserts the count fails naming the host rather
    /// than reading the host as empty.
    #[tokio::test]
    async fn a_down_cell_makes_the_server_count_fail_rather_than_read_zero() {
        for listed in [
            r#"{"servers": [{"id": "s-1", "status": "ACTIVE"}, {"id": "s-2", "status": "UNKNOWN", "links": []}]}"#,
            r#"{"servers": [{"id": "s-2", "status": "UNKNOWN"}]}"#,
        ] {
            let fake = Fake::new().answer(
                "GET",
                "/v2.1/servers?all_tenants=1&host=node-a",
                200,
                listed,
            );
            assert_eq!(
                client(&fake, None)
                    .count_servers("node-a")
                    .await
                    .expect_err("uncountable")
                    .to_string(),
                "a cell did not answer (Nova listed a server with status UNKNOWN), so the servers on host node-a cannot be counted"
            );
        }
    }

    #[tokio::test]
    async fn aggregates_are_listed_created_marked_and_deleted() {
        let fake = Fake::new()
            .answer(
                "GET",
                "/v2.1/os-aggregates",
                200,
                r#"{"aggregates": [
                    {"id": 1, "name": "zone-a", "availability_zone": "zone-a", "hosts": ["node-a"],
                     "metadata": {"availability_zone": "zone-a", "c5c3.io:nova": "ns/nova"}},
                    {"id": 2, "name": "tenant_filter_tests", "availability_zone": null, "hosts": [], "metadata": {}}
                ]}"#,
            )
            .answer(
                "POST",
                "/v2.1/os-aggregates",
                200,
                r#"{"aggregate": {"id": 3, "name": "zone-b", "availability_zone": "zone-b"}}"#,
            )
            .answer("POST", "/v2.1/os-aggregates", 409, "exists")
            .answer("POST", "/v2.1/os-aggregates/3/action", 200, "{}")
            .answer("DELETE", "/v2.1/os-aggregates/3", 200, "")
            .answer("DELETE", "/v2.1/os-aggregates/4", 404, "");
        let c = client(&fake, None);
        let listed = c.aggregates().await.expect("listed");
        assert_eq!(listed[0].hosts, ["node-a"]);
        assert_eq!(listed[0].metadata["c5c3.io:nova"], "ns/nova");
        assert_eq!(listed[1].availability_zone, "");
        let created = c
            .create_aggregate("zone-b", Some("zone-b"))
            .await
            .expect("created")
            .expect("new");
        assert_eq!(
            (created.id, created.availability_zone.as_str()),
            (3, "zone-b")
        );
        assert_eq!(
            c.create_aggregate("tenant_filter_tests", None).await,
            Ok(None)
        );
        c.set_aggregate_metadata(3, "c5c3.io:nova", "ns/nova")
            .await
            .expect("marked");
        c.delete_aggregate(3).await.expect("deleted");
        c.delete_aggregate(4).await.expect("already gone");
        let bodies: Vec<serde_json::Value> = fake
            .requests()
            .iter()
            .filter(|r| r.method == "POST" && !r.url.ends_with("/auth/tokens"))
            .map(|r| serde_json::from_str(&r.body).expect("json"))
            .collect();
        assert_eq!(
            bodies,
            [
                json!({ "aggregate": { "name": "zone-b", "availability_zone": "zone-b" } }),
                json!({ "aggregate": { "name": "tenant_filter_tests" } }),
                json!({ "set_metadata": { "metadata": { "c5c3.io:nova": "ns/nova" } } }),
            ]
        );
    }
}
