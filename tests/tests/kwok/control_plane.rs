//! Proves the test control plane does what the suites rely on: CRDs served, garbage
//! collection, Deployments and Jobs driven through kwok, test-chosen termination messages, and
//! admission webhooks registered by URL. These tests need the binaries from
//! `tests/build-control-plane.sh` and fail (never skip) without them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::{Json, Router, routing::post};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use nova_test_harness::kwok::{EXIT_CODE_ANNOTATION, TERMINATION_MESSAGE_ANNOTATION};
use nova_test_harness::{
    Canary, CanaryExpectation, ControlPlane, Options, WebhookEndpoint, WebhookRegistration,
    crd_files, default_crd_dirs, read_crds, register_webhooks, shared, unregister_webhooks,
    wait_for_webhook,
};
use nova_testkit::wait::Wait;
use serde_json::json;

async fn control_plane() -> Result<&'static ControlPlane> {
    let t0 = Instant::now();
    let cp = shared()
        .await
        .context("starting the shared control plane")?;
    let t = cp.timings();
    println!(
        "control plane for this test after {:.2}s (start-up: API server usable after {:.2}s, \
         CRDs established after {:.2}s, all components after {:.2}s); logs in {}",
        t0.elapsed().as_secs_f64(),
        t.api_ready.as_secs_f64(),
        t.crds_established.as_secs_f64(),
        t.total.as_secs_f64(),
        cp.log_dir().display()
    );
    Ok(cp)
}

#[tokio::test]
async fn missing_binaries_fail_with_a_build_hint() {
    let options = Options {
        testbin: "/nonexistent/nova-testbin".into(),
        ..Options::default()
    };
    let Err(err) = ControlPlane::start_with(options).await else {
        panic!("a control plane started without binaries");
    };
    let message = err.to_string();
    assert!(
        message.contains("tests/build-control-plane.sh") && message.contains("kube-apiserver"),
        "{message}"
    );
}

#[tokio::test]
async fn crds_are_installed_and_established() -> Result<()> {
    let cp = control_plane().await?;
    let client = cp.client()?;
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let mut expected = Vec::new();
    for file in crd_files(&default_crd_dirs())? {
        for crd in read_crds(&file)? {
            expected.push(crd.metadata.name.unwrap_or_default());
        }
    }
    for name in [
        "mariadbs.k8s.mariadb.com",
        "databases.k8s.mariadb.com",
        "users.k8s.mariadb.com",
        "grants.k8s.mariadb.com",
        "clustersecretstores.external-secrets.io",
        "secretstores.external-secrets.io",
        "externalsecrets.external-secrets.io",
        "gatewayclasses.gateway.networking.k8s.io",
        "gateways.gateway.networking.k8s.io",
        "httproutes.gateway.networking.k8s.io",
        "verticalpodautoscalers.autoscaling.k8s.io",
        "rabbitmqclusters.rabbitmq.com",
        "hypervisors.kvm.cloud.sap",
        "memcacheds.memcached.c5c3.io",
    ] {
        assert!(
            expected.iter().any(|n| n == name),
            "{name} missing from the CRD files"
        );
    }
    for name in &expected {
        let crd = api
            .get(name)
            .await
            .with_context(|| format!("get CRD {name}"))?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(established, "CRD {name} is not Established");
    }
    assert_eq!(cp.crds().len(), expected.len());
    println!("{} CRDs established: {:?}", expected.len(), expected);

    // The operator's reads work against the real schemas: e.g. a Hypervisor's customTraits.
    let hv = ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
        "kvm.cloud.sap",
        "v1",
        "Hypervisor",
    ));
    let hypervisors: Api<DynamicObject> = Api::all_with(cp.client()?, &hv);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kvm.cloud.sap/v1", "kind": "Hypervisor",
        "metadata": { "name": "crd-test-node" },
        "spec": {}
    }))?;
    let created = hypervisors
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &obj,
        )
        .await
        .context("dry-run create of a Hypervisor")?;
    assert_eq!(created.data["spec"]["customTraits"], json!([]));
    Ok(())
}

