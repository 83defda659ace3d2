//! Reading what real pods did: how a container terminated (exit code, reason, the message it
//! wrote to `/dev/termination-log`) and its logs.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};

use crate::{Error, Result, kube_err};

/// How one container of a pod ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Termination {
    pub container: String,
    pub exit_code: i32,
    pub reason: String,
    /// What the container wrote to its termination-message path.
    pub message: String,
}

/// Waits until the named container of pod `name` has terminated (its first run) and returns how.
pub async fn wait_for_termination(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: &str,
    timeout: Duration,
) -> Result<Termination> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    let mut last = String::from("the pod does not exist yet");
    loop {
        if let Some(p) = pods
            .get_opt(pod)
            .await
            .map_err(kube_err(format!("reading pod {namespace}/{pod}")))?
        {
            if let Some(t) = termination_of(&p, container) {
                return Ok(t);
            }
            last = describe(&p);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("container {container} of pod {namespace}/{pod} to terminate"),
                after: timeout,
                detail: format!("; last seen: {last}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits for the first pod of Job `job` and then for its container to terminate.
pub async fn wait_for_job_termination(
    client: &kube::Client,
    namespace: &str,
    job: &str,
    container: &str,
    timeout: Duration,
) -> Result<Termination> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    let selector = ListParams::default().labels(&format!("job-name={job}"));
    loop {
        let list = pods.list(&selector).await.map_err(kube_err(format!(
            "listing the pods of Job {namespace}/{job}"
        )))?;
        if let Some(name) = list.items.first().and_then(|p| p.metadata.name.clone()) {
            return wait_for_termination(
                client,
                namespace,
                &name,
                container,
                deadline.saturating_duration_since(Instant::now()),
            )
            .await;
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("a pod of Job {namespace}/{job}"),
                after: timeout,
                detail: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The container's (current or last) logs.
pub async fn logs(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: &str,
) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.logs(
        pod,
        &LogParams {
            container: Some(container.to_owned()),
            ..LogParams::default()
        },
    )
    .await
    .map_err(kube_err(format!(
        "reading the logs of {namespace}/{pod}/{container}"
    )))
}

fn termination_of(pod: &Pod, container: &str) -> Option<Termination> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .chain(status.init_container_statuses.iter())
        .flatten()
        .find(|s| s.name == container)
        .and_then(|s| {
            let t = s
                .state
                .as_ref()
                .and_then(|st| st.terminated.clone())
                .or_else(|| s.last_state.as_ref().and_then(|st| st.terminated.clone()))?;
            Some(Termination {
                container: container.to_owned(),
                exit_code: t.exit_code,
                reason: t.reason.unwrap_or_default(),
                message: t.message.unwrap_or_default(),
            })
        })
}

/// A one-line summary of a pod's state, for timeout messages.
fn describe(pod: &Pod) -> String {
    let Some(status) = &pod.status else {
        return "no status".into();
    };
    let waiting: Vec<String> = status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| {
            let w = c.state.as_ref()?.waiting.as_ref()?;
            Some(format!(
                "{} waiting: {} {}",
                c.name,
                w.reason.clone().unwrap_or_default(),
                w.message.clone().unwrap_or_default()
            ))
        })
        .collect();
    format!(
        "phase {}; {}",
        status.phase.clone().unwrap_or_default(),
        waiting.join("; ")
    )
}
