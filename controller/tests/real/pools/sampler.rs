//! The invariants of issues 13 and 32, sampled beside every scenario: no node with servers on
//! it ever loses its nova-compute pod, and no compute service is deleted while its host carries
//! servers. Every second the sampler reads the real Nova's servers per host, its compute
//! services, the Nodes and every pool pod (and PLAYED pod) of the namespace, and records a
//! violation when a host carrying servers has no running pod of a pool (for a kwok node: also
//! no played pod), when a host's compute service, once seen, is gone while a pod of a pool
//! still runs there (the service is deleted only after the pod), and when it is gone while the
//! host carries servers. A violation is confirmed by reading the servers again after the rest:
//! the same server on the host before and after. A host whose Node object was deleted is
//! excused from the pod check from then until a pod of a pool runs there again: no pod can run
//! on a Node that is not there, and the pool's term must bring it back once the Node is.
//!
//! A check covers its scenario up to the moment it is made: [`Sampler::assert_held`] waits
//! (bounded) for a sample begun after the call to finish, so a scenario shorter than one
//! sample (three compute API reads, seconds under load) is still sampled at its end.
//!
//! [`Sampler::openstack_only`] reads the real Nova alone (no Node, no pod), for a drill that
//! freezes the Kubernetes API server: it checks that no compute service is deleted while its
//! host carries servers.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use nova_test_harness::node::NODE_NAME;

use super::compute::Admin;
use super::played::PLAYED_FOR;
use super::running;

#[derive(Debug, Default)]
struct Tally {
    /// Samples taken since the last check.
    samples: u64,
    /// Of those, samples in which some host carried servers.
    with_servers: u64,
    /// Samples the API did not answer.
    failed: u64,
    violations: Vec<String>,
}

/// How many samples have begun and finished (answered or not).
#[derive(Debug, Default, Clone, Copy)]
struct Progress {
    begun: u64,
    finished: u64,
}

