//! The chart's admission webhooks down. With `failurePolicy: Fail` the API server refuses every
//! write they are called for, but their `matchConditions` (`templates/admission.yaml`) call
//! them only for a CREATE or an UPDATE that may change the spec: an update of metadata alone
//! (labels, annotations, a finalizer's removal) skips them, so a CR can still be finalized and
//! its namespace torn down while the webhook is down.
//!
//! The configurations are the chart's own rendering in its namespace scope, so every webhook
//! admits only this test's namespace and the other tests sharing the control plane never meet
//! it; only their name and their client configuration (a loopback port nothing listens on)
//! are changed here.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use nova_test_harness::local_webhook::{example_named, nova_resource};
use nova_test_harness::{
    Canary, CanaryExpectation, helm, shared, unregister_webhooks, wait_for_webhook,
};
use nova_testkit::fixtures::{EXAMPLE_NOVA_YAML, EXAMPLE_POOL_YAML, TIMEOUT, unreachable_port};
use nova_testkit::wait::Wait;
use serde_json::{Value, json};

use crate::chart::{documents, find, home};

/// The name of each held CR.
const NAME: &str = "held";
/// The finalizer each CR is held by, as the controller holds it.
const HOLD: &str = "test.nova.c5c3.io/hold";
/// The label and annotation the metadata-only updates set.
const TOUCHED: &str = "test.nova.c5c3.io/touched";
/// How long the namespace controller may take to tear the namespace down: it retries a
/// namespace whose content is held by a finalizer on a backoff.
const TEARDOWN: Duration = Duration::from_secs(120);

/// One admitted kind, as this test drives it.
struct Held {
    resource: ApiResource,
    api: Api<DynamicObject>,
    /// Its example manifest.
    yaml: &'static str,
    /// A merge patch that changes the spec and that the schema admits, so only a webhook can
    /// refuse it.
    spec_change: Value,
}

impl Held {
    fn new(
        client: &Client,
        ns: &str,
        (kind, plural): (&str, &str),
        yaml: &'static str,
        spec_change: Value,
    ) -> Self {
        let resource = nova_resource(kind, plural);
        Held {
            api: Api::namespaced_with(client.clone(), ns, &resource),
            resource,
            yaml,
            spec_change,
        }
    }

    /// `name` built from the example manifest in `ns`.
    fn example(&self, name: &str, ns: &str) -> Value {
        example_named(self.yaml, name, ns).expect("the example manifest")
    }

    /// Patches the held CR's metadata only, which must skip the webhooks.
    async fn patch_metadata(&self, metadata: Value, what: &str) -> DynamicObject {
        self.api
            .patch(
                NAME,
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": metadata })),
            )
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{what} of the {} {NAME} changes metadata only and must skip the webhooks that are down: {e}",
                    self.resource.kind
                )
            })
    }

    /// Changes the held CR's spec, which the API server must refuse, naming the webhook it
    /// called: `failed calling webhook "<name>"`.
    async fn refused_spec_change(&self, webhook: &str, when: &str) {
        let what = format!("a spec change of the {} {NAME} {when}", self.resource.kind);
        let answer = self
            .api
            .patch(
                NAME,
                &PatchParams::default(),
                &Patch::Merge(&self.spec_change),
            )
            .await;
        let message = match answer {
            Err(kube::Error::Api(status)) => status.message,
            Err(e) => panic!("{what}: expected the API server's refusal, got {e}"),
            Ok(object) => panic!(
                "{what} was admitted with the webhook {webhook} down: {}",
                serde_json::to_string(&object.data).unwrap_or_default()
            ),
        };
        assert!(
            message.contains(&format!("failed calling webhook \"{webhook}\"")),
            "{what}: the refusal names the webhook {webhook}: {message}"
        );
    }
}

