//! Default + validate of the spec's Example Nova, as pure functions and as whole reviews.
//!
//! `cargo bench -p nova-webhook --bench admission`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use nova_api::defaults::default_nova;
use nova_api::v1alpha1::Nova;
use nova_webhook::lookups::Lookups;
use nova_webhook::review::{self, Offline, Webhook};
use nova_webhook::validation::{Operation, nova};

const EXAMPLE_NOVA: &str = include_str!("../../examples/nova.yaml");

fn body(object: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench",
            "kind": {"group": "nova.openstack.c5c3.io", "version": "v1alpha1", "kind": "Nova"},
            "operation": "CREATE",
            "name": "nova",
            "namespace": "openstack",
            "object": object,
        },
    }))
    .expect("body")
}

fn bench(c: &mut Criterion) {
    nova_webhook::catalog::init().expect("catalogs");
    let example: Nova = serde_saphyr::from_str(EXAMPLE_NOVA).expect("example");
    let mut defaulted = example.clone();
    default_nova(&mut defaulted.spec);
    let mut with_extra = defaulted.clone();
    with_extra.spec.extra_config = Some(
        [(
            "filter_scheduler".to_owned(),
            [(
                "build_failure_weight_multiplier".to_owned(),
                "1000000.0".to_owned(),
            )]
            .into(),
        )]
        .into(),
    );

    c.bench_function("default+validate Example Nova (typed)", |b| {
        b.iter(|| {
            let mut n = black_box(&example).clone();
            default_nova(&mut n.spec);
            black_box(nova::validate(
                &n,
                None,
                Operation::Create,
                &Lookups::default(),
            ))
        })
    });
    c.bench_function(
        "validate defaulted Example Nova with extraConfig (typed)",
        |b| {
            b.iter(|| {
                black_box(nova::validate(
                    black_box(&with_extra),
                    None,
                    Operation::Create,
                    &Lookups::default(),
                ))
            })
        },
    );
    let raw = body(&serde_json::to_value(&example).expect("json"));
    let raw_defaulted = body(&serde_json::to_value(&defaulted).expect("json"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    c.bench_function("mutate review, Example Nova (bytes in, bytes out)", |b| {
        b.iter(|| {
            black_box(rt.block_on(review::handle(
                Webhook::mutate::<Nova>(),
                black_box(&raw),
                &Offline,
            )))
        })
    });
    c.bench_function(
        "validate review, defaulted Example Nova (bytes in, bytes out)",
        |b| {
            b.iter(|| {
                black_box(rt.block_on(review::handle(
                    Webhook::validate::<Nova>(),
                    black_box(&raw_defaulted),
                    &Offline,
                )))
            })
        },
    );
}

criterion_group!(benches, bench);

fn parts(c: &mut Criterion) {
    let example: Nova = serde_saphyr::from_str(EXAMPLE_NOVA).expect("example");
    let mut defaulted = example.clone();
    default_nova(&mut defaulted.spec);
    let raw = body(&serde_json::to_value(&defaulted).expect("json"));
    c.bench_function("parts: bytes -> review", |b| {
        b.iter(|| black_box(review::parse(black_box(&raw))))
    });
    let parsed = review::parse(&raw).expect("review");
    let object: serde_json::Value =
        serde_json::from_str(parsed.request.object.as_ref().expect("object").get()).expect("json");
    c.bench_function("parts: value -> Nova", |b| {
        b.iter(|| black_box(serde_json::from_value::<Nova>(black_box(object.clone()))))
    });
    c.bench_function("parts: bytes -> Nova direct", |b| {
        let s = serde_json::to_vec(&object).expect("bytes");
        b.iter(|| black_box(serde_json::from_slice::<Nova>(black_box(&s))))
    });
}

/// The wire types: the hand-written review with the object kept raw and decoded once, against
/// kube's `AdmissionReview<DynamicObject>` (object as a `serde_json::Value`, then decoded
/// again) and kube's typed `AdmissionReview<Nova>`.
fn wire(c: &mut Criterion) {
    use kube::core::DynamicObject;
    use kube::core::admission::{AdmissionRequest, AdmissionReview};

    let example: Nova = serde_saphyr::from_str(EXAMPLE_NOVA).expect("example");
    let mut defaulted = example.clone();
    default_nova(&mut defaulted.spec);
    let mut object = serde_json::to_value(&defaulted).expect("json");
    object["apiVersion"] = "nova.openstack.c5c3.io/v1alpha1".into();
    object["kind"] = "Nova".into();
    let mut review: serde_json::Value = serde_json::from_slice(&body(&object)).expect("review");
    // kube's request type requires the fields the API server always sends.
    review["request"]["resource"] = serde_json::json!({"group": "nova.openstack.c5c3.io", "version": "v1alpha1", "resource": "novas"});
    review["request"]["userInfo"] = serde_json::json!({"username": "admin"});
    let raw = serde_json::to_vec(&review).expect("bytes");
    c.bench_function("wire: hand-written review, raw object decoded once", |b| {
        b.iter(|| {
            let r = review::parse(black_box(&raw)).expect("review");
            let obj = r.request.object.expect("object");
            black_box(serde_json::from_str::<Nova>(obj.get()).expect("nova"))
        })
    });
    c.bench_function(
        "wire: kube AdmissionReview<DynamicObject> then typed",
        |b| {
            b.iter(|| {
                let r: AdmissionReview<DynamicObject> =
                    serde_json::from_slice(black_box(&raw)).expect("review");
                let req: AdmissionRequest<DynamicObject> = r.try_into().expect("request");
                black_box(
                    req.object
                        .expect("object")
                        .try_parse::<Nova>()
                        .expect("nova"),
                )
            })
        },
    );
    c.bench_function("wire: kube AdmissionReview<Nova>", |b| {
        b.iter(|| {
            let r: AdmissionReview<Nova> = serde_json::from_slice(black_box(&raw)).expect("review");
            let req: AdmissionRequest<Nova> = r.try_into().expect("request");
            black_box(req.object.expect("object"))
        })
    });
}

criterion_group!(parts_group, parts, wire);
criterion_main!(benches, parts_group);
