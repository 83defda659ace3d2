//! The EndpointWarnings step (issue 33 part 4, beyond the spec): an endpoint override in
//! `spec.endpoints` is where nova sends its service user's token requests and calls, so one that
//! leaves the cluster's Service domain, or speaks plain `http`, is worth a Warning event. It is
//! informational (no condition, never blocks Ready) and published once per spec change: only
//! on the first pass over a generation the status has not observed yet, so the steady state
//! stays quiet. Messages name the field and the finding, never the URL or a credential.

use nova_api::events::EventReason;
use nova_api::v1alpha1::{Nova, NovaEndpointsSpec};

use crate::nova::resolved::Resolved;
use crate::nova::{NovaPass, NovaPlan};
use crate::pipeline::{Plan, StepError, StepFuture, observe_then_plan};

/// The cluster domain Service names end in; the operator assumes the Kubernetes default
/// everywhere it recognizes a Service URL (`service_proxy.rs`).
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// The EndpointWarnings step: nothing to observe.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, |_| async { Ok::<(), StepError>(()) }, plan)
}

/// One Warning event per override that leaves the Service domain or uses plain http, on the
/// first pass over a new generation.
pub fn plan(nova: &Nova, _: &(), _: &Resolved) -> NovaPlan {
    let observed = nova.status.as_ref().and_then(|s| s.observed_generation);
    if observed.is_some() && observed == nova.metadata.generation {
        return Plan::proceed();
    }
    let Some(endpoints) = &nova.spec.endpoints else {
        return Plan::proceed();
    };
    findings(endpoints)
        .into_iter()
        .fold(Plan::proceed(), |plan, finding| {
            plan.event(EventReason::UnsafeEndpointOverride, finding)
        })
}

/// The overrides in effect, by field path.
fn overrides(endpoints: &NovaEndpointsSpec) -> Vec<(&'static str, &str)> {
    let mandatory = [
        ("spec.endpoints.placement.override", &endpoints.placement),
        ("spec.endpoints.neutron.override", &endpoints.neutron),
        ("spec.endpoints.glance.override", &endpoints.glance),
    ]
    .into_iter()
    .filter_map(|(field, block)| Some((field, block.as_ref()?.override_url.as_deref()?)));
    let optional = [
        ("spec.endpoints.cinder.override", &endpoints.cinder),
        ("spec.endpoints.barbican.override", &endpoints.barbican),
    ]
    .into_iter()
    .filter_map(|(field, block)| {
        let block = block.as_ref().filter(|b| b.enabled.unwrap_or(false))?;
        Some((field, block.override_url.as_deref()?))
    });
    mandatory.chain(optional).collect()
}

/// What is worth a warning about each override, one message per field.
pub fn findings(endpoints: &NovaEndpointsSpec) -> Vec<String> {
    overrides(endpoints)
        .into_iter()
        .filter_map(|(field, url)| {
            let parsed = url::Url::parse(url).ok();
            let host = parsed
                .as_ref()
                .and_then(|u| u.host_str())
                .unwrap_or_default();
            let outside = !in_cluster(host);
            let plain = parsed.as_ref().is_some_and(|u| u.scheme() == "http");
            let problem = match (outside, plain) {
                (true, true) => "points outside the cluster's Service domain over plain http",
                (true, false) => "points outside the cluster's Service domain",
                (false, true) => "uses plain http",
                (false, false) => return None,
            };
            Some(format!(
                "{field} {problem}: nova sends the service user's token and requests there{}",
                if plain { " unencrypted" } else { "" }
            ))
        })
        .collect()
}

/// Whether `host` is a Service name: `<name>.<namespace>.svc` or that under the cluster domain.
fn in_cluster(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    let host = host.trim_end_matches('.');
    let service = host
        .strip_suffix(CLUSTER_DOMAIN)
        .and_then(|h| h.strip_suffix('.'))
        .unwrap_or(host);
    service.ends_with(".svc") && service.split('.').count() >= 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use nova_api::v1alpha1::{EndpointOverrideSpec, NovaStatus, OptionalEndpointSpec};

    fn at(url: &str) -> Option<EndpointOverrideSpec> {
        Some(EndpointOverrideSpec {
            override_url: Some(url.into()),
        })
    }

    #[test]
    fn overrides_outside_the_service_domain_or_over_http_are_named_by_field_never_by_url() {
        let endpoints = NovaEndpointsSpec {
            placement: at("https://placement.openstack.svc:8778/"),
            neutron: at("https://neutron.openstack.svc.cluster.local:9696"),
            glance: at("https://user:secret@images.example.com/"),
            cinder: Some(OptionalEndpointSpec {
                enabled: Some(true),
                override_url: Some("http://cinder.openstack.svc:8776/v3/%(project_id)s".into()),
            }),
            barbican: Some(OptionalEndpointSpec {
                enabled: Some(false),
                override_url: Some("http://elsewhere.example.com".into()),
            }),
        };
        assert_eq!(
            findings(&endpoints),
            [
                "spec.endpoints.glance.override points outside the cluster's Service domain: nova sends the service user's token and requests there",
                "spec.endpoints.cinder.override uses plain http: nova sends the service user's token and requests there unencrypted",
            ]
        );
        assert!(!findings(&endpoints).concat().contains("secret"));
        assert!(!in_cluster("svc"));
        assert!(!in_cluster("evil.svc.example.com"));
        assert!(in_cluster("nova.openstack.svc.cluster.local."));
    }

    #[test]
    fn the_warning_is_published_on_a_new_generation_only() {
        let mut nova = example();
        nova.spec.endpoints = Some(NovaEndpointsSpec {
            glance: at("http://images.example.com/"),
            ..Default::default()
        });
        nova.metadata.generation = Some(2);
        nova.status = Some(NovaStatus {
            observed_generation: Some(1),
            ..Default::default()
        });
        let changed = plan(&nova, &(), &Resolved::default());
        assert_eq!(changed.events.len(), 1);
        assert!(changed.events[0].reason.warning());
        assert_eq!(
            changed.events[0].reason,
            EventReason::UnsafeEndpointOverride
        );
        assert_eq!(
            changed.events[0].note,
            "spec.endpoints.glance.override points outside the cluster's Service domain over plain http: nova sends the service user's token and requests there unencrypted"
        );
        assert!(changed.verdicts.is_empty(), "never a condition");
        nova.status.as_mut().unwrap().observed_generation = Some(2);
        assert!(plan(&nova, &(), &Resolved::default()).events.is_empty());
    }
}
