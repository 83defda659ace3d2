//! The five workloads and the parallel group on the real API server, kwok playing the nodes
//! (pods Ready at once) and the test playing the Gateway (simulated): a Nova goes from nothing
//! to every workload available with every Service, budget, route, autoscaler and policy in
//! place; a rebuilt template is a no-op; a rotation rolls exactly the workloads carrying its
//! digest, each reported by RolloutStarted (cause credential) and RolloutComplete; the HPA owns
//! the API's replicas; switching the proxy off removes its four objects; a release upgrade
//! rolls the roles in pipeline order (cause release) and flips to Contracting last.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use nova_api::v1alpha1::Nova;
use nova_controller::objects::kinds;
use nova_testkit::prelude::*;
use serde_json::json;

const WORKLOADS: [&str; 5] = [
    "nova-conductor",
    "nova-scheduler",
    "nova-metadata",
    "nova-novncproxy",
    "nova",
];

/// The example with every optional child switched on.
fn loaded(ns: &str) -> Nova {
    let mut nova = example(ns);
    let mut spec = serde_json::to_value(&nova.spec).expect("spec");
    spec["gateway"] =
        json!({"hostname": "compute.example.com", "parentRef": {"name": "openstack-gw"}});
    spec["autoscaling"] = json!({"maxReplicas": 6, "targetCPUUtilization": 70});
    spec["networkPolicy"] =
        json!({"ingress": [{"namespaceSelector": {"matchLabels": {"team": "edge"}}}]});
    spec["metadata"]["gateway"] =
        json!({"hostname": "metadata.example.com", "parentRef": {"name": "openstack-gw"}});
    spec["scheduler"] = json!({"deployment": {"verticalAutoscaling": {"updateMode": "Off"}}});
    nova.spec = serde_json::from_value(spec).expect("spec");
    nova
}

async fn generations(deployments: &Api<Deployment>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for name in WORKLOADS {
        if let Some(d) = deployments.get_opt(name).await.expect("get") {
            out.insert(name.to_owned(), d.metadata.generation.unwrap_or_default());
        }
    }
    out
}

async fn until<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    Wait::new(what, TIMEOUT).until(check).await.expect(what);
}

async fn exists<K>(client: &Client, ns: &str, name: &str) -> bool
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .expect("get")
        .is_some()
}

async fn dynamic_exists(
    client: &Client,
    ns: &str,
    kind: &kube::core::ApiResource,
    name: &str,
) -> bool {
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, kind)
        .get_opt(name)
        .await
        .expect("get")
        .is_some()
}