/// The bound on a check's wait for a sample begun after it: a sample is three compute API
/// reads (and, with the Kubernetes side, three list calls), each bounded by its client.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Sampler {
    tally: Arc<Mutex<Tally>>,
    progress: watch::Receiver<Progress>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sampler {
    pub fn start(client: Client, ns: &str, admin: Admin) -> Self {
        Self::sampling(Some((client, ns.to_owned())), admin)
    }

    /// Samples the real Nova alone, through its compute API: its servers per host and its
    /// compute services, never the Kubernetes API.
    pub fn openstack_only(admin: Admin) -> Self {
        Self::sampling(None, admin)
    }

    fn sampling(kube: Option<(Client, String)>, admin: Admin) -> Self {
        let tally = Arc::new(Mutex::new(Tally::default()));
        let shared = tally.clone();
        let (progress, watching) = watch::channel(Progress::default());
        let task = tokio::spawn(async move {
            let mut seen = Seen::default();
            loop {
                let kube = kube.as_ref().map(|(client, ns)| (client, ns.as_str()));
                progress.send_modify(|p| p.begun += 1);
                sample(kube, &admin, &shared, &mut seen).await;
                progress.send_modify(|p| p.finished += 1);
                // The sampler's tick (it samples until dropped), not a wait for state.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        Self {
            tally,
            progress: watching,
            task,
        }
    }

    /// Fails the scenario if the invariant broke during it (or the sampler never sampled);
    /// returns how many samples saw servers, then starts counting afresh for the next. It
    /// first waits for a sample begun after the call, so the scenario's end is in the tally.
    pub async fn assert_held(&self, scenario: &str) -> u64 {
        let mut progress = self.progress.clone();
        let after = progress.borrow().begun + 1;
        let finished =
            tokio::time::timeout(SAMPLE_TIMEOUT, progress.wait_for(|p| p.finished >= after)).await;
        assert!(
            matches!(finished, Ok(Ok(_))),
            "{scenario}: no sample begun after the check finished within {SAMPLE_TIMEOUT:?} \
             (progress {:?}, tally {:?})",
            *self.progress.borrow(),
            self.tally.lock().expect("tally")
        );
        let tally = std::mem::take(&mut *self.tally.lock().expect("tally"));
        eprintln!(
            "invariant sampler, {scenario}: {} samples ({} with servers, {} unanswered)",
            tally.samples, tally.with_servers, tally.failed
        );
        assert!(
            tally.violations.is_empty(),
            "{scenario}: {:#?}",
            tally.violations
        );
        assert!(tally.samples > 0, "{scenario}: the sampler took no sample");
        tally.with_servers
    }
}

/// The nodes with a running pod of a pool, and the kwok nodes with a running played pod.
async fn pods_per_node(
    client: &Client,
    ns: &str,
) -> Result<(BTreeSet<String>, BTreeSet<String>), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pool = pods
        .list(
            &ListParams::default().labels(
                "app.kubernetes.io/name=novacompute,app.kubernetes.io/component=nova-compute",
            ),
        )
        .await?
        .items
        .into_iter()
        .filter(running)
        .filter_map(|p| p.spec?.node_name)
        .collect();
    let played = pods
        .list(&ListParams::default().labels(PLAYED_FOR))
        .await?
        .items
        .into_iter()
        .filter(running)
        .filter_map(|p| p.labels().get(PLAYED_FOR).cloned())
        .collect();
    Ok((pool, played))
}

/// What the samples so far have seen.
#[derive(Default)]
struct Seen {
    /// The hosts with a compute service.
    services: BTreeSet<String>,
    /// The hosts whose Node was seen gone and which have run no pod of a pool since.
    nodes_lost: BTreeSet<String>,
}

/// The names of the Nodes.
async fn node_names(client: &Client) -> Result<BTreeSet<String>, kube::Error> {
    Ok(Api::<Node>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect())
}

/// The Nodes and the nodes with pool pods and played pods, as a sample reads them.
type Cluster = (BTreeSet<String>, (BTreeSet<String>, BTreeSet<String>));

/// Reads the Nodes and the pods per node of `ns`, for a sample.
async fn cluster(client: &Client, ns: &str) -> Result<Cluster, String> {
    let nodes = node_names(client).await.map_err(|e| e.to_string())?;
    let pods = pods_per_node(client, ns).await.map_err(|e| e.to_string())?;
    Ok((nodes, pods))
}

/// One sample: the real Nova's servers per host and services, and (with `kube`) the Nodes and
/// the pods of the namespace.
async fn sample(
    kube: Option<(&Client, &str)>,
    admin: &Admin,
    tally: &Mutex<Tally>,
    seen: &mut Seen,
) {
    let read = async {
        let servers = admin.servers_by_host().await?;
        let services = admin.service_hosts().await?;
        let cluster = match kube {
            Some((client, ns)) => Some(cluster(client, ns).await?),
            None => None,
        };
        let again = admin.servers_by_host().await?;
        Ok::<_, String>((servers, cluster, services, again))
    };
    let (servers, cluster, services, again) = match read.await {
        Ok(read) => read,
        Err(e) => {
            eprintln!("invariant sampler: a sample failed: {e}");
            tally.lock().expect("tally").failed += 1;
            return;
        }
    };
    let mut violations = Vec::new();
    let none = BTreeSet::new();
    for (host, ids) in &servers {
        let kept: BTreeSet<&String> = ids.intersection(again.get(host).unwrap_or(&none)).collect();
        if let Some((nodes, (pool, played))) = &cluster {
            let has_pod = pool.contains(host) && (host == NODE_NAME || played.contains(host));
            if !nodes.contains(host) {
                seen.nodes_lost.insert(host.clone());
            } else if has_pod {
                seen.nodes_lost.remove(host);
            }
            if !kept.is_empty() && !has_pod && !seen.nodes_lost.contains(host) {
                violations.push(format!(
                    "host {host} carries servers {kept:?} but runs no nova-compute pod of a \
                     pool (pool pods on {pool:?}, played pods for {played:?})"
                ));
            }
        }
        if !kept.is_empty() && seen.services.contains(host) && !services.contains(host) {
            violations.push(format!(
                "the compute service of {host} was deleted while the host carries servers {kept:?}"
            ));
        }
    }
    let deleted: Vec<String> = seen.services.difference(&services).cloned().collect();
    for host in deleted {
        if cluster
            .as_ref()
            .is_some_and(|(_, (pool, _))| pool.contains(&host))
        {
            violations.push(format!(
                "the compute service of {host} was deleted while a pool pod still runs there"
            ));
        }
        seen.services.remove(&host);
    }
    seen.services.extend(services);
    let mut tally = tally.lock().expect("tally");
    tally.samples += 1;
    tally.with_servers += u64::from(servers.values().any(|ids| !ids.is_empty()));
    for v in violations {
        eprintln!("invariant sampler: VIOLATION: {v}");
        tally.violations.push(v);
    }
}
