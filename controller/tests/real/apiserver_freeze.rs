//! The management API server frozen during a real drain (issue 32 part 5).
//!
//! **Injects**: a pool on the real node (the real `nova-compute` of the operator's Nova on the
//! fake driver, the host onboarded into its zone's aggregate as the hypervisor operator would)
//! hosts a server; the node is relabelled out of its pool, so the pool disables its
//! compute service and holds the node `Draining`; then the control plane's `kube-apiserver` gets
//! SIGSTOP for 90 s (a true black hole: connections stay open, nothing answers), then SIGCONT.
//! The in-process NovaCompute controller keeps running throughout and is never restarted.
//!
//! **Asserts**: sampled every second from the OpenStack side alone (the compute API's service
//! list and servers per host, never the Kubernetes API, which does not answer), no compute
//! service is deleted while its host carries a server, before, during or after the freeze; at
//! the end of the freeze Nova still has the host's service, disabled with the pool's reason,
//! and the server on it; after SIGCONT the pool still holds the node `Draining` with the server
//! counted and its pod in place, nothing deleted; once the test deletes the server, the same
//! controller moves the node to `Releasing` and releases it within a bounded time (printed:
//! how long after the resume it acted), its pod goes, and its service is deleted then, once
//! (one `ComputeServiceDisabled`, one `ComputeServiceDeleted` event).
//!
//! The API server is shared by every test of the binary, so the drill holds the tier alone
//! (`stack::timed_alone`) and the freeze is a guard (`FrozenApiServer`) that sends SIGCONT on
//! every path.

use std::time::{Duration, Instant};

use crate::novacompute_real::{
    REAL_POOL, Suite, delete_pool, label_node, pool_events, real_node_pool_ready, released_once,
    service_of, still_draining, times, wait_draining,
};
use crate::pools::sampler::Sampler;
use nova_api::v1alpha1::NodePhase;
use nova_test_harness::node::NODE_NAME;
use nova_testkit::prelude::*;
use nova_testkit::real::*;

/// How long the API server stays frozen.
const FREEZE: Duration = Duration::from_secs(90);
/// The bound on the API server's readiness after SIGCONT.
const THAWED: Duration = Duration::from_secs(60);
/// The least number of samples with the server on its host the freeze must see (one a second
/// is taken; a sample of the compute API under load can take a few seconds).
const FROZEN_SAMPLES: u64 = 20;

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_management_api_server_during_a_drain_deletes_no_service_hosting_a_server() {
    let _tier = nova_testkit::stack::timed_alone().await;
    let (cp, _) = nova_testkit::stack::openstack().await;
    let s = Suite::start("drain-freeze").await;
    let (client, ns) = (s.client.clone(), s.ns.clone());
    let (_, zone) = real_node_pool_ready(&s).await;
    // The PLAYED onboarding of openstack-hypervisor-operator: the host into its zone's
    // aggregate, where the admin's `<zone>:<host>` placement finds it.
    let aggregates = s.view.aggregates().await.expect("aggregates");
    let aggregate = aggregates
        .iter()
        .find(|a| a.name == zone)
        .unwrap_or_else(|| panic!("the zone's aggregate: {aggregates:?}"));
    s.admin.onboard(aggregate.id, NODE_NAME).await;
    s.admin.ensure_flavor().await;
    let server = s
        .admin
        .boot("freeze-0", &zone, NODE_NAME, REAL_TIMEOUT)
        .await;
    assert_eq!(s.view.count_servers(NODE_NAME).await.expect("count"), 1);
    let sampler = Sampler::openstack_only(s.admin.clone());

    // Out of its pool: the drain starts and holds on the server.
    label_node(&client, NODE_NAME, POOL_LABEL, None).await;
    wait_draining(&s, REAL_POOL, NODE_NAME, 1).await;
    let reason = format!("c5c3.io: leaving NovaCompute {ns}/{REAL_POOL}");
    let disabled =
        |what: &str, service: Option<nova_controller::openstack::nova::ComputeService>| {
            let service = service.unwrap_or_else(|| panic!("{what}: the node's service is there"));
            assert_eq!(
                (service.status.as_str(), service.disabled_reason.as_str()),
                ("disabled", reason.as_str()),
                "{what}"
            );
            service.id
        };
    let id = disabled("draining", service_of(&s.view, NODE_NAME).await);
    sampler.assert_held("the drain before the freeze").await;

    let frozen = cp.freeze_apiserver().expect("SIGSTOP the API server");
    let frozen_at = Instant::now();
    // The fault held on purpose: the sampler reads the compute API meanwhile.
    tokio::time::sleep(FREEZE).await;
    // The end of the freeze, as Nova has it: the service still there, disabled, the server on
    // its host.
    let still = disabled("frozen", service_of(&s.view, NODE_NAME).await);
    assert_eq!(still, id, "the same service");
    assert_eq!(s.view.count_servers(NODE_NAME).await.expect("count"), 1);
    let ready_after = frozen.thaw(THAWED).await.expect("SIGCONT the API server");
    let resumed = Instant::now();
    eprintln!(
        "the API server was frozen {:.0}s and ready {:.1}s after SIGCONT",
        frozen_at.elapsed().as_secs_f64(),
        ready_after.as_secs_f64()
    );
    let frozen_samples = sampler.assert_held("the freeze").await;
    assert!(
        frozen_samples >= FROZEN_SAMPLES,
        "{frozen_samples} samples saw the server during the freeze, {FROZEN_SAMPLES} wanted"
    );

    // After the freeze: nothing released, nothing deleted.
    let (of_pool, _) = still_draining(&s, REAL_POOL, NODE_NAME, 1).await;
    assert_eq!(
        of_pool.len(),
        1,
        "the pod stays while it drains: {of_pool:?}"
    );
    let events = pool_events(&client, &ns, REAL_POOL).await;
    assert_eq!(times(&events, "ComputeServiceDeleted"), 0, "{events:?}");

    // The server deleted: the same controller releases the node.
    s.admin.delete_servers(&[server], REAL_TIMEOUT).await;
    let servers_gone = resumed.elapsed().as_secs_f64();
    let phases = released_once(&s, REAL_POOL, NODE_NAME).await;
    let released = servers_gone + phases.last().map_or(0.0, |(_, at)| *at);
    let acted = phases
        .iter()
        .find(|(p, _)| *p != Some(NodePhase::Draining))
        .map(|(p, at)| (p, servers_gone + at));
    eprintln!(
        "after SIGCONT: the server gone at {servers_gone:.1}s, the controller acted at \
         {acted:?} (phase, seconds), the node released at {released:.1}s; phases {phases:?}"
    );
    sampler.assert_held("the release after the freeze").await;
    drop(sampler);

    delete_pool(&client, &ns, REAL_POOL).await;
    label_node(&client, NODE_NAME, "topology.kubernetes.io/zone", None).await;
    finish(&client, &ns).await;
}
