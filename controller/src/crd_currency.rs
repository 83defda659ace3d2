//! The served CRDs against the schemas this binary was built with (`nova_api::crd`).
//!
//! A CRD that lags behind its controller (a chart upgrade with `crds.enabled=false` and no
//! manual apply, a GitOps tool that never syncs CRDs) makes the API server drop every field the
//! new release added, silently. So at start the controller reads the schema digest each served
//! CRD carries (`nova.openstack.c5c3.io/schema-hash`, stamped by `crdgen`) and, for one that
//! differs, says so loudly while it goes on reconciling: an error log line, the gauge
//! `nova_operator_crd_schema_current{crd}` at 0 (the alert `NovaOperatorCRDOutdated`), and a
//! Warning `CRDSchemaOutdated` once on every CR of that kind.
//!
//! Reading a CRD takes `get` on `customresourcedefinitions` (the chart grants it for the two
//! CRDs by name, in both scopes); where it is not granted the currency is unknown, logged
//! once, and the gauge is not set.

use std::collections::HashSet;
use std::sync::Mutex;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::{Client, Resource};

use crate::metrics::Metrics;
use crate::objects::EventNote;
use nova_api::events::EventReason;

/// What a served CRD's digest says against the compiled one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Currency {
    /// The served CRD is the one this binary was built with.
    Current,
    /// It carries another digest, or none (applied by hand from another release).
    Outdated {
        /// The digest it carries.
        served: Option<String>,
    },
    /// It could not be read (forbidden under a namespace-scoped install, or an error).
    Unknown(String),
}

/// Judges a served digest against the compiled one.
pub fn judge(served: Option<&str>, compiled: &str) -> Currency {
    match served {
        Some(served) if served == compiled => Currency::Current,
        served => Currency::Outdated {
            served: served.map(str::to_owned),
        },
    }
}

/// One CRD's check: its name (`<plural>.<group>`) and currency.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The CRD's name.
    pub crd: String,
    /// What its digest says.
    pub currency: Currency,
}

/// Reads every CRD this binary serves (one metadata GET each, through `client` and its
/// timeout) and judges it.
pub async fn check(client: &Client) -> Vec<Checked> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut checked = Vec::new();
    for (crd, compiled) in nova_api::crd::compiled_hashes() {
        let currency = match api.get_metadata(&crd).await {
            Ok(meta) => judge(
                meta.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(nova_api::crd::SCHEMA_HASH_ANNOTATION))
                    .map(String::as_str),
                &compiled,
            ),
            Err(e) => Currency::Unknown(e.to_string()),
        };
        checked.push(Checked { crd, currency });
    }
    checked
}

/// Logs each check and sets its gauge; the outdated ones as errors, naming the fix.
pub fn report(metrics: &Metrics, checked: &[Checked]) {
    for Checked { crd, currency } in checked {
        match currency {
            Currency::Current => {
                metrics.crd_schema_current.with_label_values(&[crd]).set(1);
                tracing::info!(%crd, "the served CRD matches this release");
            }
            Currency::Outdated { served } => {
                metrics.crd_schema_current.with_label_values(&[crd]).set(0);
                tracing::error!(
                    %crd,
                    served = served.as_deref().unwrap_or("none"),
                    "{}",
                    outdated_note(crd)
                );
            }
            Currency::Unknown(error) => tracing::info!(
                %crd,
                %error,
                "the served CRD could not be read, so its schema is not checked against this release"
            ),
        }
    }
}

/// What an outdated CRD's log line and events say.
fn outdated_note(crd: &str) -> String {
    format!(
        "the served CRD {crd} is not the one this controller release was built with (its \
         {} differs): fields this release added are dropped by the API server until it is \
         updated; apply the release's crds/ (kubectl apply --server-side -f crds/) or upgrade \
         the chart with crds.enabled=true",
        nova_api::crd::SCHEMA_HASH_ANNOTATION
    )
}

/// What one kind's controller does about its CRD's currency: a Warning on each CR, once.
#[derive(Debug, Default)]
pub struct Notice {
    /// The event note, when the kind's CRD is outdated.
    note: Option<String>,
    /// The UIDs of the CRs warned already.
    warned: Mutex<HashSet<String>>,
}

impl Notice {
    /// The notice of kind `K`, from the checks.
    pub fn of<K: Resource<DynamicType = ()>>(checked: &[Checked]) -> Self {
        let name = format!("{}.{}", K::plural(&()), K::group(&()));
        let note = checked
            .iter()
            .find(|c| c.crd == name && matches!(c.currency, Currency::Outdated { .. }))
            .map(|c| outdated_note(&c.crd));
        Self {
            note,
            warned: Mutex::default(),
        }
    }

    /// The Warning for the CR with `uid`, the first time it is asked for.
    pub fn once(&self, uid: Option<&str>) -> Option<EventNote> {
        let note = self.note.as_ref()?;
        let uid = uid?;
        let first = self
            .warned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(uid.to_owned());
        first.then(|| EventNote {
            reason: EventReason::CRDSchemaOutdated,
            note: note.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nova_api::v1alpha1::{Nova, NovaCompute};

    #[test]
    fn a_digest_is_current_only_when_it_is_the_compiled_one() {
        assert_eq!(judge(Some("abc"), "abc"), Currency::Current);
        assert_eq!(
            judge(Some("abd"), "abc"),
            Currency::Outdated {
                served: Some("abd".into())
            }
        );
        assert_eq!(judge(None, "abc"), Currency::Outdated { served: None });
    }

    #[test]
    fn every_crd_this_binary_serves_has_a_compiled_digest() {
        let hashes = nova_api::crd::compiled_hashes();
        let names: Vec<&str> = hashes.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "novas.nova.openstack.c5c3.io",
                "novacomputes.nova.openstack.c5c3.io"
            ]
        );
        assert!(hashes.iter().all(|(_, h)| h.len() == 64), "{hashes:?}");
    }

    fn checked(nova: Currency) -> Vec<Checked> {
        vec![
            Checked {
                crd: "novas.nova.openstack.c5c3.io".into(),
                currency: nova,
            },
            Checked {
                crd: "novacomputes.nova.openstack.c5c3.io".into(),
                currency: Currency::Current,
            },
        ]
    }

    #[test]
    fn an_outdated_crd_warns_each_cr_of_its_kind_once() {
        let checks = checked(Currency::Outdated { served: None });
        let novas = Notice::of::<Nova>(&checks);
        let first = novas.once(Some("uid-1")).expect("a warning");
        assert!(first.reason.warning());
        assert_eq!(first.reason, EventReason::CRDSchemaOutdated);
        assert!(
            first.note.contains("novas.nova.openstack.c5c3.io"),
            "{}",
            first.note
        );
        assert!(novas.once(Some("uid-1")).is_none(), "once per CR");
        assert!(novas.once(Some("uid-2")).is_some(), "every CR");
        assert!(
            Notice::of::<NovaCompute>(&checks)
                .once(Some("uid-1"))
                .is_none()
        );
    }

    #[test]
    fn a_current_or_unreadable_crd_warns_no_cr() {
        for currency in [Currency::Current, Currency::Unknown("forbidden".into())] {
            assert!(
                Notice::of::<Nova>(&checked(currency))
                    .once(Some("u"))
                    .is_none()
            );
        }
    }
}
