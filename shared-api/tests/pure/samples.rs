//! The samples under `examples/` deserialize into the types and serialize back without losing
//! or inventing a field; the values resolved at reconcile time read off the spec's Example.

use nova_api::effective;
use nova_api::v1alpha1::{Nova, NovaCompute, SecretStoreKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn sample(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(file);
    std::fs::read_to_string(path).expect("sample exists")
}

/// Parses the sample into `T` and back, returning (as written, round-tripped).
fn round_trip<T: DeserializeOwned + Serialize>(file: &str) -> (Value, Value, T) {
    let text = sample(file);
    let written: Value = serde_saphyr::from_str(&text).expect("valid YAML");
    let typed: T = serde_saphyr::from_str(&text).expect("deserializes into the type");
    let back = serde_json::to_value(&typed).expect("serializes");
    (written, back, typed)
}

#[test]
fn the_example_nova_round_trips_unchanged() {
    let (written, back, nova) = round_trip::<Nova>("nova.yaml");
    assert_eq!(back, written);
    assert_eq!(nova.spec.open_stack_release, "2026.1");
    assert_eq!(nova.spec.database.database, "nova");
    assert!(nova.spec.api.is_none(), "an absent block stays absent");
    assert!(
        nova.spec.api_database.replicas.is_none(),
        "schema defaults are not invented"
    );
}

#[test]
fn the_sample_novacompute_round_trips_unchanged() {
    let (written, back, pool) = round_trip::<NovaCompute>("novacompute.yaml");
    assert_eq!(back, written);
    assert_eq!(pool.spec.nova_ref.name, "nova");
    assert!(pool.spec.libvirt.is_none());
}

#[test]
fn a_full_status_round_trips_unchanged() {
    let status = serde_json::json!({
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "AllReady",
            "message": "All sub-conditions are ready",
            "lastTransitionTime": "2026-11-30T05:00:00Z", "observedGeneration": 2
        }],
        "observedGeneration": 2,
        "endpoint": "http://nova.openstack.svc.cluster.local:8774/",
        "installedRelease": "2026.1",
        "targetRelease": "2026.2",
        "upgradePhase": "Expanding",
        "cells": [{"name": "cell0", "uuid": "00000000-0000-0000-0000-000000000000"}],
        "computeConfigSecretRef": {"name": "nova-compute-config"},
        "remoteComputeConfigSecretRef": {"name": "nova-remote-compute-config"}
    });
    let typed: nova_api::v1alpha1::NovaStatus =
        serde_json::from_value(status.clone()).expect("parses");
    assert_eq!(serde_json::to_value(&typed).expect("serializes"), status);
}

#[test]
fn reconcile_time_values_of_the_example() {
    let (_, _, nova) = round_trip::<Nova>("nova.yaml");
    assert_eq!(
        effective::keystone_public_endpoint(&nova.spec),
        "http://keystone.openstack.svc.cluster.local:5000/v3"
    );
    assert_eq!(
        effective::secret_store(&nova.spec),
        (
            SecretStoreKind::ClusterSecretStore,
            "openbao-cluster-store".to_owned()
        )
    );
    assert_eq!(
        effective::db_archive(nova.spec.db_archive.as_ref()).schedule,
        "@daily"
    );
    let mut public = nova.spec.clone();
    public.keystone_public_endpoint = Some("https://keystone.example.com/v3".into());
    assert_eq!(
        effective::keystone_public_endpoint(&public),
        "https://keystone.example.com/v3"
    );
}
