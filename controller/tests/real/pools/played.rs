//! The PLAYED nova-compute of kwok nodes. kwok runs no container, so for every pod a pool's
//! DaemonSet places on a kwok node the player runs the same pod on the real node: the same
//! image, contract Secret, pool ConfigMap, environment and mounts, but as the nova-compute of
//! the kwok node (`OS_DEFAULT__HOST` is the kwok node's name, not the pod's node) with a state
//! path of its own (the real node's `/var/lib/nova` holds the real compute's `compute_id`), on
//! the pod network (a hostname of its own, see [`played_pod`]). A
//! played pod lives as long as the pod it plays: it starts once that pod runs and is deleted once
//! that pod is gone or replaced. Played pods carry [`PLAYED_FOR`], never the DaemonSet's labels.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use nova_test_harness::node::NODE_NAME;
use nova_testkit::wait::Wait;
use serde_json::{Value, json};

use super::{pool_pods, running};

/// The label naming the kwok node a played pod is the nova-compute of.
pub const PLAYED_FOR: &str = "test.nova.c5c3.io/played-for";
/// The annotation naming the uid of the pool pod a played pod plays.
const PLAYS: &str = "test.nova.c5c3.io/plays";
/// Below the real node's shared `/var/lib/nova`, so the node's teardown removes it.
const STATE_ROOT: &str = "/var/lib/nova/played";

/// The name of the played pod of `node`.
pub fn played_name(node: &str) -> String {
    format!("played-{node}")
}

/// Plays the pods of pool `pool` on the kwok nodes `nodes` until dropped.
pub struct Player(tokio::task::JoinHandle<()>);

impl Drop for Player {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Player {
    pub fn start(client: Client, ns: &str, pool: &str, nodes: &[&str]) -> Self {
        let (ns, pool) = (ns.to_owned(), pool.to_owned());
        let nodes: BTreeSet<String> = nodes.iter().map(|n| (*n).to_owned()).collect();
        Self(tokio::spawn(async move {
            loop {
                if let Err(e) = play(&client, &ns, &pool, &nodes).await {
                    eprintln!("PLAYED nova-compute: a round failed, retrying: {e}");
                }
                // The player's tick (it plays until dropped), not a wait for state.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }))
    }

    /// Stops playing, deletes every played pod of `ns` and waits until they are gone.
    pub async fn stop(self, client: &Client, ns: &str, timeout: Duration) {
        drop(self);
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let played = ListParams::default().labels(PLAYED_FOR);
        let _ = pods
            .delete_collection(&DeleteParams::default(), &played)
            .await;
        Wait::new("the played pods to be gone", timeout)
            .until(|| async { Ok(pods.list(&played).await?.items.is_empty().then_some(())) })
            .await
            .expect("the played pods are gone");
    }
}

/// One round: start the played pod of every running pool pod on a played node, delete the
/// played pods whose pool pod is gone or was replaced.
async fn play(
    client: &Client,
    ns: &str,
    pool: &str,
    nodes: &BTreeSet<String>,
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let running_pods: BTreeMap<String, Pod> = pods
        .list(&ListParams::default().labels(&pool_pods(pool)))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && running(p))
        .filter_map(|p| Some((p.spec.as_ref()?.node_name.clone()?, p)))
        .filter(|(node, _)| nodes.contains(node))
        .collect();
    let played = pods
        .list(&ListParams::default().labels(PLAYED_FOR))
        .await?
        .items;
    let mut playing = BTreeSet::new();
    for pod in played {
        let node = pod.labels().get(PLAYED_FOR).cloned().unwrap_or_default();
        let plays = pod.annotations().get(PLAYS).cloned();
        let current = running_pods.get(&node).and_then(|p| p.metadata.uid.clone());
        if plays.is_some() && plays == current {
            playing.insert(node);
        } else if pod.metadata.deletion_timestamp.is_none() {
            eprintln!(
                "PLAYED nova-compute of kwok node {node}: the pod it played is gone; deleting {}",
                pod.name_any()
            );
            pods.delete(&pod.name_any(), &DeleteParams::default())
                .await?;
        } else {
            playing.insert(node); // still terminating: its successor waits
        }
    }
    for (node, pod) in running_pods.iter().filter(|(n, _)| !playing.contains(*n)) {
        let played = played_pod(node, pod);
        match pods
            .create(
                &PostParams::default(),
                &serde_json::from_value(played).expect("a pod"),
            )
            .await
        {
            Ok(_) => eprintln!(
                "PLAYED nova-compute of kwok node {node}: started {} on {NODE_NAME} for {}",
                played_name(node),
                pod.name_any()
            ),
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The played pod of `pod`, the pool's pod on kwok node `node`: its containers, volumes and
/// pod settings on the real node, as host `node`, with the state path of its own, on the pod
/// network.
fn played_pod(node: &str, pod: &Pod) -> Value {
    let spec = serde_json::to_value(pod.spec.as_ref().expect("a pod spec")).expect("spec");
    let token = |v: &Value| {
        v["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("kube-api-access-"))
    };
    let containers = |key: &str| -> Value {
        let mut list = spec[key].as_array().cloned().unwrap_or_default();
        for c in &mut list {
            if let Some(mounts) = c["volumeMounts"].as_array_mut() {
                mounts.retain(|m| !token(m));
            }
            for env in c["env"].as_array_mut().into_iter().flatten() {
                if env["name"] == "OS_DEFAULT__HOST" {
                    *env = json!({"name": "OS_DEFAULT__HOST", "value": node});
                }
            }
        }
        json!(list)
    };
    let mut volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    volumes.retain(|v| !token(v));
    for v in &mut volumes {
        if v["name"] == "var-lib-nova" {
            v["hostPath"]["path"] = json!(format!("{STATE_ROOT}/{node}"));
        }
    }
    json!({
        "metadata": {
            "name": played_name(node),
            "labels": {PLAYED_FOR: node},
            "annotations": {PLAYS: pod.metadata.uid},
        },
        "spec": {
            "nodeName": NODE_NAME,
            "automountServiceAccountToken": false,
            // Not on the host's network: oslo.messaging names its reply queues after the
            // hostname, the process name and the pid, which every nova-compute sharing the
            // real node's hostname would share (pid 1), and each would take the others' replies.
            "hostNetwork": false,
            "dnsPolicy": "ClusterFirst",
            "securityContext": spec["securityContext"],
            "terminationGracePeriodSeconds": spec["terminationGracePeriodSeconds"],
            "initContainers": containers("initContainers"),
            "containers": containers("containers"),
            "volumes": volumes,
        }
    })
}