#[tokio::test]
async fn garbage_collection_deletes_owned_objects() -> Result<()> {
    let cp = control_plane().await?;
    let ns = cp.namespace("gc").await?;
    let cms: Api<ConfigMap> = Api::namespaced(cp.client()?, &ns);
    let owner: ConfigMap = serde_json::from_value(json!({ "metadata": { "name": "owner" } }))?;
    let owner = cms.create(&PostParams::default(), &owner).await?;
    let uid = owner.metadata.uid.context("owner uid")?;
    let owned: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "owned",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid,
                "controller": true, "blockOwnerDeletion": true
            }]
        }
    }))?;
    cms.create(&PostParams::default(), &owned).await?;
    cms.delete("owner", &DeleteParams::background()).await?;
    let started = Instant::now();
    Wait::new(
        "the owned ConfigMap to be collected",
        Duration::from_secs(90),
    )
    .until(|| {
        let cms = cms.clone();
        async move { Ok(cms.get_opt("owned").await?.is_none().then_some(())) }
    })
    .await?;
    println!(
        "owned ConfigMap collected {:.2}s after its owner was deleted",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn pod_template(annotations: BTreeMap<&str, &str>) -> serde_json::Value {
    json!({
        "metadata": { "labels": { "app": "demo" }, "annotations": annotations },
        "spec": {
            "containers": [{ "name": "main", "image": "registry.invalid/demo:1" }],
            "restartPolicy": "Never"
        }
    })
}

#[tokio::test]
async fn a_deployment_becomes_available_through_kwok() -> Result<()> {
    let cp = control_plane().await?;
    let ns = cp.namespace("deploy").await?;
    let deployments: Api<Deployment> = Api::namespaced(cp.client()?, &ns);
    let mut template = pod_template(BTreeMap::new());
    template["spec"]["restartPolicy"] = json!("Always");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "demo" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "demo" } },
            "template": template
        }
    }))?;
    deployments
        .create(&PostParams::default(), &deployment)
        .await?;
    let started = Instant::now();
    Wait::new("the Deployment to be Available", Duration::from_secs(90))
        .until(|| {
            let deployments = deployments.clone();
            async move {
                let d = deployments.get("demo").await?;
                let status = d.status.unwrap_or_default();
                let available = status
                    .conditions
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Available" && c.status == "True");
                Ok((available && status.available_replicas == Some(2)).then_some(()))
            }
        })
        .await?;
    println!(
        "Deployment available after {:.2}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn job(name: &str, annotations: BTreeMap<&str, &str>) -> Result<Job> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "backoffLimit": 0, "template": pod_template(annotations) }
    }))?)
}

async fn wait_for_job_condition(jobs: &Api<Job>, name: &str, condition: &str) -> Result<()> {
    Wait::new(
        format!("Job {name} to be {condition}"),
        Duration::from_secs(90),
    )
    .until(|| {
        let jobs = jobs.clone();
        async move {
            let job = jobs.get(name).await?;
            let conditions = job.status.and_then(|s| s.conditions).unwrap_or_default();
            Ok(conditions
                .iter()
                .any(|c| c.type_ == condition && c.status == "True")
                .then_some(()))
        }
    })
    .await
    .map_err(Into::into)
}

#[tokio::test]
async fn a_job_completes_through_kwok() -> Result<()> {
    let cp = control_plane().await?;
    let ns = cp.namespace("job").await?;
    let jobs: Api<Job> = Api::namespaced(cp.client()?, &ns);
    jobs.create(&PostParams::default(), &job("plain", BTreeMap::new())?)
        .await?;
    let started = Instant::now();
    wait_for_job_condition(&jobs, "plain", "Complete").await?;
    println!("Job complete after {:.2}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The terminated state of the (only) pod of Job `name`, once it has one.
async fn terminated_pod(
    pods: &Api<Pod>,
    name: &str,
) -> Result<(String, k8s_openapi::api::core::v1::ContainerStateTerminated)> {
    Wait::new(
        format!("the pod of Job {name} to terminate"),
        Duration::from_secs(90),
    )
    .until(|| {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels(&format!("job-name={name}")))
                .await?;
            let Some(pod) = list.items.into_iter().next() else {
                return Ok(None);
            };
            let status = pod.status.unwrap_or_default();
            let terminated = status
                .container_statuses
                .unwrap_or_default()
                .into_iter()
                .find_map(|c| c.state.and_then(|s| s.terminated));
            Ok(terminated.map(|t| (status.phase.unwrap_or_default(), t)))
        }
    })
    .await
    .map_err(Into::into)
}

#[tokio::test]
async fn a_job_pod_fails_with_the_chosen_message_and_exit_code() -> Result<()> {
    let cp = control_plane().await?;
    let ns = cp.namespace("job-msg").await?;
    let client = cp.client()?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let message = "db sync failed: \"nova_api\" schema is 3 versions behind\nsecond line";
    let annotations = BTreeMap::from([
        (EXIT_CODE_ANNOTATION, "3"),
        (TERMINATION_MESSAGE_ANNOTATION, message),
    ]);
    jobs.create(&PostParams::default(), &job("db-sync", annotations)?)
        .await?;
    let (phase, terminated) = terminated_pod(&pods, "db-sync").await?;
    assert_eq!(phase, "Failed");
    assert_eq!(terminated.exit_code, 3);
    assert_eq!(terminated.message.as_deref(), Some(message));
    assert_eq!(terminated.reason.as_deref(), Some("Error"));
    wait_for_job_condition(&jobs, "db-sync", "Failed").await
}

