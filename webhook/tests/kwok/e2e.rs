//! End to end on the test control plane: `nova-webhook` runs as a process, is registered by URL,
//! and creates and updates through the real API server (as `kubectl apply` sends them) are
//! defaulted and validated. Needs the control-plane binaries (`tests/build-control-plane.sh`).

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use nova_test_harness::local_webhook::{
    CertDir, LocalWebhook, example_named, nova_registration, nova_resource,
};
use nova_test_harness::{
    Canary, CanaryExpectation, register_webhooks, shared, unregister_webhooks, wait_for_webhook,
};
use serde_json::{Value, json};

use nova_testkit::fixtures::EXAMPLE_NOVA_YAML as EXAMPLE_NOVA;
use nova_testkit::fixtures::EXAMPLE_POOL_YAML as EXAMPLE_POOL;

fn resource(kind: &str, plural: &str) -> ApiResource {
    nova_resource(kind, plural)
}

fn example(yaml: &str, name: &str, ns: &str) -> Value {
    example_named(yaml, name, ns).unwrap()
}

/// The Example named `name` on schemas of its own (`<name>_api`, `<name>_cell`), so the schema
/// claim check passes it beside the Example `nova`.
fn unclaimed(name: &str, ns: &str) -> Value {
    let mut v = example(EXAMPLE_NOVA, name, ns);
    let base = name.replace('-', "_");
    v["spec"]["apiDatabase"]["database"] = json!(format!("{base}_api"));
    v["spec"]["database"]["database"] = json!(format!("{base}_cell"));
    v
}

