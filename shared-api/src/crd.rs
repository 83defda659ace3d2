//! The generated CustomResourceDefinitions, as committed under `crds/` and in the chart.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use crate::v1alpha1::{Nova, NovaCompute};

/// The directories the CRDs are committed in, relative to the repository root: the
/// repository's own and the Helm chart's, which installs them from its `crds/`. `crdgen` writes
/// both, so neither is ever copied by hand.
pub const DIRS: [&str; 2] = ["crds", "charts/nova-operator/crds"];

/// Every CRD with the file name it is committed under.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("nova.openstack.c5c3.io_novas.yaml", finish(Nova::crd())),
        (
            "nova.openstack.c5c3.io_novacomputes.yaml",
            finish(NovaCompute::crd()),
        ),
    ]
}

/// Renders one CRD as the YAML document written to disk.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::ser_error::Error> {
    serde_saphyr::to_string(crd)
}

/// Drops the `nullable: true` schemars adds to every `Option`: without it the API server prunes
/// an explicit `null` before defaulting and validation, so `field: null` reads exactly like an
/// absent field in every CEL `has()` and in the stored object, as it does for Go-generated CRDs.
fn finish(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut value = serde_json::to_value(&crd).expect("a CRD always serializes");
    strip_nullable(&mut value);
    serde_json::from_value(value).expect("stripping nullable keeps a valid CRD")
}

fn strip_nullable(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("nullable");
            map.values_mut().for_each(strip_nullable);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}