#[tokio::test]
async fn a_job_pod_succeeds_with_the_chosen_message() -> Result<()> {
    let cp = control_plane().await?;
    let ns = cp.namespace("job-ok").await?;
    let client = cp.client()?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let message = r#"{"result":"synced","version":"31"}"#;
    let annotations = BTreeMap::from([(TERMINATION_MESSAGE_ANNOTATION, message)]);
    jobs.create(&PostParams::default(), &job("db-sync", annotations)?)
        .await?;
    let (phase, terminated) = terminated_pod(&pods, "db-sync").await?;
    assert_eq!(phase, "Succeeded");
    assert_eq!(terminated.exit_code, 0);
    assert_eq!(terminated.message.as_deref(), Some(message));
    wait_for_job_condition(&jobs, "db-sync", "Complete").await
}

/// Denies ConfigMaps whose name starts with `canary`.
async fn validate(
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(request) => request,
        Err(e) => return Json(AdmissionResponse::invalid(e.to_string()).into_review()),
    };
    let response = AdmissionResponse::from(&request);
    let response = if request.name.starts_with("canary") {
        response.deny("canary rejected by the test webhook")
    } else {
        response
    };
    Json(response.into_review())
}

/// Adds the label `mutated-by: test-webhook`, proving the API server applies kube's patches.
async fn mutate(
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(request) => request,
        Err(e) => return Json(AdmissionResponse::invalid(e.to_string()).into_review()),
    };
    let response = AdmissionResponse::from(&request);
    let Some(object) = request.object.as_ref() else {
        return Json(response.into_review());
    };
    let before = serde_json::to_value(object).unwrap_or_default();
    let mut after = before.clone();
    after["metadata"]["labels"]["mutated-by"] = json!("test-webhook");
    let patch = json_patch::diff(&before, &after);
    let response = match response.with_patch(patch) {
        Ok(r) => r,
        Err(e) => AdmissionResponse::invalid(e.to_string()),
    };
    Json(response.into_review())
}

/// Serves `router` over TLS on a free loopback port; returns the port.
async fn serve_https(router: Router, cert_pem: &str, key_pem: &str) -> Result<u16> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs =
        CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let service = hyper_util::service::TowerToHyperService::new(router.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                .await;
            });
        }
    });
    Ok(port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_registered_by_url_are_called_by_the_api_server() -> Result<()> {
    let cp = control_plane().await?;
    let ns = cp.namespace("webhook").await?;
    let client = cp.client()?;

    let bundle = nova_certs::ServingBundle::generate("test-webhook", &["127.0.0.1", "localhost"])?;
    let router = Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate));
    let port = serve_https(router, &bundle.cert_pem, &bundle.key_pem).await?;

    let name = format!("test-webhook-{ns}");
    let registration = WebhookRegistration {
        name: name.clone(),
        url_base: format!("https://127.0.0.1:{port}"),
        ca_bundle_pem: bundle.ca_pem.clone(),
        mutating: vec![
            WebhookEndpoint::new(
                "mconfigmap.test.nova.c5c3.io",
                "/mutate",
                "",
                &["v1"],
                &["configmaps"],
            )
            .only_in_namespaces(&[&ns]),
        ],
        validating: vec![
            WebhookEndpoint::new(
                "vconfigmap.test.nova.c5c3.io",
                "/validate",
                "",
                &["v1"],
                &["configmaps"],
            )
            .only_in_namespaces(&[&ns]),
        ],
    };
    register_webhooks(&client, &registration).await?;

    let canary = |expect| Canary {
        resource: ApiResource::erase::<ConfigMap>(&()),
        namespace: Some(ns.clone()),
        object: json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "canary-1" } }),
        expect,
    };
    let started = Instant::now();
    wait_for_webhook(
        &client,
        &canary(CanaryExpectation::DeniedWith(
            "admission webhook \"vconfigmap.test.nova.c5c3.io\" denied the request: canary rejected by the test webhook".into(),
        )),
        Duration::from_secs(60),
    )
    .await?;
    println!(
        "validating webhook called after {:.2}s",
        started.elapsed().as_secs_f64()
    );

    // A real create goes through the mutating webhook (kube's patch encoding is accepted).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let plain: ConfigMap = serde_json::from_value(json!({ "metadata": { "name": "plain" } }))?;
    let created = cms.create(&PostParams::default(), &plain).await?;
    assert_eq!(
        created
            .metadata
            .labels
            .unwrap_or_default()
            .get("mutated-by")
            .map(String::as_str),
        Some("test-webhook")
    );

    // Unregistered, the same canary is admitted again.
    unregister_webhooks(&client, &name).await?;
    wait_for_webhook(
        &client,
        &canary(CanaryExpectation::Admitted(Box::new(|obj| {
            obj.metadata
                .labels
                .as_ref()
                .is_none_or(|l| !l.contains_key("mutated-by"))
        }))),
        Duration::from_secs(60),
    )
    .await?;
    Ok(())
}
