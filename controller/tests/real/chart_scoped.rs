//! The chart's namespace-scoped install against the real OpenStack (issue 30): a release
//! whose controller holds only a Role in its own namespace (`rbac.scope=namespace`), installed
//! from the locally built images, takes the real Nova to Ready there: its webhook admits the
//! Nova, its controller provisions the schemas through the simulated MariaDB operator, runs the
//! real migrations, the five real workloads against the shared Keystone, MariaDB and memcached,
//! and probes nova-api through its Service from inside the cluster. It lives in the real tier's
//! binary, not in `real_chart`'s, so the OpenStack is the one the tier deploys once: a scoped
//! controller reconciles only its namespace, and its webhooks admit only that namespace, so the
//! tests beside it are untouched.

use std::time::Instant;

use kube::api::{Api, PostParams};
use nova_api::v1alpha1::Nova;
use nova_test_harness::helm;
use nova_test_harness::images::{nova_image, pinned};
use nova_testkit::prelude::*;
use nova_testkit::real::*;

const RELEASE_NAME: &str = "nova-real-scoped";

#[tokio::test(flavor = "multi_thread")]
async fn a_namespace_scoped_release_takes_a_nova_to_ready_against_the_real_openstack() {
    let _timed = nova_testkit::stack::timed().await;
    assert!(
        nova_test_harness::images::operator_manifest_path().is_file(),
        "the operator images are not built: run images/build.sh"
    );
    let (cp, os) = nova_testkit::stack::openstack().await;
    let client = cp.client().expect("client");
    let ns = cp.namespace("chart-scoped").await.expect("namespace");
    provide_real_inputs(os, &client, &ns).await;
    let home = tempfile::tempdir().expect("helm home");
    let chart = helm::chart_dir().display().to_string();
    helm_ok(
        home.path(),
        cp,
        &scoped_install_args(RELEASE_NAME, &ns, &chart),
    );
    // Available is not yet routed: kube-proxy maps the webhook's Service a moment later.
    webhook_denies(&client, &ns).await;

    let image = pinned(&nova_image(RELEASE)).expect("the nova image");
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let t = Instant::now();
    novas
        .create(&PostParams::default(), &real_nova(&ns, &image))
        .await
        .expect("the release's webhook admits the Nova");
    let nova = wait_nova(&client, &ns, "Ready=True", |n| holds(n, "Ready", "True")).await;
    eprintln!(
        "the scoped release's Nova is Ready after {:.0}s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(
        nova.status
            .as_ref()
            .and_then(|s| s.installed_release.as_deref()),
        Some(RELEASE),
        "the scoped controller ran the real migrations"
    );

    // The Nova goes while its controller runs (its finalizer is the controller's), then the
    // release.
    delete_until_gone_within(&novas, REAL_TIMEOUT).await;
    helm_ok(
        home.path(),
        cp,
        &["uninstall", RELEASE_NAME, "--namespace", &ns, "--wait"],
    );
    finish(&client, &ns).await;
}
