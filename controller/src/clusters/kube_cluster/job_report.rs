//! A Job's report: the termination message its pod wrote, read once per Job.

use k8s_openapi::api::core::v1::Pod;

use crate::objects::controller_of;

/// The label the Job controller puts on every pod of a Job.
pub(super) const JOB_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";

/// The termination message of the pod `pods` holds for the Job `job_uid`: the succeeded one,
/// else the newest; only pods that Job controls count.
pub fn report_of(pods: &[Pod], job_uid: &str) -> Option<String> {
    let ours: Vec<&Pod> = pods
        .iter()
        .filter(|p| controller_of(&p.metadata).is_some_and(|c| c.uid == job_uid))
        .collect();
    let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
    let pod = ours
        .iter()
        .find(|p| phase(p).as_deref() == Some("Succeeded"))
        .or_else(|| {
            ours.iter()
                .max_by_key(|p| p.metadata.creation_timestamp.clone())
        })?;
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.terminated.as_ref()?.message.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_read_off_the_succeeded_pod_of_that_job() {
        let pod = |job: &str, phase: &str, created: i64, message: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {
                    "creationTimestamp": format!("2026-01-01T00:00:{created:02}Z"),
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "nova-db-sync",
                                         "uid": job, "controller": true}],
                },
                "status": {"phase": phase, "containerStatuses": [{
                    "name": "db-sync", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "message": message}}}]},
            }))
            .expect("pod")
        };
        let pods = [
            pod("old", "Succeeded", 1, "stale"),
            pod("job", "Failed", 2, "attempt 1"),
            pod("job", "Succeeded", 3, "cell0=x"),
            pod("job", "Failed", 4, "attempt 3"),
        ];
        assert_eq!(report_of(&pods, "job").as_deref(), Some("cell0=x"));
        assert_eq!(
            report_of(&pods[..2], "job").as_deref(),
            Some("attempt 1"),
            "no succeeded pod: the newest of that Job"
        );
        assert_eq!(report_of(&pods, "gone"), None);
    }
}
