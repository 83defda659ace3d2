//! The self-signed mode's decisions and its inject patch.

use std::time::{Instant, SystemTime};

use k8s_openapi::ByteString;
use kube::api::ObjectMeta;
use nova_certs::{PemCert, parse_certificates};

use super::*;

const DAY: Duration = Duration::from_secs(86_400);

fn lifetimes() -> Lifetimes {
    Lifetimes {
        ca: 365 * DAY,
        serving: 90 * DAY,
        names: vec!["svc.ns.svc".into(), "127.0.0.1".into()],
    }
}

fn written(plan: Plan) -> (Material, Vec<Reason>) {
    match plan {
        Plan::Write(m, r) => (m, r),
        Plan::Keep => panic!("expected a write"),
    }
}

/// A Secret made at `at`.
fn fresh(at: SystemTime) -> Material {
    written(plan(None, &[], &lifetimes(), at).unwrap()).0
}

fn certs(pem: &str) -> Vec<PemCert> {
    parse_certificates(pem).unwrap()
}

#[test]
fn renewal_decisions() {
    let t0 = SystemTime::now();
    let made = fresh(t0);
    let ca0 = certs(&made.bundle)[0].clone();
    let leaf0 = certs(&made.cert)[0].clone();
    assert_eq!(certs(&made.bundle).len(), 1);
    assert!(leaf0.issued_by(&ca0));
    assert!(leaf0.matches_key(&made.key));
    assert!(ca0.matches_key(&made.ca_key));

    let mut broken_key = made.clone();
    broken_key.key = fresh(t0).key;
    let mut garbage_ca = made.clone();
    garbage_ca.bundle = "not a certificate".into();
    let mut garbage_leaf = made.clone();
    garbage_leaf.cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into();
    let mut foreign_leaf = made.clone();
    let other = fresh(t0);
    (foreign_leaf.cert, foreign_leaf.key) = (other.cert.clone(), other.key.clone());
    let mut renamed = made.clone();
    renamed.names = "old.name".into();
    let mut no_ca_key = made.clone();
    no_ca_key.ca_key = String::new();

    let at = |days: u32| t0 + DAY * days;
    // (case, stored, at, expected reasons, CA kept, leaf kept)
    type Case<'a> = (
        &'a str,
        Option<&'a Material>,
        SystemTime,
        Vec<Reason>,
        bool,
        bool,
    );
    let table: Vec<Case> = vec![
        ("missing", None, t0, vec![Reason::Missing], false, false),
        ("fresh", Some(&made), at(1), vec![], true, true),
        ("before 2/3", Some(&made), at(59), vec![], true, true),
        (
            "past 2/3",
            Some(&made),
            at(61),
            vec![Reason::ServingDue],
            true,
            false,
        ),
        (
            "expired",
            Some(&made),
            at(91),
            vec![Reason::ServingDue],
            true,
            false,
        ),
        (
            "key of another",
            Some(&broken_key),
            at(1),
            vec![Reason::BrokenServing(
                "the serving key is not the certificate's".into(),
            )],
            true,
            false,
        ),
        (
            "leaf garbage",
            Some(&garbage_leaf),
            at(1),
            vec![Reason::BrokenServing(
                "no serving certificate that parses".into(),
            )],
            true,
            false,
        ),
        (
            "leaf of another CA",
            Some(&foreign_leaf),
            at(1),
            vec![Reason::BrokenServing(
                "the serving certificate is signed by no CA of the bundle".into(),
            )],
            true,
            false,
        ),
        (
            "renamed",
            Some(&renamed),
            at(1),
            vec![Reason::BrokenServing(
                "the serving certificate was issued for other names".into(),
            )],
            true,
            false,
        ),
    ];
    for (case, stored, now, reasons, ca_kept, leaf_kept) in table {
        let result = plan(stored, &[], &lifetimes(), now).unwrap();
        if reasons.is_empty() {
            assert_eq!(result, Plan::Keep, "{case}");
            continue;
        }
        let (m, got) = written(result);
        assert_eq!(got, reasons, "{case}");
        assert_eq!(certs(&m.bundle)[0] == ca0, ca_kept, "{case}: CA kept");
        assert_eq!(certs(&m.cert)[0] == leaf0, leaf_kept, "{case}: leaf kept");
        // What is written is whole and consistent, and is kept when planned again.
        let leaf = &certs(&m.cert)[0];
        assert!(leaf.matches_key(&m.key), "{case}");
        assert!(leaf.issued_by(&certs(&m.bundle)[0]), "{case}");
        assert!(leaf.validity.not_after > now, "{case}");
        assert_eq!(
            plan(Some(&m), &[], &lifetimes(), now).unwrap(),
            Plan::Keep,
            "{case}: stable"
        );
    }

    // Broken CA contents make a new CA, without a panic. The old CA, when it still parses,
    // stays in the bundle, and so does the leaf it signed (it is served and trusted).
    for (case, stored, leaf_kept) in [
        ("CA garbage", &garbage_ca, false),
        ("no CA key", &no_ca_key, true),
    ] {
        let (m, got) = written(plan(Some(stored), &[], &lifetimes(), at(1)).unwrap());
        assert!(matches!(got[0], Reason::BrokenCa(_)), "{case}: {got:?}");
        assert!(
            !got.iter().any(|r| format!("{r:?}").contains("PRIVATE")),
            "{case}"
        );
        let bundle = certs(&m.bundle);
        assert_ne!(bundle[0], ca0, "{case}");
        assert!(bundle[0].matches_key(&m.ca_key), "{case}");
        assert_eq!(bundle.contains(&ca0), leaf_kept, "{case}");
        assert_eq!(certs(&m.cert)[0] == leaf0, leaf_kept, "{case}");
        assert_eq!(
            plan(Some(&m), &[], &lifetimes(), at(1)).unwrap(),
            Plan::Keep,
            "{case}"
        );
    }
}