/// The chart's webhook configuration `config`, named `name`, each webhook sent to `port` on
/// loopback (by URL: the API server reaches no Service of this control plane) at its path.
/// Everything else stays as rendered: rules, conditions, scope, failure policy, timeout.
fn pointed_at(config: &Value, name: &str, port: u16) -> Value {
    let mut config = config.clone();
    config["metadata"]["name"] = json!(name);
    for hook in config["webhooks"].as_array_mut().expect("webhooks") {
        let client = &hook["clientConfig"];
        let path = client["service"]["path"]
            .as_str()
            .expect("the webhook's path");
        hook["clientConfig"] = json!({
            "url": format!("https://127.0.0.1:{port}{path}"),
            "caBundle": client["caBundle"],
        });
    }
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_webhook_down_spec_changes_are_refused_and_finalizers_still_come_off() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("webhook-down").await.expect("namespace");
    let held = [
        Held::new(
            &client,
            &ns,
            ("Nova", "novas"),
            EXAMPLE_NOVA_YAML,
            json!({"spec": {"keystoneEndpoint": "http://keystone.elsewhere:5000/v3"}}),
        ),
        Held::new(
            &client,
            &ns,
            ("NovaCompute", "novacomputes"),
            EXAMPLE_POOL_YAML,
            json!({"spec": {"nodeSelector": {"openstack.c5c3.io/nova-compute-pool": "b"}}}),
        ),
    ];
    // Both CRs exist, each held by a finalizer, before any webhook is registered.
    for h in &held {
        let mut object = h.example(NAME, &ns);
        object["metadata"]["finalizers"] = json!([HOLD]);
        h.api
            .create(
                &PostParams::default(),
                &serde_json::from_value(object).expect("object"),
            )
            .await
            .unwrap_or_else(|e| panic!("creating the {} {NAME}: {e}", h.resource.kind));
    }

    let docs = documents(
        &helm::template(home().path(), &ns, &["--set", "rbac.scope=namespace"])
            .expect("helm template"),
    );
    let (_down, port) = unreachable_port();
    let name = format!("down-{ns}");
    // The webhook the API server calls first for each plural: after the second round, its
    // defaulting one.
    let mut first_called = BTreeMap::new();
    // The validating configuration first, then the mutating one beside it: each round's spec
    // change is refused by the webhook just registered (the defaulting runs first).
    for kind in ["Validating", "Mutating"] {
        let gvk = GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            &format!("{kind}WebhookConfiguration"),
        );
        let config = pointed_at(find(&docs, &gvk.kind, "nova-operator"), &name, port);
        let hooks = config["webhooks"].as_array().expect("webhooks");
        assert_eq!(hooks.len(), 2, "{kind}: one webhook per kind: {config}");
        for hook in hooks {
            assert_eq!(
                hook["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"], ns,
                "{kind}: every webhook is scoped to this test's namespace, or it would refuse the other tests' writes: {hook}"
            );
        }
        Api::<DynamicObject>::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
            .create(
                &PostParams::default(),
                &serde_json::from_value(config.clone()).expect("configuration"),
            )
            .await
            .unwrap_or_else(|e| panic!("registering the chart's {} {name}: {e}", gvk.kind));

        for hook in hooks {
            let webhook = hook["name"].as_str().expect("name");
            let plural = hook["rules"][0]["resources"][0].as_str().expect("resource");
            let h = held
                .iter()
                .find(|h| h.resource.plural == plural)
                .unwrap_or_else(|| panic!("{webhook} admits {plural}, which no held CR is"));
            // Registration is asynchronous inside the API server: a CREATE, which always
            // meets the webhook, shows when it is called.
            wait_for_webhook(
                &client,
                &Canary {
                    resource: h.resource.clone(),
                    namespace: Some(ns.clone()),
                    object: h.example("canary", &ns),
                    expect: CanaryExpectation::DeniedWith(format!(
                        "failed calling webhook \"{webhook}\""
                    )),
                },
                TIMEOUT,
            )
            .await
            .unwrap_or_else(|e| panic!("the API server calls {webhook}: {e}"));
            h.refused_spec_change(webhook, "with the webhook down")
                .await;
            h.patch_metadata(
                json!({"labels": {TOUCHED: kind}, "annotations": {TOUCHED: kind}}),
                "a label and an annotation",
            )
            .await;
            first_called.insert(plural.to_owned(), webhook.to_owned());
        }
    }

    let [nova, pool] = &held;
    // The Nova deleted: its finalizer holds it until a metadata-only update removes it.
    let deleting = nova
        .api
        .delete(NAME, &DeleteParams::default())
        .await
        .expect("deleting the Nova");
    assert!(
        deleting
            .left()
            .is_some_and(|o| o.metadata.deletion_timestamp.is_some()),
        "the finalizer holds the deleted Nova"
    );
    nova.patch_metadata(json!({"finalizers": null}), "the finalizer's removal")
        .await;
    Wait::new(format!("the Nova {ns}/{NAME} gone"), TIMEOUT)
        .for_deletion(&nova.api, NAME)
        .await
        .expect("the finalized Nova is gone");

    // The namespace deleted with the pool in it: the namespace controller deletes the pool,
    // a spec change to it is still refused, and the finalizer's removal completes the teardown.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .expect("deleting the namespace");
    Wait::new(
        format!("the namespace controller deleting the NovaCompute {ns}/{NAME}"),
        TIMEOUT,
    )
    .for_object(&pool.api, NAME, |o| o.metadata.deletion_timestamp.is_some())
    .await
    .expect("the pool is being deleted");
    pool.refused_spec_change(
        &first_called[pool.resource.plural.as_str()],
        "while it is being deleted",
    )
    .await;
    let released = pool
        .patch_metadata(json!({"finalizers": null}), "the finalizer's removal")
        .await;
    assert!(
        released.finalizers().is_empty(),
        "the update removed the finalizer: {:?}",
        released.finalizers()
    );
    Wait::new(format!("the namespace {ns} torn down"), TEARDOWN)
        .for_deletion(&namespaces, &ns)
        .await
        .expect("the namespace is gone");

    unregister_webhooks(&client, &name)
        .await
        .expect("removing the webhook configurations");
}