fn denial(result: Result<DynamicObject, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => status.message,
        Err(e) => panic!("unexpected error {e}"),
        Ok(obj) => panic!(
            "admitted: {}",
            serde_json::to_string(&obj).unwrap_or_default()
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_defaults_and_validates_through_nova_webhook() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cp = shared().await.expect("control plane");
    let ns = cp.namespace("nova-webhook").await.expect("namespace");
    let client = cp.client().expect("client");

    let dir = tempfile::tempdir().unwrap();
    let bundle = nova_certs::ServingBundle::generate("nova-webhook", &["127.0.0.1"]).unwrap();
    let certs = CertDir::new(dir.path(), &bundle.cert_pem, &bundle.key_pem).unwrap();
    let webhook = LocalWebhook::start(
        env!("CARGO_BIN_EXE_nova-webhook").as_ref(),
        &certs,
        5,
        cp,
        &ns,
    )
    .await
    .expect("nova-webhook starts and is ready");

    let name = format!("nova-webhook-{ns}");
    let registration = nova_registration(&name, &ns, &webhook.url_base(), &bundle.ca_pem);
    register_webhooks(&client, &registration)
        .await
        .expect("registration");
    let novas_res = resource("Nova", "novas");
    wait_for_webhook(
        &client,
        &Canary {
            resource: novas_res.clone(),
            namespace: Some(ns.clone()),
            object: example(EXAMPLE_NOVA, "canary-api", &ns),
            expect: CanaryExpectation::DeniedWith("name must not end in \"-api\"".into()),
        },
        Duration::from_secs(60),
    )
    .await
    .expect("the validating webhook is called");

    let novas: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &novas_res);
    let apply = PatchParams::apply("kubectl").force();

    // Defaulting through the API server: the Example applied as kubectl would.
    let applied = novas
        .patch(
            "nova",
            &apply,
            &Patch::Apply(example(EXAMPLE_NOVA, "nova", &ns)),
        )
        .await
        .expect("the Example is admitted");
    let spec = &applied.data["spec"];
    assert_eq!(spec["cache"]["backend"], "dogpile.cache.pymemcache");
    assert_eq!(
        spec["scheduler"],
        json!({"deployment": {"replicas": 1, "terminationGracePeriodSeconds": 200}, "workers": 2})
    );
    assert_eq!(spec["metadata"]["deployment"]["replicas"], 1);
    assert_eq!(
        spec["api"]["uwsgi"],
        json!({"httpKeepAlive": true, "processes": 2, "threads": 1})
    );
    assert_eq!(spec["consoleProxy"]["deployment"]["replicas"], 1);
    assert_eq!(spec["serviceUser"]["username"], "nova");
    assert_eq!(
        spec["logging"],
        json!({"debug": false, "format": "text", "level": "INFO"})
    );

    // Switching the proxy off removes its block in the same request.
    let off = novas
        .patch(
            "nova",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"consoleProxy": {"enabled": false}}})),
        )
        .await
        .expect("switching the proxy off is admitted");
    assert_eq!(off.data["spec"]["consoleProxy"].get("deployment"), None);

    // An update keeping a stored release is admitted; changing it below the floor is not.
    let msg = denial(
        novas
            .patch(
                "nova",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"openStackRelease": "2025.2"}})),
            )
            .await,
    );
    assert!(
        msg.contains("spec.openStackRelease: Invalid value: \"2025.2\": must be 2026.1 or later"),
        "{msg}"
    );

    // Rejections the webhook owns, each through the API server with its message.
    let dry = PostParams {
        dry_run: true,
        field_manager: Some("kubectl".into()),
    };

    // A second Nova on the Example's schemas and MariaDB is refused, naming the first; on
    // schemas of its own it is admitted.
    let second: DynamicObject =
        serde_json::from_value(example(EXAMPLE_NOVA, "nova-b", &ns)).unwrap();
    let msg = denial(novas.create(&dry, &second).await);
    assert!(
        msg.contains(&format!(
            "Nova.nova.openstack.c5c3.io \"nova-b\" is invalid: [spec.apiDatabase.database: Invalid value: \"nova_api\": schema nova_api on MariaDB {ns}/openstack-mariadb is already used by Nova {ns}/nova (spec.apiDatabase.database): two Novas on one schema would migrate and delete each other's data, spec.database.database: Invalid value: \"nova\": schema nova on MariaDB {ns}/openstack-mariadb is already used by Nova {ns}/nova (spec.database.database)"
        )),
        "{msg}"
    );
    novas
        .create(
            &dry,
            &serde_json::from_value(unclaimed("nova-b", &ns)).unwrap(),
        )
        .await
        .expect("a Nova on schemas of its own is admitted");
    type Edit = fn(&mut Value);
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "release floor",
            |v| v["spec"]["openStackRelease"] = json!("2025.2"),
            "spec.openStackRelease: Invalid value: \"2025.2\": must be 2026.1 or later: this operator version no longer supports OpenStack releases below 2026.1",
        ),
        (
            "name length",
            |v| v["metadata"]["name"] = json!("n".repeat(42)),
            "name must be at most 41 characters",
        ),
        (
            "name suffix",
            |v| v["metadata"]["name"] = json!("nova-cell0"),
            "metadata.name: Invalid value: \"nova-cell0\": name must not end in \"-cell0\"",
        ),
        (
            "region",
            |v| v["spec"]["region"] = json!("RegionOne\n[DEFAULT]"),
            "spec.region: Invalid value: \"RegionOne\\n[DEFAULT]\": value must not contain a newline or carriage return",
        ),
        (
            "url host",
            |v| v["spec"]["keystoneEndpoint"] = json!("http:///v3"),
            "spec.keystoneEndpoint: Invalid value: must name a host",
        ),
        (
            "console path",
            |v| v["spec"]["consoleProxy"]["gateway"]["path"] = json!("/vnc"),
            "spec.consoleProxy.gateway.path: Invalid value: \"/vnc\": path must be empty or \"/\"",
        ),
        (
            "archive schedule",
            |v| v["spec"]["dbArchive"] = json!({"schedule": "0 25 * * *"}),
            "spec.dbArchive.schedule: Invalid value: \"0 25 * * *\": invalid cron expression: end of range (25) above maximum (23): 25",
        ),
        (
            "extraConfig owned key",
            |v| {
                v["spec"]["extraConfig"] =
                    json!({"DEFAULT": {"transport_url": "rabbit://u:secret@h:5672/"}})
            },
            "spec.extraConfig[DEFAULT][transport_url]: Forbidden: transport_url is managed via spec.messaging",
        ),
        (
            "extraConfig catalog",
            |v| v["spec"]["extraConfig"] = json!({"DEFAULT": {"no_such_option": "1"}}),
            "no such option in the nova 2026.1 option catalog",
        ),
        (
            "extraConfig value type",
            |v| v["spec"]["extraConfig"] = json!({"libvirt": {"rx_queue_size": "300"}}),
            "not one of the choices: [libvirt] rx_queue_size expects one of 256, 512, 1024",
        ),
        (
            "remote compute https",
            |v| {
                v["spec"]["messaging"]["tls"] = json!({"caBundleSecretRef": {"name": "ca"}});
                v["spec"]["remoteCompute"] = json!({"keystoneEndpoint": "https://", "transportURLSecretRef": {"name": "remote"}});
            },
            "spec.remoteCompute.keystoneEndpoint: Invalid value: must name a host",
        ),
        (
            "priority class",
            |v| {
                v["spec"]["scheduler"] =
                    json!({"deployment": {"priorityClassName": "no-such-class"}})
            },
            "spec.scheduler.deployment.priorityClassName: Not found: \"no-such-class\"",
        ),
        (
            "release pattern",
            |v| v["spec"]["openStackRelease"] = json!("latest"),
            "spec.openStackRelease: Invalid value: \"latest\"",
        ),
        (
            "image union",
            |v| v["spec"]["image"]["digest"] = json!(format!("sha256:{}", "a".repeat(64))),
            "exactly one of image.tag or image.digest must be set",
        ),
        (
            "database union",
            |v| v["spec"]["apiDatabase"]["host"] = json!("db.example.com"),
            "exactly one of clusterRef or host must be set",
        ),
        (
            "cache union",
            |v| v["spec"]["cache"]["servers"] = json!(["mc:11211"]),
            "exactly one of clusterRef or servers must be set",
        ),
        (
            "messaging union",
            |v| v["spec"]["messaging"] = json!({}),
            "exactly one of clusterRef or secretRef must be set",
        ),
        (
            "messaging TLS rule",
            |v| v["spec"]["remoteCompute"] = json!({"keystoneEndpoint": "https://k.example.com/v3", "transportURLSecretRef": {"name": "remote"}}),
            "remoteCompute requires messaging.tls",
        ),
        (
            "archive bounds",
            |v| v["spec"]["dbArchive"] = json!({"maxRows": 0}),
            "spec.dbArchive.maxRows",
        ),
        (
            "scheduler bounds",
            |v| v["spec"]["scheduler"] = json!({"workers": 0}),
            "spec.scheduler.workers",
        ),
        (
            "cross-database",
            |v| v["spec"]["apiDatabase"]["database"] = v["spec"]["database"]["database"].clone(),
            "apiDatabase and database must name different schemas",
        ),
        (
            "cell0 name",
            |v| {
                let cell = v["spec"]["database"]["database"]
                    .as_str()
                    .unwrap_or_default();
                v["spec"]["apiDatabase"]["database"] = json!(format!("{cell}_cell0"))
            },
            "apiDatabase must not name the cell0 schema derived from database",
        ),
        (
            "cell0 length",
            |v| v["spec"]["database"]["database"] = json!("c".repeat(59)),
            "database.database must be at most 58 characters",
        ),
        (
            "extraConfig guard",
            |v| v["spec"]["extraConfig"] = json!({"DEFAULT": {"vif_plugging_timeout": "1\ntransport_url = rabbit://u:secret@h/"}}),
            "extraConfig key and value must not contain a newline or carriage return",
        ),
        (
            "empty shared secret name",
            |v| v["spec"]["metadata"]["sharedSecretRef"]["name"] = json!(""),
            "spec.metadata.sharedSecretRef.name",
        ),
        (
            "empty target cluster name",
            |v| v["spec"]["targetClusterRef"] = json!({"name": ""}),
            "spec.targetClusterRef.name",
        ),
        (
            "remote compute without scheme",
            |v| {
                v["spec"]["messaging"]["tls"] = json!({"caBundleSecretRef": {"name": "ca"}});
                v["spec"]["remoteCompute"] = json!({"keystoneEndpoint": "keystone.example.com/v3", "transportURLSecretRef": {"name": "remote"}});
            },
            "spec.remoteCompute.keystoneEndpoint",
        ),
        (
            "vpa resources",
            |v| {
                v["spec"]["metadata"]["deployment"] = json!({"verticalAutoscaling": {"updateMode": "Auto", "minAllowed": {"gpu": "1"}}})
            },
            "minAllowed may only name cpu and memory",
        ),
        (
            "vpa beside hpa",
            |v| {
                v["spec"]["api"] =
                    json!({"deployment": {"verticalAutoscaling": {"updateMode": "Auto"}}});
                v["spec"]["autoscaling"] = json!({"maxReplicas": 5, "targetCPUUtilization": 80});
            },
            "spec.api.deployment.verticalAutoscaling cannot be set while spec.autoscaling scales the same Deployment",
        ),
        (
            "vpa bounds (webhook only)",
            |v| v["spec"]["metadata"]["deployment"] = json!({"verticalAutoscaling": {"updateMode": "Auto", "minAllowed": {"cpu": "2"}, "maxAllowed": {"cpu": "1"}}}),
            "spec.metadata.deployment.verticalAutoscaling.minAllowed[cpu]: Invalid value: \"2\": must not exceed maxAllowed",
        ),
        (
            "harakiri",
            |v| v["spec"]["api"] = json!({"uwsgi": {"harakiri": 25}}),
            "spec.api.uwsgi.harakiri: Invalid value: 25: harakiri (25) must be strictly less than terminationGracePeriodSeconds - preStopSleepSeconds (25)",
        ),
    ];
    for (what, edit, want) in cases {
        let mut v = unclaimed("rejected", &ns);
        edit(&mut v);
        let obj: DynamicObject = serde_json::from_value(v).unwrap();
        let msg = denial(novas.create(&dry, &obj).await);
        assert!(msg.contains(want), "{what}: {msg}");
        assert!(
            !msg.contains("secret@"),
            "{what}: a credential leaked: {msg}"
        );
    }

    // The exact text a `kubectl apply` user reads for the gaps an outside corpus found: the
    // HPA behavior bounds, an unparseable quantity, a gateway without a hostname (the schema
    // reports that one first; the webhook reports the same when the CRD lags its types).
    let denied = "admission webhook \"vnova.nova.openstack.c5c3.io\" denied the request: Nova.nova.openstack.c5c3.io \"rejected\" is invalid: ";
    let exact: Vec<(&str, Edit, String)> = vec![
        (
            "behavior window",
            |v| {
                v["spec"]["autoscaling"] = json!({"maxReplicas": 5, "targetCPUUtilization": 80,
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 3601}}})
            },
            format!("{denied}spec.autoscaling.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 3601: must be less than or equal to 3600"),
        ),
        (
            "behavior policies",
            |v| {
                v["spec"]["autoscaling"] = json!({"maxReplicas": 5, "targetCPUUtilization": 80,
                    "behavior": {"scaleUp": {"stabilizationWindowSeconds": -1, "selectPolicy": "Sometimes",
                        "policies": [{"type": "Pods", "value": 0, "periodSeconds": 1801}]}}})
            },
            format!("{denied}[spec.autoscaling.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: -1: must be greater than or equal to zero, spec.autoscaling.behavior.scaleUp.selectPolicy: Unsupported value: \"Sometimes\": supported values: \"Disabled\", \"Max\", \"Min\", spec.autoscaling.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero, spec.autoscaling.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800]"),
        ),
        (
            "unparseable quantity",
            |v| v["spec"]["api"] = json!({"deployment": {"resources": {"requests": {"cpu": "lots"}}}}),
            format!("{denied}spec.api.deployment.resources.requests.cpu: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
        ),
        (
            "gateway without hostname",
            |v| v["spec"]["gateway"] = json!({"parentRef": {"name": "openstack-gw"}}),
            "Nova.nova.openstack.c5c3.io \"rejected\" is invalid: [spec.gateway.hostname: Required value, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]".to_owned(),
        ),
        (
            "cache backend",
            |v| v["spec"]["cache"]["backend"] = json!("dogpile.cache.pymemcache\n[x]"),
            format!("{denied}spec.cache.backend: Invalid value: \"dogpile.cache.pymemcache\\n[x]\": value must not contain a newline or carriage return: it is rendered verbatim into the service configuration file, so a newline injects arbitrary config lines"),
        ),
        (
            "brownfield host with a port",
            |v| v["spec"]["apiDatabase"] = json!({"host": "db.example.com:3307", "database": "nova_api", "secretRef": {"name": "nova-api-db"}}),
            format!("{denied}spec.apiDatabase.host: Invalid value: \"db.example.com:3307\": host must not include a port: set the port in spec.apiDatabase.port"),
        ),
        (
            "console hostname",
            |v| v["spec"]["consoleProxy"]["gateway"]["hostname"] = json!("Console.example.com"),
            format!("{denied}spec.consoleProxy.gateway.hostname: Invalid value: \"Console.example.com\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        ),
    ];
    for (what, edit, want) in exact {
        let mut v = unclaimed("rejected", &ns);
        edit(&mut v);
        let obj: DynamicObject = serde_json::from_value(v).unwrap();
        assert_eq!(denial(novas.create(&dry, &obj).await), want, "{what}");
    }
    // In-place resize is a VPA update mode the CRD and the webhook both accept.
    let mut v = unclaimed("in-place", &ns);
    v["spec"]["metadata"]["deployment"] =
        json!({"verticalAutoscaling": {"updateMode": "InPlaceOrRecreate"}});
    novas
        .create(&dry, &serde_json::from_value(v).unwrap())
        .await
        .expect("InPlaceOrRecreate is admitted");

    // NovaCompute: the catalog of the referenced Nova's release, read through the API.
    let pools_res = resource("NovaCompute", "novacomputes");
    let pools: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &pools_res);
    let pool = pools
        .patch(
            "pool-a",
            &apply,
            &Patch::Apply(example(EXAMPLE_POOL, "pool-a", &ns)),
        )
        .await
        .expect("the example pool is admitted");
    assert_eq!(
        pool.data["spec"]["nodeSelector"],
        json!({"openstack.c5c3.io/nova-compute-pool": "a"})
    );
    let mut bad = example(EXAMPLE_POOL, "pool-b", &ns);
    bad["spec"]["extraConfig"]["libvirt"] =
        json!({"no_such_option": "1", "connection_uri": "qemu+tcp://elsewhere/system"});
    let msg = denial(
        pools
            .create(&dry, &serde_json::from_value(bad).unwrap())
            .await,
    );
    assert!(msg.contains("spec.extraConfig[libvirt][no_such_option]: Invalid value: \"no_such_option\": no such option in the nova 2026.1 option catalog"), "{msg}");
    assert!(msg.contains("spec.extraConfig[libvirt][connection_uri]: Forbidden: connection_uri is managed via the /run/libvirt host mount"), "{msg}");

    unregister_webhooks(&client, &name)
        .await
        .expect("unregister");
}
