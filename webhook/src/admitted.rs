//! One admission trait, implemented by each kind: how it is decoded, defaulted, what it needs
//! looked up, and how it is validated. The review code and the router are generic over it, so
//! this file is the only place that tells the two kinds apart.

use kube::Resource;
use nova_api::defaults::{Changes, default_nova_reporting, default_novacompute_reporting};
use nova_api::v1alpha1::{Nova, NovaCompute, NovaComputeSpec, NovaSpec};
use serde::de::DeserializeOwned;

use crate::lookups::{Lookups, Needs, NovaRef};
use crate::validation::{self, Operation, Outcome};

/// A kind the webhooks admit.
pub trait Admitted: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static {
    /// The kind's name.
    const KIND: &'static str;
    /// The defaulting webhook's path.
    const MUTATE_PATH: &'static str;
    /// The validating webhook's path.
    const VALIDATE_PATH: &'static str;

    /// The spec the defaulting webhook patches.
    type Spec: DeserializeOwned;

    /// Applies the kind's defaults, reporting each change.
    fn default_spec<C: Changes>(spec: &mut Self::Spec, changes: &mut C);

    /// What validating this admission needs asked of the API server.
    fn needs(&self, old: Option<&Self>, op: Operation) -> Needs;

    /// Validates the admission against the resolved lookups.
    fn validate(&self, old: Option<&Self>, op: Operation, lookups: &Lookups) -> Outcome;
}

impl Admitted for Nova {
    const KIND: &'static str = "Nova";
    const MUTATE_PATH: &'static str = "/mutate-nova-openstack-c5c3-io-v1alpha1-nova";
    const VALIDATE_PATH: &'static str = "/validate-nova-openstack-c5c3-io-v1alpha1-nova";
    type Spec = NovaSpec;

    fn default_spec<C: Changes>(spec: &mut NovaSpec, changes: &mut C) {
        default_nova_reporting(spec, changes);
    }

    fn needs(&self, old: Option<&Self>, op: Operation) -> Needs {
        Needs {
            priority_classes: validation::nova::priority_class_names(&self.spec),
            nova: None,
            novas: validation::nova::needs_claim_check(self, old, op),
        }
    }

    fn validate(&self, old: Option<&Self>, op: Operation, lookups: &Lookups) -> Outcome {
        validation::nova::validate(self, old, op, lookups)
    }
}

impl Admitted for NovaCompute {
    const KIND: &'static str = "NovaCompute";
    const MUTATE_PATH: &'static str = "/mutate-nova-openstack-c5c3-io-v1alpha1-novacompute";
    const VALIDATE_PATH: &'static str = "/validate-nova-openstack-c5c3-io-v1alpha1-novacompute";
    type Spec = NovaComputeSpec;

    fn default_spec<C: Changes>(spec: &mut NovaComputeSpec, changes: &mut C) {
        default_novacompute_reporting(spec, changes);
    }

    fn needs(&self, old: Option<&Self>, op: Operation) -> Needs {
        let nova = validation::novacompute::needs_nova(self, old, op).then(|| NovaRef {
            namespace: self.metadata.namespace.clone().unwrap_or_default(),
            name: self.spec.nova_ref.name.clone(),
        });
        Needs {
            priority_classes: Vec::new(),
            nova,
            novas: false,
        }
    }

    fn validate(&self, old: Option<&Self>, op: Operation, lookups: &Lookups) -> Outcome {
        validation::novacompute::validate(self, old, op, lookups.nova.as_ref())
    }
}
