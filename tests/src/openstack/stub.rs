//! The SIMULATED image and network services (`stub.py`): nova asks Glance for the image of
//! every server it creates and Neutron for the ports of every server it shows or deletes, even
//! on the fake driver, and neither runs here. One pod of the release's nova image in the
//! OpenStack namespace answers both, registered in the Keystone catalog as `image` and
//! `network`, so fake-driver servers booted with `"networks": "none"` can be created, listed
//! and deleted.

use serde_json::json;
use tokio::sync::OnceCell;

use super::{NAMESPACE, OpenStack, apply, service_url, wait_available};
use crate::images;
use crate::{Error, Result};

/// The stub's Deployment and Service.
pub const STUB: &str = "simulated-glance-neutron";
/// The ports of its Glance and its Neutron.
pub const GLANCE_PORT: u16 = 9292;
pub const NEUTRON_PORT: u16 = 9696;

impl OpenStack {
    /// Deploys the SIMULATED Glance and Neutron stub and adds it to the catalog, once per
    /// deployment. Call it before taking the tokens a test sends to nova: nova-api reads the
    /// catalog of a token when it validates it, and caches the validation.
    pub async fn image_network_stub(&self) -> Result<()> {
        static DEPLOYED: OnceCell<std::result::Result<(), String>> = OnceCell::const_new();
        DEPLOYED
            .get_or_init(|| async { self.deploy_stub().await.map_err(|e| e.to_string()) })
            .await
            .clone()
            .map_err(Error::SharedStartFailed)
    }

    async fn deploy_stub(&self) -> Result<()> {
        let client = self.client()?;
        let labels = json!({ "app.kubernetes.io/name": STUB, "app.kubernetes.io/part-of": "nova-test-openstack",
                             "nova.c5c3.io/simulated": "true" });
        let port =
            |name: &str, port: u16| json!({ "name": name, "port": port, "targetPort": port });
        let objects = [
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": STUB, "namespace": NAMESPACE, "labels": labels },
                "data": { "stub.py": include_str!("stub.py") }
            }),
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": STUB, "namespace": NAMESPACE, "labels": labels },
                "spec": {
                    "replicas": 1,
                    "selector": { "matchLabels": labels },
                    "template": { "metadata": { "labels": labels }, "spec": {
                        "terminationGracePeriodSeconds": 1,
                        "securityContext": { "runAsUser": 42424, "runAsGroup": 42424 },
                        "containers": [{
                            "name": "stub", "image": images::nova_image(self.release()),
                            "imagePullPolicy": "Never",
                            "command": ["python3", "/stub/stub.py"],
                            "env": [{ "name": "GLANCE_PORT", "value": GLANCE_PORT.to_string() },
                                    { "name": "NEUTRON_PORT", "value": NEUTRON_PORT.to_string() }],
                            "volumeMounts": [{ "name": "stub", "mountPath": "/stub", "readOnly": true }],
                            "readinessProbe": { "tcpSocket": { "port": NEUTRON_PORT }, "periodSeconds": 1 }
                        }],
                        "volumes": [{ "name": "stub", "configMap": { "name": STUB } }]
                    }}
                }
            }),
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": { "name": STUB, "namespace": NAMESPACE, "labels": labels },
                "spec": { "selector": labels,
                          "ports": [port("glance", GLANCE_PORT), port("neutron", NEUTRON_PORT)] }
            }),
        ];
        for object in &objects {
            apply(&client, object).await?;
        }
        wait_available(
            &client,
            NAMESPACE,
            STUB,
            std::time::Duration::from_secs(180),
        )
        .await?;
        self.register_endpoint("image", "simulated-glance", &service_url(STUB, GLANCE_PORT))
            .await?;
        self.register_endpoint(
            "network",
            "simulated-neutron",
            &service_url(STUB, NEUTRON_PORT),
        )
        .await
    }
}
