//! Review-level tests: decoding, robustness, the defaulting patch and the full 422 response.

use base64::Engine as _;
use nova_api::v1alpha1::{Nova, NovaCompute};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::lookups::{Lookups, Needs, NovaList, PriorityClassLookup};
use crate::validation::testing;

fn review(kind: &str, operation: &str, object: Option<Value>, old: Option<Value>) -> Vec<u8> {
    let mut request = json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "nova.openstack.c5c3.io", "version": "v1alpha1", "kind": kind},
        "resource": {"group": "nova.openstack.c5c3.io", "version": "v1alpha1", "resource": "novas"},
        "name": "nova",
        "namespace": "openstack",
        "operation": operation,
        "userInfo": {"username": "admin"},
    });
    if let Some(o) = object {
        request["object"] = o;
    }
    if let Some(o) = old {
        request["oldObject"] = o;
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})).unwrap()
}

fn example_json() -> Value {
    serde_json::to_value(testing::example_nova()).unwrap()
}

fn run(webhook: Webhook, body: &[u8]) -> Handled {
    futures::executor::block_on(handle(webhook, body, &Offline))
}

fn response_json(h: &Handled) -> Value {
    let v: Value = serde_json::from_slice(&h.body).unwrap();
    v["response"].clone()
}

#[test]
fn the_paths_are_exact() {
    let paths: Vec<&str> = Webhook::ALL.iter().map(|w| w.path).collect();
    assert_eq!(
        paths,
        vec![
            "/mutate-nova-openstack-c5c3-io-v1alpha1-nova",
            "/validate-nova-openstack-c5c3-io-v1alpha1-nova",
            "/mutate-nova-openstack-c5c3-io-v1alpha1-novacompute",
            "/validate-nova-openstack-c5c3-io-v1alpha1-novacompute",
        ]
    );
}

