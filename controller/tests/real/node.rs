//! The real node works: pods run for real, Jobs report exit codes and termination messages,
//! Services route through kube-proxy, cluster DNS answers, and pods reach the API server
//! through the `kubernetes` Service with their service-account token.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, PostParams};
use nova_test_harness::images::{TOOLS_IMAGE, tools_pod_spec};
use nova_test_harness::node::{NODE_LABEL, NODE_NAME};
use nova_test_harness::{kwok, pods, shared_real_node};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);

async fn create<K>(client: &kube::Client, ns: &str, value: serde_json::Value) -> Result<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let object: K = serde_json::from_value(value)?;
    Ok(api.create(&PostParams::default(), &object).await?)
}

/// A Job of one shell command in the tools image that must not be retried.
fn job(name: &str, script: &str) -> serde_json::Value {
    json!({
        "metadata": { "name": name },
        "spec": {
            "backoffLimit": 0,
            "template": { "spec": tools_pod_spec(&["sh", "-c", script]) }
        }
    })
}

#[tokio::test]
async fn the_real_node_is_ready_and_the_kwok_node_keeps_to_itself() -> Result<()> {
    let _timed = nova_testkit::stack::timed().await;
    let cp = shared_real_node().await?;
    let nodes: Api<Node> = Api::all(cp.client()?);
    let node = nodes.get(NODE_NAME).await?;
    let labels = node.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get(NODE_LABEL.0).map(String::as_str),
        Some(NODE_LABEL.1)
    );
    let annotations = node.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("kwok.x-k8s.io/node"),
        "kwok took the real node over: {annotations:?}"
    );
    let fake = nodes.get(kwok::NODE_NAME).await?;
    let taints = fake.spec.and_then(|s| s.taints).unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t.key == kwok::FAKE_NODE_TAINT && t.effect == "NoSchedule"),
        "{taints:?}"
    );
    let t = cp.timings();
    eprintln!(
        "real node timings: {:?} (control plane total {:.1}s)",
        t.node,
        t.total.as_secs_f64()
    );
    Ok(())
}

#[tokio::test]
async fn a_job_reports_its_exit_code_and_termination_message() -> Result<()> {
    let _timed = nova_testkit::stack::timed().await;
    let cp = shared_real_node().await?;
    let client = cp.client()?;
    let ns = cp.namespace("node-job").await?;
    create::<Job>(
        &client,
        &ns,
        job(
            "report",
            "printf 'cell1=1234' > /dev/termination-log; echo to-stdout; exit 3",
        ),
    )
    .await?;
    let t = pods::wait_for_job_termination(&client, &ns, "report", "main", TIMEOUT).await?;
    assert_eq!(
        (t.exit_code, t.reason.as_str(), t.message.as_str()),
        (3, "Error", "cell1=1234")
    );
    let pod_name = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&kube::api::ListParams::default().labels("job-name=report"))
        .await?
        .items
        .remove(0)
        .metadata
        .name
        .context("pod name")?;
    let logs = pods::logs(&client, &ns, &pod_name, "main").await?;
    assert_eq!(logs.trim(), "to-stdout");
    Ok(())
}

#[tokio::test]
async fn pods_reach_services_by_dns_and_the_api_server_by_the_kubernetes_service() -> Result<()> {
    let _timed = nova_testkit::stack::timed().await;
    let cp = shared_real_node().await?;
    let client = cp.client()?;
    let ns = cp.namespace("node-net").await?;
    create::<Pod>(
        &client,
        &ns,
        json!({
            "metadata": { "name": "web", "labels": { "app": "web" } },
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "web",
                    "image": TOOLS_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c",
                        "while true; do printf 'HTTP/1.0 200 OK\\r\\nContent-Length: 5\\r\\n\\r\\nhello' | nc -l -N -p 8080 >/dev/null; done"],
                    "ports": [{ "containerPort": 8080 }],
                    "readinessProbe": { "tcpSocket": { "port": 8080 }, "periodSeconds": 1 }
                }]
            }
        }),
    )
    .await?;
    create::<Service>(
        &client,
        &ns,
        json!({
            "metadata": { "name": "web" },
            "spec": { "selector": { "app": "web" }, "ports": [{ "port": 80, "targetPort": 8080 }] }
        }),
    )
    .await?;
    let script = format!(
        "set -e; \
         for i in $(seq 1 50); do curl -sf --max-time 2 http://web.{ns}.svc.cluster.local/ > /tmp/body && break; sleep 0.2; done; \
         SA=/var/run/secrets/kubernetes.io/serviceaccount; \
         curl -sf --max-time 5 --cacert $SA/ca.crt -H \"Authorization: Bearer $(cat $SA/token)\" \
              https://kubernetes.default.svc/api/v1/namespaces/{ns}/pods/web -o /tmp/pod; \
         grep -q '\"name\": *\"web\"' /tmp/pod || grep -q '\"name\":\"web\"' /tmp/pod; \
         printf '%s' \"$(cat /tmp/body)\" > /dev/termination-log"
    );
    // The default ServiceAccount may read pods in its namespace.
    create::<k8s_openapi::api::rbac::v1::RoleBinding>(
        &client,
        &ns,
        json!({
            "metadata": { "name": "default-view" },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view" },
            "subjects": [{ "kind": "ServiceAccount", "name": "default", "namespace": ns }]
        }),
    )
    .await?;
    create::<Job>(&client, &ns, job("client", &script)).await?;
    let t = pods::wait_for_job_termination(&client, &ns, "client", "main", TIMEOUT).await?;
    assert_eq!((t.exit_code, t.message.as_str()), (0, "hello"), "{t:?}");
    Ok(())
}