#[tokio::test(flavor = "multi_thread")]
async fn from_nothing_to_every_workload_then_rotation_autoscaling_and_the_proxy_switch() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("nova-workloads").await.expect("namespace");
    provide_inputs(&client, &ns).await;
    let metrics = start_controller(client.clone(), &ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let t = Instant::now();
    novas
        .create(&PostParams::default(), &loaded(&ns))
        .await
        .expect("create Nova");

    // Nothing to everything.
    wait_converged(&novas, "nova", || Ok(())).await;
    println!(
        "every workload available after {:.1}s",
        t.elapsed().as_secs_f64()
    );
    for name in WORKLOADS {
        let d = deployments.get(name).await.expect("deployment");
        let status = d.status.expect("status");
        assert!(
            status.available_replicas.unwrap_or_default() >= 1,
            "{name} is available"
        );
    }
    for service in ["nova", "nova-metadata", "nova-novncproxy"] {
        assert!(
            exists::<Service>(&client, &ns, service).await,
            "Service {service}"
        );
    }
    for policy in ["nova", "nova-novncproxy"] {
        assert!(
            exists::<NetworkPolicy>(&client, &ns, policy).await,
            "NetworkPolicy {policy}"
        );
    }
    assert!(
        exists::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(&client, &ns, "nova").await
    );
    assert!(
        exists::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(&client, &ns, "nova")
            .await
    );
    assert!(
        dynamic_exists(
            &client,
            &ns,
            &kinds::vertical_pod_autoscaler(),
            "nova-scheduler"
        )
        .await
    );
    for route in ["nova", "nova-metadata", "nova-console"] {
        assert!(
            dynamic_exists(&client, &ns, &kinds::http_route(), route).await,
            "HTTPRoute {route}"
        );
    }
    let nova = novas.get("nova").await.expect("nova");
    assert_eq!(
        nova.status.as_ref().and_then(|s| s.endpoint.as_deref()),
        Some("https://compute.example.com/")
    );

    // A template rebuilt from an unchanged CR is a no-op: no new generation, no new ReplicaSet.
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let before = generations(&deployments).await;
    let sets_before = replica_sets
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .len();
    assert_eq!(
        sets_before,
        WORKLOADS.len(),
        "a fresh install rolls nothing: one ReplicaSet per Deployment"
    );
    touch_five_times(&novas, "nova", "noop", || passes(&metrics)).await;
    absence_window(Duration::from_secs(1)).await;
    assert_eq!(
        generations(&deployments).await,
        before,
        "no Deployment was written"
    );
    assert_eq!(
        replica_sets
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        sets_before,
        "no new ReplicaSet"
    );
    let reasons = event_reasons(&client, &ns).await;
    assert!(
        !reasons.iter().any(|r| r.starts_with("Rollout")),
        "creating and rebuilding workloads is no rollout: {reasons:?}"
    );

    // Rotating the metadata shared secret rolls the metadata API alone.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    put_secret(
        &secrets,
        "nova-metadata-secret",
        &[("shared_secret", "rotated-s3cret")],
    )
    .await;
    until("the metadata Deployment never rolled", || async {
        generations(&deployments).await["nova-metadata"] > before["nova-metadata"]
    })
    .await;
    absence_window(Duration::from_secs(2)).await;
    let after = generations(&deployments).await;
    for name in WORKLOADS.iter().filter(|n| **n != "nova-metadata") {
        assert_eq!(after[*name], before[*name], "{name} did not roll");
    }
    // Its rollout is reported on the Nova with its cause, then its completion.
    until(
        "the metadata rollout's events never both appeared",
        || async {
            let notes: Vec<(String, String)> = events_on(&client, &ns, "nova")
                .await
                .expect("events")
                .into_iter()
                .map(|(reason, note, _)| (reason, note))
                .collect();
            let on = |reason: &str, text: &str| {
                notes.iter().any(|(r, n)| r == reason && n.contains(text))
            };
            on(
                "RolloutStarted",
                "Deployment nova-metadata rolls out a new pod template (cause: credential)",
            ) && on("RolloutComplete", "Deployment nova-metadata rolled out")
                && !notes
                    .iter()
                    .any(|(r, n)| r.starts_with("Rollout") && !n.contains("nova-metadata "))
        },
    )
    .await;

    // Rotating the service-user password rolls all five.
    put_secret(
        &secrets,
        "nova-keystone",
        &[("password", "rotated-service-pw")],
    )
    .await;
    until("not every workload rolled on the password", || async {
        let now = generations(&deployments).await;
        WORKLOADS.iter().all(|n| now[*n] > after[*n])
    })
    .await;

    // The HPA owns the API's replicas: a count it set survives the operator's passes.
    wait_converged(&novas, "nova", || Ok(())).await;
    deployments
        .patch_scale(
            "nova",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("scale");
    touch_five_times(&novas, "nova", "scaled", || passes(&metrics)).await;
    absence_window(Duration::from_secs(1)).await;
    assert_eq!(
        deployments
            .get("nova")
            .await
            .expect("api")
            .spec
            .and_then(|s| s.replicas),
        Some(4),
        "the operator left the count to the HPA"
    );
    let api = deployments.get("nova").await.expect("api");
    let applied = api
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|e| {
            e.manager.as_deref() == Some("cobaltcore-operator")
                && e.operation.as_deref() == Some("Apply")
        })
        .and_then(|e| e.fields_v1.clone())
        .expect("the operator's apply entry");
    assert!(
        applied.0["f:spec"]["f:replicas"].is_null(),
        "the operator's apply does not own the autoscaled count, so no pass can write it back"
    );

    // Switching the proxy off removes its Deployment, Service, route and policy.
    let patch = json!({"spec": {"consoleProxy": {"enabled": false}}});
    novas
        .patch("nova", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("proxy off");
    until("the proxy's objects were never all removed", || async {
        !exists::<Deployment>(&client, &ns, "nova-novncproxy").await
            && !exists::<Service>(&client, &ns, "nova-novncproxy").await
            && !exists::<NetworkPolicy>(&client, &ns, "nova-novncproxy").await
            && !dynamic_exists(&client, &ns, &kinds::http_route(), "nova-console").await
    })
    .await;
    // The pass that removed them writes the condition after the removals.
    wait_for(&novas, "ConsoleProxyReady", "ConsoleProxyDisabled").await;
    assert_eq!(
        condition(&novas, "ConsoleProxyReady")
            .await
            .map(|c| c.0)
            .as_deref(),
        Some("True")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upgrade_rolls_the_roles_in_pipeline_order_then_flips_to_contracting() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("nova-upgrade").await.expect("namespace");
    provide_inputs(&client, &ns).await;
    start_controller(client.clone(), &ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("create Nova");
    wait_converged(&novas, "nova", || Ok(())).await;

    // The Database step's part, played: the schema migrated, the workloads' turn to roll.
    novas
        .patch_status(
            "nova",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"installedRelease": "2026.1", "targetRelease": "2026.2", "upgradePhase": "RollingUpdate"}})),
        )
        .await
        .expect("phase");
    let bump = json!({"spec": {"openStackRelease": "2026.2", "image": {"tag": "2026.2"}}});
    novas
        .patch("nova", &PatchParams::default(), &Patch::Merge(bump))
        .await
        .expect("bump");

    // Record the order in which each Deployment's template takes the new image: a sampler
    // at 100 ms (a role rolling before the previous one converged must be caught between two
    // looks), bounded like a wait.
    let new_image = "ghcr.io/c5c3/nova:2026.2";
    let mut order: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        for name in WORKLOADS {
            if order.iter().any(|o| o == name) {
                continue;
            }
            let image = deployments
                .get(name)
                .await
                .expect("deployment")
                .spec
                .and_then(|s| s.template.spec)
                .and_then(|p| p.containers.first().and_then(|c| c.image.clone()));
            if image.as_deref() == Some(new_image) {
                // The role before it had converged onto the new image when this one rolled.
                if let Some(previous) = order.last() {
                    let status = deployments
                        .get(previous)
                        .await
                        .expect("deployment")
                        .status
                        .expect("status");
                    assert!(
                        status.updated_replicas == status.replicas
                            && status.ready_replicas == status.replicas,
                        "{name} rolled before {previous} converged: {status:?}"
                    );
                }
                order.push(name.to_owned());
            }
        }
        let phase = novas
            .get("nova")
            .await
            .expect("nova")
            .status
            .and_then(|s| s.upgrade_phase);
        if phase == Some(nova_api::v1alpha1::UpgradePhase::Contracting) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never flipped to Contracting; rolled {order:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(order, WORKLOADS, "rolled in pipeline order, the API last");
    for name in WORKLOADS {
        let d = deployments.get(name).await.expect("deployment");
        let status = d.status.expect("status");
        assert_eq!(
            status.updated_replicas, status.replicas,
            "{name} had converged before the flip"
        );
    }
    let started: Vec<String> = events_on(&client, &ns, "nova")
        .await
        .expect("events")
        .into_iter()
        .filter(|(reason, _, _)| reason == "RolloutStarted")
        .map(|(_, note, _)| note)
        .collect();
    for name in WORKLOADS {
        let note = format!("Deployment {name} rolls out a new pod template (cause: release)");
        assert!(started.contains(&note), "{note:?} in {started:?}");
    }
}
