//! The Nova's host discovery Job `<nova>-discover-hosts` (`novacompute.md` §8), which the
//! pools of the Nova run when a registered compute host is not mapped into the cell yet: the
//! plain `cell_v2 discover_hosts` (not `--by-service`, so every later periodic discovery still
//! visits the node), built from the same nova-manage pod blocks as the migration Jobs, with the
//! image the API Deployment runs (during an upgrade that is the schemas' release).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nova_api::names::NovaNames;

use super::db_jobs::{maintenance_labels, pod_template};
use super::paths::CONFIG_DIR;
use super::pod::PodInputs;
use crate::objects::Child;

/// The Job's component label and container name.
pub const COMPONENT: &str = "discover-hosts";
/// Retries come from the pool replacing the Job, not from the Job.
const BACKOFF_LIMIT: i32 = 0;
/// A discovery that hangs fails within five minutes.
const ACTIVE_DEADLINE_SECONDS: i64 = 300;
/// The last Job is removed once no pool looks at it.
const TTL_SECONDS_AFTER_FINISHED: i32 = 300;

/// The discovery Job of the Nova `inputs` describe, running `image` (the API Deployment's).
pub fn discover_hosts_job(inputs: &PodInputs<'_>, image: &str) -> Child {
    let command = [
        "nova-manage",
        "--config-dir",
        CONFIG_DIR,
        "cell_v2",
        "discover_hosts",
        "--verbose",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut template = pod_template(inputs, COMPONENT, command, Vec::new(), "Never");
    if let Some(container) = template
        .spec
        .as_mut()
        .and_then(|spec| spec.containers.first_mut())
    {
        container.image = Some(image.to_owned());
    }
    let labels: BTreeMap<String, String> = maintenance_labels(inputs.name, COMPONENT);
    Child::new(&Job {
        metadata: ObjectMeta {
            name: Some(NovaNames::new(inputs.name).discover_hosts()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(BACKOFF_LIMIT),
            active_deadline_seconds: Some(ACTIVE_DEADLINE_SECONDS),
            ttl_seconds_after_finished: Some(TTL_SECONDS_AFTER_FINISHED),
            template,
            ..Default::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::render::pod::Digests;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn the_job_runs_plain_discovery_with_the_api_image_and_the_whole_config() {
        let nova = example();
        let digests = Digests::default();
        let inputs = PodInputs {
            name: "nova",
            spec: &nova.spec,
            config_map: "nova-config-12345678",
            digests: &digests,
            installed_release: Some("2026.1"),
            broker_port: None,
        };
        let child = discover_hosts_job(&inputs, "ghcr.io/c5c3/nova:2025.2");
        assert_eq!(child.name, "nova-discover-hosts");
        let owner = crate::objects::Owner {
            kind: "Nova".into(),
            namespace: "openstack".into(),
            reference: None,
            labels: BTreeMap::new(),
        };
        let job = child.stamped(&owner).expect("stamps");
        let labels = json!({
            "app.kubernetes.io/component": "discover-hosts",
            "app.kubernetes.io/instance": "nova",
            "app.kubernetes.io/managed-by": "nova-operator",
            "app.kubernetes.io/name": "nova",
        });
        assert_eq!(job["metadata"]["labels"], labels);
        let spec = &job["spec"];
        assert_eq!(
            (
                &spec["backoffLimit"],
                &spec["activeDeadlineSeconds"],
                &spec["ttlSecondsAfterFinished"]
            ),
            (&json!(0), &json!(300), &json!(300))
        );
        assert_eq!(spec["template"]["metadata"]["labels"], labels);
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(pod["securityContext"]["fsGroup"], 42424);
        let container = &pod["containers"][0];
        assert_eq!(container["name"], "discover-hosts");
        assert_eq!(container["image"], "ghcr.io/c5c3/nova:2025.2");
        assert_eq!(
            container["command"],
            json!([
                "nova-manage",
                "--config-dir",
                "/etc/nova/nova.conf.d",
                "cell_v2",
                "discover_hosts",
                "--verbose"
            ])
        );
        assert_eq!(
            pod["volumes"][0],
            json!({ "name": "config", "configMap": { "name": "nova-config-12345678" } }),
            "the whole ConfigMap, as the migration Jobs mount it"
        );
        assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
        assert!(
            container["env"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e["name"] == "OS_API_DATABASE__CONNECTION"),
            "the nova-manage environment"
        );
    }
}