#[test]
fn a_ca_past_two_thirds_rolls_and_the_old_one_stays_trusted_until_it_expires() {
    let t0 = SystemTime::now();
    let l = lifetimes();
    let made = fresh(t0);
    let ca0 = certs(&made.bundle)[0].clone();
    // Walk through time renewing whenever the plan says so.
    let mut current = made;
    let mut rolled_at = None;
    for day in 1..=400u32 {
        let now = t0 + DAY * day;
        if let Plan::Write(m, reasons) = plan(Some(&current), &[], &l, now).unwrap() {
            if reasons.contains(&Reason::CaDue) {
                rolled_at = Some(day);
                let bundle = certs(&m.bundle);
                assert_eq!(bundle.len(), 2, "old CA kept beside the new one");
                assert_eq!(bundle[1], ca0);
                // The served leaf is kept unless due itself: its CA is still trusted.
                if !reasons.contains(&Reason::ServingDue) {
                    assert_eq!(m.cert, current.cert);
                }
            }
            current = m;
        }
        // At every point the served leaf is valid and signed by a CA of the bundle.
        let leaf = &certs(&current.cert)[0];
        assert!(leaf.validity.not_after > now, "day {day}");
        let bundle = certs(&current.bundle);
        assert!(bundle.iter().any(|ca| leaf.issued_by(ca)), "day {day}");
        assert!(
            bundle.iter().all(|ca| ca.validity.not_after > now),
            "day {day}"
        );
    }
    assert_eq!(rolled_at, Some(244), "rolled at two-thirds of a year");
    assert_eq!(
        certs(&current.bundle).len(),
        1,
        "the old CA dropped once expired"
    );
}

#[test]
fn a_regenerated_bundle_keeps_the_cas_the_configurations_trust() {
    let t0 = SystemTime::now();
    let old = fresh(t0);
    let trusted = certs(&old.bundle);
    let (m, reasons) = written(plan(None, &trusted, &lifetimes(), t0).unwrap());
    assert_eq!(reasons, vec![Reason::Missing]);
    let bundle = certs(&m.bundle);
    assert_eq!(bundle.len(), 2);
    assert_eq!(bundle[1], trusted[0]);
    assert!(certs(&m.cert)[0].issued_by(&bundle[0]));
}

#[test]
fn injection_patches_only_what_differs() {
    use k8s_openapi::api::admissionregistration::v1::{ValidatingWebhook, WebhookClientConfig};
    let meta = ObjectMeta {
        resource_version: Some("7".into()),
        ..ObjectMeta::default()
    };
    let hook = |name: &str, bundle: &[u8]| ValidatingWebhook {
        name: name.into(),
        client_config: WebhookClientConfig {
            url: Some(format!("https://127.0.0.1/{name}")),
            ca_bundle: Some(ByteString(bundle.to_vec())),
            service: None,
        },
        ..ValidatingWebhook::default()
    };
    let bundle = b"BUNDLE";
    assert!(inject_patch(&meta, &[hook("a", bundle), hook("b", bundle)], bundle).is_none());
    let patch = inject_patch(&meta, &[hook("a", bundle), hook("b", b"")], bundle).unwrap();
    assert_eq!(
        patch["metadata"],
        serde_json::json!({"resourceVersion": "7"})
    );
    let hooks = patch["webhooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 2, "the list is carried whole");
    for (h, name) in hooks.iter().zip(["a", "b"]) {
        assert_eq!(h["name"], name);
        assert_eq!(h["clientConfig"]["caBundle"], "QlVORExF");
        assert_eq!(
            h["clientConfig"]["url"],
            format!("https://127.0.0.1/{name}")
        );
    }
}

#[test]
fn a_new_certificate_waits_for_its_ca_to_propagate_unless_nothing_usable_is_served() {
    let now = SystemTime::now();
    let served = certs(&fresh(now).cert).remove(0);
    let t = Instant::now();
    let p = Duration::from_secs(10);
    assert!(may_serve(None, None, p, now, t));
    assert!(!may_serve(Some(&served), None, p, now, t));
    assert!(!may_serve(
        Some(&served),
        Some(t),
        p,
        now,
        t + Duration::from_secs(5)
    ));
    assert!(may_serve(Some(&served), Some(t), p, now, t + p));
    assert!(may_serve(Some(&served), None, p, now + 91 * DAY, t));
}

#[test]
fn lifetimes_that_do_not_work_together_are_refused() {
    assert!(lifetimes().check().is_ok());
    let mut l = lifetimes();
    l.ca = 200 * DAY;
    assert!(l.check().is_err());
    l = lifetimes();
    l.names.clear();
    assert!(l.check().is_err());
}

#[test]
fn material_debug_leaves_the_keys_out() {
    let m = fresh(SystemTime::now());
    let shown = format!("{m:?}");
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
}