#[test]
fn malformed_requests_never_panic() {
    for webhook in Webhook::ALL {
        for body in [
            &b"not json"[..],
            b"",
            b"{}",
            b"[]",
            b"{\"request\": 3}",
            b"{\"request\": {}}",
            b"\xff\xfe",
        ] {
            let h = run(webhook, body);
            assert_eq!(h.status, 400, "{webhook:?} {body:?}");
            assert!(h.response.is_none());
        }
        // A review for another kind.
        let other = if webhook.kind == "Nova" {
            "NovaCompute"
        } else {
            "Nova"
        };
        let h = run(webhook, &review(other, "CREATE", Some(json!({})), None));
        assert_eq!(h.status, 200);
        let resp = response_json(&h);
        assert_eq!(resp["allowed"], false);
        assert_eq!(resp["status"]["code"], 400);
        assert!(
            resp["status"]["message"]
                .as_str()
                .unwrap()
                .starts_with("this webhook admits nova.openstack.c5c3.io/v1alpha1"),
            "{resp}"
        );
        let own = if other == "Nova" {
            "NovaCompute"
        } else {
            "Nova"
        };
        // A missing object, a missing old object, a null object, an object of the wrong shape.
        for (op, object, old, want) in [
            ("CREATE", None, None, "request.object is missing"),
            (
                "CREATE",
                Some(Value::Null),
                None,
                "request.object is missing",
            ),
            (
                "UPDATE",
                Some(json!({"spec": {}})),
                None,
                "request.oldObject is missing on UPDATE",
            ),
            (
                "PATCH",
                Some(json!({})),
                None,
                "unknown operation \"PATCH\"",
            ),
        ] {
            let resp = response_json(&run(webhook, &review(own, op, object, old)));
            assert_eq!(resp["allowed"], false, "{webhook:?} {op}");
            assert_eq!(resp["status"]["message"], want);
            assert_eq!(resp["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        }
        let resp = response_json(&run(webhook, &review(own, "DELETE", None, None)));
        assert_eq!(resp["allowed"], true);
        let garbage = response_json(&run(
            webhook,
            &review(
                own,
                "CREATE",
                Some(json!({"spec": "x", "metadata": 7})),
                None,
            ),
        ));
        match webhook.verb {
            Verb::Mutate => assert_eq!(garbage["allowed"], true, "left to the schema"),
            Verb::Validate => {
                assert_eq!(garbage["allowed"], false);
                assert_eq!(garbage["status"]["code"], 422, "{garbage}");
                assert_eq!(
                    garbage["status"]["details"]["causes"][0]["field"], "metadata",
                    "{garbage}"
                );
            }
        }
    }
}

#[test]
fn enum_values_outside_their_enum_are_unsupported_not_undecodable() {
    let mut object = example_json();
    object["spec"]["logging"] = json!({"level": "TRACE"});
    let resp = response_json(&run(
        Webhook::validate::<Nova>(),
        &review("Nova", "CREATE", Some(object), None),
    ));
    assert_eq!(
        resp["status"]["message"],
        "Nova.nova.openstack.c5c3.io \"nova\" is invalid: spec.logging.level: Unsupported value: \"TRACE\": supported values: \"DEBUG\", \"INFO\", \"WARNING\", \"ERROR\", \"CRITICAL\""
    );
    assert_eq!(
        resp["status"]["details"]["causes"][0]["reason"],
        "FieldValueNotSupported"
    );
}

#[test]
fn an_object_that_does_not_decode_gets_field_errors_not_a_decoder_message() {
    let mut object = example_json();
    object["spec"]["gateway"] = json!({"parentRef": {"name": "gw"}});
    let resp = response_json(&run(
        Webhook::validate::<Nova>(),
        &review("Nova", "CREATE", Some(object), None),
    ));
    assert_eq!(
        resp["status"],
        json!({
            "status": "Failure",
            "message": "Nova.nova.openstack.c5c3.io \"nova\" is invalid: spec.gateway.hostname: Required value",
            "reason": "Invalid",
            "details": {"name": "nova", "group": "nova.openstack.c5c3.io", "kind": "Nova",
                "causes": [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.gateway.hostname"}]},
            "code": 422,
        })
    );
}

#[test]
fn the_update_of_a_deleting_cr_with_an_unchanged_raw_spec_is_admitted_before_decoding() {
    // Neither object decodes with today's types (a field they no longer know the shape of),
    // and both specs are the same JSON written in another key order.
    let mut old = example_json();
    old["spec"]["image"] = json!({"legacy": true});
    old["spec"]["extraConfig"] = json!({"DEFAULT": {"transport_url": "x"}});
    let mut new = old.clone();
    new["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let mut reordered = serde_json::Map::new();
    let spec = new["spec"].as_object().unwrap().clone();
    for (k, v) in spec.into_iter().rev() {
        reordered.insert(k, v);
    }
    let reordered = Value::Object(reordered);
    let text = format!(
        "{{\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{{\"uid\":\"u\",\"kind\":{{\"group\":\"nova.openstack.c5c3.io\",\"version\":\"v1alpha1\",\"kind\":\"Nova\"}},\"operation\":\"UPDATE\",\"object\":{{\"metadata\":{},\"spec\":{reordered}}},\"oldObject\":{old}}}}}",
        new["metadata"]
    );
    let resp = response_json(&run(Webhook::validate::<Nova>(), text.as_bytes()));
    assert_eq!(resp, json!({"uid": "u", "allowed": true}));

    // A spec change on a deleting CR is validated (and here does not decode).
    new["spec"]["region"] = json!("r");
    let resp = response_json(&run(
        Webhook::validate::<Nova>(),
        &review("Nova", "UPDATE", Some(new.clone()), Some(old.clone())),
    ));
    assert_eq!(resp["allowed"], false, "{resp}");
    assert_eq!(resp["status"]["code"], 422, "{resp}");

    // The same holds for a pool.
    let mut pool = serde_json::to_value(testing::novacompute()).unwrap();
    pool["spec"]["nodeSelector"] = json!({});
    let mut deleting = pool.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let resp = response_json(&run(
        Webhook::validate::<NovaCompute>(),
        &review(
            "NovaCompute",
            "UPDATE",
            Some(deleting.clone()),
            Some(pool.clone()),
        ),
    ));
    assert_eq!(resp["allowed"], true, "{resp}");
    deleting["spec"]["traits"] = json!(["CUSTOM_X"]);
    let resp = response_json(&run(
        Webhook::validate::<NovaCompute>(),
        &review("NovaCompute", "UPDATE", Some(deleting), Some(pool)),
    ));
    assert_eq!(resp["allowed"], false, "{resp}");
}

fn apply(object: &Value, resp: &Value) -> Value {
    let mut patched = object.clone();
    if let Some(b64) = resp["patch"].as_str() {
        assert_eq!(resp["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut patched, &patch.0).unwrap();
    }
    patched
}

#[test]
fn the_defaulting_patch_applied_to_the_received_object_gives_the_defaulted_object() {
    let object = example_json();
    let resp = response_json(&run(
        Webhook::mutate::<Nova>(),
        &review("Nova", "CREATE", Some(object.clone()), None),
    ));
    assert_eq!(resp["allowed"], true);
    assert!(
        resp["patch"].is_string(),
        "the patch travels as a base64 string: {resp}"
    );
    let patched = apply(&object, &resp);
    let want = serde_json::to_value(testing::nova()).unwrap();
    assert_eq!(patched, want);

    // A defaulted object yields no patch.
    let again = response_json(&run(
        Webhook::mutate::<Nova>(),
        &review("Nova", "CREATE", Some(want.clone()), None),
    ));
    assert_eq!(
        again,
        json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true})
    );
}

#[test]
fn golden_defaulting_patches() {
    // The absent blocks of the Example.
    let resp = response_json(&run(
        Webhook::mutate::<Nova>(),
        &review("Nova", "CREATE", Some(example_json()), None),
    ));
    let ops: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(resp["patch"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        ops,
        json!([
            {"op": "add", "path": "/spec/api", "value": {"deployment": {"replicas": 3}, "uwsgi": {"httpKeepAlive": true, "processes": 2, "threads": 1}}},
            {"op": "add", "path": "/spec/metadata/deployment", "value": {"replicas": 1}},
            {"op": "add", "path": "/spec/metadata/uwsgi", "value": {"httpKeepAlive": true, "processes": 2, "threads": 1}},
            {"op": "add", "path": "/spec/metadata/sharedSecretRef/key", "value": "shared_secret"},
            {"op": "add", "path": "/spec/scheduler", "value": {"deployment": {"replicas": 1, "terminationGracePeriodSeconds": 200}, "workers": 2}},
            {"op": "add", "path": "/spec/conductor", "value": {"deployment": {"replicas": 1, "terminationGracePeriodSeconds": 200}, "workers": 2}},
            {"op": "add", "path": "/spec/consoleProxy/deployment", "value": {"replicas": 1}},
            {"op": "add", "path": "/spec/logging", "value": {"debug": false, "format": "text", "level": "INFO"}},
            {"op": "add", "path": "/spec/cache/backend", "value": "dogpile.cache.pymemcache"},
            {"op": "add", "path": "/spec/serviceUser/username", "value": "nova"},
            {"op": "add", "path": "/spec/serviceUser/projectName", "value": "service"},
            {"op": "add", "path": "/spec/serviceUser/userDomainName", "value": "Default"},
            {"op": "add", "path": "/spec/serviceUser/projectDomainName", "value": "Default"},
            {"op": "add", "path": "/spec/serviceUser/secretRef/key", "value": "password"},
        ])
    );

    // The console-proxy switch-off removes the block in the same request.
    let mut off = serde_json::to_value(testing::nova()).unwrap();
    off["spec"]["consoleProxy"]["enabled"] = json!(false);
    let resp = response_json(&run(
        Webhook::mutate::<Nova>(),
        &review("Nova", "UPDATE", Some(off.clone()), Some(off.clone())),
    ));
    assert_eq!(
        resp.get("patch").map(|p| serde_json::from_slice::<Value>(
            &base64::engine::general_purpose::STANDARD
                .decode(p.as_str().unwrap())
                .unwrap()
        )
        .unwrap()),
        Some(json!([{"op": "remove", "path": "/spec/consoleProxy/deployment"}]))
    );

    // The remote-compute key.
    let mut remote = serde_json::to_value(testing::nova()).unwrap();
    remote["spec"]["remoteCompute"] = json!({"keystoneEndpoint": "https://k.example.com/v3", "transportURLSecretRef": {"name": "remote-url"}});
    let resp = response_json(&run(
        Webhook::mutate::<Nova>(),
        &review("Nova", "CREATE", Some(remote.clone()), None),
    ));
    let patched = apply(&remote, &resp);
    assert_eq!(
        patched["spec"]["remoteCompute"]["transportURLSecretRef"],
        json!({"name": "remote-url", "key": "transport_url"})
    );
    let resp = response_json(&run(
        Webhook::mutate::<Nova>(),
        &review("Nova", "CREATE", Some(patched), None),
    ));
    assert!(resp.get("patch").is_none(), "idempotent");

    // A deleting CR is not defaulted, so the finalizer removal keeps its spec.
    let mut deleting = example_json();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let resp = response_json(&run(
        Webhook::mutate::<Nova>(),
        &review("Nova", "UPDATE", Some(deleting.clone()), Some(deleting)),
    ));
    assert!(resp.get("patch").is_none());

    // NovaCompute defaulting changes nothing.
    let pool = serde_json::to_value(testing::novacompute()).unwrap();
    let resp = response_json(&run(
        Webhook::mutate::<NovaCompute>(),
        &review("NovaCompute", "CREATE", Some(pool), None),
    ));
    assert_eq!(
        resp,
        json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true})
    );
}

#[test]
fn golden_422_of_a_multi_violation_nova() {
    let mut object = serde_json::to_value(testing::nova()).unwrap();
    object["metadata"]["name"] = json!("nova-api");
    object["spec"]["openStackRelease"] = json!("2025.2");
    object["spec"]["image"]["digest"] = json!(format!("sha256:{}", "a".repeat(64)));
    object["spec"]["region"] = json!("RegionOne\n");
    object["spec"]["extraConfig"] =
        json!({"DEFAULT": {"transport_url": "rabbit://user:s3cret@rabbit:5672/"}});
    let h = run(
        Webhook::validate::<Nova>(),
        &review("Nova", "CREATE", Some(object), None),
    );
    assert_eq!(h.status, 200);
    let body: Value = serde_json::from_slice(&h.body).unwrap();
    let crlf = "value must not contain a newline or carriage return: it is rendered verbatim into nova.conf and nova-compute.conf, so a newline injects arbitrary config lines";
    let forbidden = "transport_url is managed via spec.messaging and must not be set in extraConfig (env-injected via OS_DEFAULT__TRANSPORT_URL, so a file value is inert at runtime and only copies the broker credentials into the rendered config)";
    let suffix = "name must not end in \"-api\": a Nova named by the rest of the name builds its children under exactly that name";
    let floor = "must be 2026.1 or later: this operator version no longer supports OpenStack releases below 2026.1";
    let xor = "exactly one of image.tag or image.digest must be set";
    assert_eq!(
        body,
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "allowed": false,
                "status": {
                    "status": "Failure",
                    "message": format!(
                        "Nova.nova.openstack.c5c3.io \"nova-api\" is invalid: [metadata.name: Invalid value: \"nova-api\": {suffix}, spec.openStackRelease: Invalid value: \"2025.2\": {floor}, spec.image: Invalid value: {xor}, spec.region: Invalid value: \"RegionOne\\n\": {crlf}, spec.extraConfig[DEFAULT][transport_url]: Forbidden: {forbidden}]"
                    ),
                    "reason": "Invalid",
                    "details": {
                        "name": "nova-api",
                        "group": "nova.openstack.c5c3.io",
                        "kind": "Nova",
                        "causes": [
                            {"reason": "FieldValueInvalid", "message": format!("Invalid value: \"nova-api\": {suffix}"), "field": "metadata.name"},
                            {"reason": "FieldValueInvalid", "message": format!("Invalid value: \"2025.2\": {floor}"), "field": "spec.openStackRelease"},
                            {"reason": "FieldValueInvalid", "message": format!("Invalid value: {xor}"), "field": "spec.image"},
                            {"reason": "FieldValueInvalid", "message": format!("Invalid value: \"RegionOne\\n\": {crlf}"), "field": "spec.region"},
                            {"reason": "FieldValueForbidden", "message": format!("Forbidden: {forbidden}"), "field": "spec.extraConfig[DEFAULT][transport_url]"},
                        ],
                    },
                    "code": 422,
                },
                "warnings": ["spec.extraConfig was not validated against an option catalog: no catalog for release \"2025.2\" is embedded in this operator build"],
            },
        })
    );
    assert!(!String::from_utf8_lossy(&h.body).contains("s3cret"));
}

struct FailingResolver;

impl Resolver for FailingResolver {
    fn resolve<'a>(&'a self, needs: &'a Needs) -> BoxFuture<'a, Result<Lookups, String>> {
        let unavailable = || PriorityClassLookup::Unavailable("connection refused".into());
        let answers = needs
            .priority_classes
            .iter()
            .map(|n| (n.clone(), unavailable()))
            .collect();
        Box::pin(std::future::ready(match needs.nova {
            Some(_) => Err("connection refused".into()),
            None => Ok(Lookups {
                priority_classes: Some(answers),
                nova: None,
                novas: needs
                    .novas
                    .then(|| NovaList::Unavailable("connection refused".into())),
            }),
        }))
    }
}

#[test]
fn an_unreachable_api_server_fails_only_the_lookups() {
    let mut pool = serde_json::to_value(testing::novacompute()).unwrap();
    let h = futures::executor::block_on(handle(
        Webhook::validate::<NovaCompute>(),
        &review("NovaCompute", "CREATE", Some(pool.clone()), None),
        &FailingResolver,
    ));
    let resp = response_json(&h);
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["code"], 500);
    assert_eq!(
        resp["status"]["message"],
        "reading Nova openstack/nova: connection refused"
    );
    // Without extraConfig no Nova is read.
    pool["spec"].as_object_mut().unwrap().remove("extraConfig");
    let h = futures::executor::block_on(handle(
        Webhook::validate::<NovaCompute>(),
        &review("NovaCompute", "CREATE", Some(pool), None),
        &FailingResolver,
    ));
    assert_eq!(response_json(&h)["allowed"], true);

    let mut nova = example_json();
    nova["spec"]["scheduler"] = json!({"deployment": {"priorityClassName": "high"}});
    let h = futures::executor::block_on(handle(
        Webhook::validate::<Nova>(),
        &review("Nova", "CREATE", Some(nova), None),
        &FailingResolver,
    ));
    assert_eq!(
        response_json(&h)["status"]["message"],
        "Nova.nova.openstack.c5c3.io \"nova\" is invalid: [spec.scheduler.deployment.priorityClassName: Internal error: cannot verify that PriorityClass \"high\" exists: connection refused, spec.apiDatabase.database: Internal error: cannot verify that no other Nova uses this schema: connection refused, spec.database.database: Internal error: cannot verify that no other Nova uses this schema: connection refused]"
    );
    // An update of the Example that keeps its schemas where they were needs no lookup at all.
    let h = futures::executor::block_on(handle(
        Webhook::validate::<Nova>(),
        &review("Nova", "UPDATE", Some(example_json()), Some(example_json())),
        &FailingResolver,
    ));
    assert_eq!(response_json(&h)["allowed"], true);
}

#[test]
fn warnings_travel_beside_an_admission() {
    let mut object = serde_json::to_value(testing::nova()).unwrap();
    object["spec"]["extraConfig"] =
        json!({"DEFAULT": {"api_paste_config": "/etc/nova/api-paste.ini"}});
    let resp = response_json(&run(
        Webhook::validate::<Nova>(),
        &review("Nova", "CREATE", Some(object), None),
    ));
    assert_eq!(resp["allowed"], true);
    assert_eq!(
        resp["warnings"],
        json!([
            "spec.extraConfig [DEFAULT] api_paste_config: deprecated option in nova 2026.1, replaced by [wsgi] api_paste_config"
        ])
    );
}
