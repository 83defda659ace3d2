//! The one tracing span per admission request. In its own test binary: tracing caches each
//! callsite's interest process-wide, and tests running beside this one on other threads would
//! race the scoped subscriber it installs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use nova_api::v1alpha1::Nova;
use nova_webhook::review::{Offline, Webhook, handle};
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};

type Seen = Arc<Mutex<Vec<(tracing::Level, BTreeMap<String, String>)>>>;

struct Capture(Seen);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: Context<'_, S>,
    ) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0
            .lock()
            .unwrap()
            .push((*attrs.metadata().level(), fields));
    }
}

fn review(object: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "nova.openstack.c5c3.io", "version": "v1alpha1", "kind": "Nova"},
            "name": "nova",
            "namespace": "openstack",
            "operation": "CREATE",
            "object": object,
        },
    }))
    .unwrap()
}

#[test]
fn one_span_per_request_at_info_for_a_denial_and_debug_for_an_admission() {
    let example: Value = nova_testkit::fixtures::example_nova_json();
    let mut bad = example.clone();
    bad["spec"]["region"] = json!("a\nb");
    bad["spec"]["image"]["digest"] = json!("sha256:x");

    let seen = Seen::default();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::DEBUG)
        .with(Capture(seen.clone()));
    tracing::subscriber::with_default(subscriber, || {
        futures::executor::block_on(async {
            handle(Webhook::validate::<Nova>(), &review(bad), &Offline).await;
            handle(Webhook::mutate::<Nova>(), &review(example), &Offline).await;
        })
    });
    let spans = seen.lock().unwrap().clone();

    let field = |s: &BTreeMap<String, String>, k: &str| s.get(k).cloned().unwrap_or_default();
    assert_eq!(spans.len(), 2, "{spans:?}");
    let (level, denial) = &spans[0];
    assert_eq!(*level, tracing::Level::INFO);
    for (k, v) in [
        ("uid", "705ab4f5-6393-11e8-b7cc-42010a800002"),
        ("kind", "Nova"),
        ("namespace", "openstack"),
        ("name", "nova"),
        ("operation", "CREATE"),
        ("verdict", "denied"),
        ("violations", "2"),
    ] {
        assert_eq!(field(denial, k), v, "{k}: {denial:?}");
    }
    let (level, admission) = &spans[1];
    assert_eq!(*level, tracing::Level::DEBUG);
    assert_eq!(field(admission, "verdict"), "patched");
    assert_eq!(field(admission, "violations"), "0");
    assert!(
        !format!("{spans:?}").contains("a\\nb"),
        "no field value in a span"
    );
}
