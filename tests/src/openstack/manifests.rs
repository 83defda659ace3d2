//! The objects of the shared OpenStack deployment, rendered without a cluster: MariaDB,
//! RabbitMQ and memcached from the Debian-package images, Keystone and Placement from the nova
//! image of the release, each a Deployment with a Service in the OpenStack namespace. The
//! settings follow `spec/real-openstack.md` ("Starting each service").

use serde_json::{Value, json};

use super::{Passwords, Ports};
use crate::images;

/// The namespace the shared deployment lives in.
pub const NAMESPACE: &str = "openstack";
/// Service names, as the sample CR's cluster references resolve them.
pub const MARIADB: &str = "openstack-mariadb";
pub const RABBITMQ: &str = "openstack-rabbitmq";
pub const MEMCACHED: &str = "openstack-memcached";
pub const KEYSTONE: &str = "keystone";
pub const PLACEMENT: &str = "placement";

/// The Secret of the https listeners' certificate (`tls.crt`, `tls.key`) and its CA (`ca.crt`).
const TLS_SECRET: &str = "openstack-tls";

/// `http://<service>.openstack.svc.cluster.local:<port>`.
pub fn service_url(service: &str, port: u16) -> String {
    format!("http://{service}.{NAMESPACE}.svc.cluster.local:{port}")
}

/// `https://<service>.openstack.svc.cluster.local:<port>`.
fn service_tls_url(service: &str, port: u16) -> String {
    format!("https://{service}.{NAMESPACE}.svc.cluster.local:{port}")
}

/// The Keystone v3 endpoint every pod uses.
pub fn keystone_url() -> String {
    format!("{}/v3", service_url(KEYSTONE, Ports::KEYSTONE))
}

/// The Keystone v3 endpoint over https. The catalog names only the http listeners (one region,
/// so no client picks an https endpoint it has no CA for): a Nova calls the https ones through
/// `spec.keystoneEndpoint` and `spec.endpoints.placement.override`, with `spec.tls`.
pub fn keystone_tls_url() -> String {
    format!("{}/v3", service_tls_url(KEYSTONE, Ports::KEYSTONE_TLS))
}

/// The Placement root over https.
pub fn placement_tls_url() -> String {
    service_tls_url(PLACEMENT, Ports::PLACEMENT_TLS)
}

/// The names the https listeners' certificate is issued for.
pub fn tls_names() -> Vec<String> {
    [KEYSTONE, PLACEMENT]
        .iter()
        .flat_map(|s| {
            [
                format!("{s}.{NAMESPACE}.svc"),
                format!("{s}.{NAMESPACE}.svc.cluster.local"),
            ]
        })
        .collect()
}

fn dsn(user: &str, password: &str, database: &str) -> String {
    format!(
        "mysql+pymysql://{user}:{password}@{MARIADB}.{NAMESPACE}.svc.cluster.local:{}/{database}?charset=utf8",
        Ports::MARIADB
    )
}

fn labels(app: &str) -> Value {
    json!({ "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "nova-test-openstack" })
}

/// A single-replica Deployment, its Service, and the pod spec given.
fn workload(app: &str, port: u16, pod_spec: Value) -> [Value; 2] {
    workload_in(NAMESPACE, app, &[("main", port)], pod_spec)
}

fn workload_in(namespace: &str, app: &str, ports: &[(&str, u16)], pod_spec: Value) -> [Value; 2] {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(name, port)| json!({ "name": name, "port": port, "targetPort": port }))
        .collect();
    [
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": app, "namespace": namespace, "labels": labels(app) },
            "spec": {
                "replicas": 1,
                "strategy": { "type": "Recreate" },
                "selector": { "matchLabels": labels(app) },
                "template": { "metadata": { "labels": labels(app) }, "spec": pod_spec }
            }
        }),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": app, "namespace": namespace, "labels": labels(app) },
            "spec": { "selector": labels(app), "ports": ports }
        }),
    ]
}

fn secret(name: &str, data: Value) -> Value {
    secret_in(NAMESPACE, name, data)
}

fn secret_in(namespace: &str, name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": name, "namespace": namespace },
        "type": "Opaque", "stringData": data
    })
}

fn tcp_ready(port: u16) -> Value {
    json!({ "tcpSocket": { "port": port }, "periodSeconds": 1, "failureThreshold": 600 })
}

/// The https listeners' certificate and the CA that issued it (the test makes both).
#[derive(Clone)]
pub(crate) struct Tls {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls(..)")
    }
}

impl Tls {
    /// A new CA and a serving certificate for [`tls_names`].
    pub(crate) fn generate() -> crate::Result<Self> {
        let failed = |e| crate::control_plane::invalid("making the OpenStack TLS certificate", e);
        let ca = nova_certs::CertificateAuthority::new("nova-test-openstack CA").map_err(failed)?;
        let names = tls_names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let issued = ca.issue_serving(names[0], &names).map_err(failed)?;
        Ok(Self {
            ca_pem: ca.cert_pem().to_owned(),
            cert_pem: issued.cert_pem,
            key_pem: issued.key_pem,
        })
    }
}

/// Every object, in apply order.
pub(crate) fn all(release: &str, pw: &Passwords, tls: &Tls) -> Vec<Value> {
    let mut objects = vec![secret(
        TLS_SECRET,
        json!({ "tls.crt": tls.cert_pem, "tls.key": tls.key_pem, "ca.crt": tls.ca_pem }),
    )];
    objects.extend(mariadb(pw));
    objects.extend(broker(NAMESPACE, RABBITMQ, &pw.rabbitmq));
    objects.extend(workload(
        MEMCACHED,
        Ports::MEMCACHED,
        json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "memcached", "image": images::MEMCACHED_IMAGE, "imagePullPolicy": "Never",
                "args": ["-l", "0.0.0.0", "-p", Ports::MEMCACHED.to_string(), "-U", "0", "-m", "64"],
                "readinessProbe": tcp_ready(Ports::MEMCACHED)
            }]
        }),
    ));
    objects.push(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "openstack-wsgi", "namespace": NAMESPACE },
        "data": { "wsgi_app.py": include_str!("wsgi_app.py") }
    }));
    objects.extend(keystone(release, pw));
    objects.extend(placement(release, pw));
    objects
}

fn mariadb(pw: &Passwords) -> Vec<Value> {
    let init = format!(
        "CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '{root}';\n\
         GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;\n\
         CREATE DATABASE IF NOT EXISTS keystone;\n\
         CREATE USER IF NOT EXISTS 'keystone'@'%' IDENTIFIED BY '{keystone}';\n\
         GRANT ALL PRIVILEGES ON keystone.* TO 'keystone'@'%';\n\
         CREATE DATABASE IF NOT EXISTS placement;\n\
         CREATE USER IF NOT EXISTS 'placement'@'%' IDENTIFIED BY '{placement}';\n\
         GRANT ALL PRIVILEGES ON placement.* TO 'placement'@'%';\n\
         FLUSH PRIVILEGES;\n",
        root = pw.mariadb_root,
        keystone = pw.keystone_db,
        placement = pw.placement_db,
    );
    let cnf = format!(
        "[mysqld]\nuser=root\ndatadir=/var/lib/mysql\nsocket=/tmp/mysqld.sock\npid-file=/tmp/mysqld.pid\n\
         bind-address=0.0.0.0\nport={port}\nskip-name-resolve\nskip-log-bin\ncharacter-set-server=utf8mb4\n\
         max_connections=1000\nperformance_schema=OFF\ninnodb_flush_log_at_trx_commit=0\ninnodb_doublewrite=0\n\
         innodb_flush_method=O_DIRECT_NO_FSYNC\n",
        port = Ports::MARIADB
    );
    let mut objects = vec![
        secret(
            "openstack-mariadb-init",
            json!({ "init.sql": init, "my.cnf": cnf }),
        ),
        secret(
            "openstack-mariadb-root",
            json!({ "username": "root", "password": pw.mariadb_root }),
        ),
    ];
    objects.extend(workload(
        MARIADB,
        Ports::MARIADB,
        json!({
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "mariadb", "image": images::MARIADB_IMAGE, "imagePullPolicy": "Never",
                "command": ["sh", "-c",
                    "mariadb-install-db --defaults-file=/etc/mariadb-init/my.cnf --auth-root-authentication-method=normal \
                     --skip-test-db >/dev/null && exec mariadbd --defaults-file=/etc/mariadb-init/my.cnf \
                     --init-file=/etc/mariadb-init/init.sql"],
                "readinessProbe": tcp_ready(Ports::MARIADB),
                "volumeMounts": [
                    { "name": "init", "mountPath": "/etc/mariadb-init", "readOnly": true },
                    { "name": "data", "mountPath": "/var/lib/mysql" }
                ]
            }],
            "volumes": [
                { "name": "init", "secret": { "secretName": "openstack-mariadb-init" } },
                { "name": "data", "emptyDir": {} }
            ]
        }),
    ));
    objects
}

/// A RabbitMQ broker named `name` in `namespace` (its Deployment and Service, and the Secret
/// `<name>-config` holding its configuration), whose user is [`super::RABBITMQ_USER`] with
/// `password` on vhost `/`: the shared one, and each namespace's of the simulated
/// rabbitmq-cluster-operator (`crate::simulated`).
pub(crate) fn broker(namespace: &str, name: &str, password: &str) -> Vec<Value> {
    let conf = format!(
        "listeners.tcp.default = {port}\nloopback_users = none\ndefault_user = {user}\ndefault_pass = {pass}\n\
         default_vhost = /\nlog.console = true\nlog.file = false\n",
        port = Ports::RABBITMQ,
        user = super::RABBITMQ_USER,
        pass = password,
    );
    let config = format!("{name}-config");
    let mut objects = vec![secret_in(
        namespace,
        &config,
        json!({ "rabbitmq.conf": conf, "enabled_plugins": "[].\n" }),
    )];
    let env = |k: &str, v: &str| json!({ "name": k, "value": v });
    objects.extend(workload_in(
        namespace,
        name,
        &[("main", Ports::RABBITMQ)],
        json!({
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "rabbitmq", "image": images::RABBITMQ_IMAGE, "imagePullPolicy": "Never",
                "command": ["/usr/lib/rabbitmq/bin/rabbitmq-server"],
                "env": [
                    env("HOME", "/var/lib/rabbitmq"),
                    env("RABBITMQ_NODENAME", "rabbit@localhost"),
                    env("RABBITMQ_MNESIA_BASE", "/var/lib/rabbitmq/mnesia"),
                    env("RABBITMQ_LOG_BASE", "/var/lib/rabbitmq/log"),
                    env("RABBITMQ_CONFIG_FILE", "/etc/rabbitmq-config/rabbitmq.conf"),
                    env("RABBITMQ_ENABLED_PLUGINS_FILE", "/etc/rabbitmq-config/enabled_plugins")
                ],
                "readinessProbe": tcp_ready(Ports::RABBITMQ),
                "volumeMounts": [
                    { "name": "config", "mountPath": "/etc/rabbitmq-config", "readOnly": true },
                    { "name": "data", "mountPath": "/var/lib/rabbitmq" }
                ]
            }],
            "volumes": [
                { "name": "config", "secret": { "secretName": config } },
                { "name": "data", "emptyDir": {} }
            ]
        }),
    ));
    objects
}

/// A WSGI service's two listeners: plain http, and https with the [`TLS_SECRET`] certificate.
#[derive(Clone, Copy)]
struct Listeners {
    http: u16,
    https: u16,
}

/// The gunicorn command serving the WSGI app on `port`: with `workers` processes of four
/// threads, and TLS when `tls` names the certificate directory.
fn gunicorn(port: u16, workers: u32, tls: Option<&str>) -> Value {
    let mut command = vec![
        "gunicorn".to_owned(),
        "--bind".to_owned(),
        format!("0.0.0.0:{port}"),
        "--workers".to_owned(),
        workers.to_string(),
        "--threads".to_owned(),
        "4".to_owned(),
        "--no-control-socket".to_owned(),
        "--graceful-timeout".to_owned(),
        "3".to_owned(),
    ];
    if let Some(dir) = tls {
        command.extend([
            "--certfile".to_owned(),
            format!("{dir}/tls.crt"),
            "--keyfile".to_owned(),
            format!("{dir}/tls.key"),
        ]);
    }
    command.extend([
        "--chdir".to_owned(),
        "/etc/openstack-wsgi".to_owned(),
        "wsgi_app:application".to_owned(),
    ]);
    json!(command)
}

/// Where the https listener reads its certificate.
const TLS_DIR: &str = "/etc/openstack-tls";

/// The pod spec of a WSGI service of the nova image: an init container that migrates (and
/// bootstraps), then gunicorn serving `module` through the argv-clearing wrapper, once over
/// http and once over https (a second container sharing the config and state, so both serve
/// the same service: Keystone's fernet keys live in the shared state directory).
fn wsgi_pod(
    release: &str,
    name: &str,
    module: &str,
    listeners: Listeners,
    init_script: &str,
    config: (&str, &str),
    env: Value,
) -> Value {
    let image = images::nova_image(release);
    let mounts = json!([
        { "name": "config", "mountPath": config.1, "readOnly": true },
        { "name": "wsgi", "mountPath": "/etc/openstack-wsgi", "readOnly": true },
        { "name": "state", "mountPath": "/var/lib/openstack-state" },
        { "name": "tmp", "mountPath": "/tmp" }
    ]);
    let mut tls_mounts = mounts.clone();
    if let Some(list) = tls_mounts.as_array_mut() {
        list.push(json!({ "name": "tls", "mountPath": TLS_DIR, "readOnly": true }));
    }
    json!({
        "terminationGracePeriodSeconds": 3,
        "securityContext": { "runAsUser": 42424, "runAsGroup": 42424, "fsGroup": 42424 },
        "initContainers": [{
            "name": format!("{name}-init"), "image": image, "imagePullPolicy": "Never",
            "command": ["sh", "-c", init_script], "env": env, "volumeMounts": mounts
        }],
        "containers": [{
            "name": name, "image": image, "imagePullPolicy": "Never",
            // Two processes of four threads: the real tier's tests run side by side, and with one
            // sync worker a token request waited over 30 s behind the other Novas' calls.
            "command": gunicorn(listeners.http, 2, None),
            "env": [{ "name": "WSGI_MODULE", "value": module }],
            "readinessProbe": tcp_ready(listeners.http),
            "volumeMounts": mounts
        }, {
            // One process: only the Novas with spec.tls call it.
            "name": format!("{name}-tls"), "image": image, "imagePullPolicy": "Never",
            "command": gunicorn(listeners.https, 1, Some(TLS_DIR)),
            "env": [{ "name": "WSGI_MODULE", "value": module }],
            "readinessProbe": tcp_ready(listeners.https),
            "volumeMounts": tls_mounts
        }],
        "volumes": [
            { "name": "tls", "secret": { "secretName": TLS_SECRET, "items": [
                { "key": "tls.crt", "path": "tls.crt" }, { "key": "tls.key", "path": "tls.key" }] } },
            { "name": "config", "secret": { "secretName": config.0 } },
            { "name": "wsgi", "configMap": { "name": "openstack-wsgi" } },
            { "name": "state", "emptyDir": {} },
            { "name": "tmp", "emptyDir": {} }
        ]
    })
}

/// Retries a migration until MariaDB answers (it starts beside this pod).
fn retried(command: &str) -> String {
    format!("i=0; until {command}; do i=$((i+1)); [ $i -lt 120 ] || exit 1; sleep 1; done")
}

fn keystone(release: &str, pw: &Passwords) -> Vec<Value> {
    let conf = format!(
        "[DEFAULT]\nuse_stderr = true\n\n[database]\nconnection = {db}\n\n[token]\nprovider = fernet\n\n\
         [fernet_tokens]\nkey_repository = /var/lib/openstack-state/fernet-keys\n\n\
         [fernet_receipts]\nkey_repository = /var/lib/openstack-state/fernet-keys\n\n\
         [credential]\nkey_repository = /var/lib/openstack-state/credential-keys\n\n\
         [identity]\npassword_hash_rounds = 4\n",
        db = dsn("keystone", &pw.keystone_db, "keystone"),
    );
    let url = keystone_url();
    let script = format!(
        "set -e; {sync}; \
         keystone-manage fernet_setup --keystone-user nova --keystone-group nova; \
         keystone-manage credential_setup --keystone-user nova --keystone-group nova; \
         keystone-manage bootstrap --bootstrap-username admin --bootstrap-project-name admin \
           --bootstrap-role-name admin --bootstrap-service-name keystone --bootstrap-region-id RegionOne \
           --bootstrap-admin-url {url} --bootstrap-internal-url {url} --bootstrap-public-url {url}",
        sync = retried("keystone-manage db_sync"),
    );
    let env = json!([{ "name": "OS_BOOTSTRAP_PASSWORD",
        "valueFrom": { "secretKeyRef": { "name": "keystone-admin", "key": "password" } } }]);
    let mut objects = vec![
        secret("keystone-config", json!({ "keystone.conf": conf })),
        secret(
            "keystone-admin",
            json!({ "username": "admin", "password": pw.admin }),
        ),
    ];
    let listeners = Listeners {
        http: Ports::KEYSTONE,
        https: Ports::KEYSTONE_TLS,
    };
    objects.extend(wsgi_workload(
        KEYSTONE,
        listeners,
        wsgi_pod(
            release,
            "keystone",
            "keystone.wsgi.api",
            listeners,
            &script,
            ("keystone-config", "/etc/keystone"),
            env,
        ),
    ));
    objects
}

/// A WSGI service's Deployment and its Service with both listeners.
fn wsgi_workload(app: &str, listeners: Listeners, pod_spec: Value) -> [Value; 2] {
    workload_in(
        NAMESPACE,
        app,
        &[("main", listeners.http), ("https", listeners.https)],
        pod_spec,
    )
}

fn placement(release: &str, pw: &Passwords) -> Vec<Value> {
    let conf = format!(
        "[DEFAULT]\nuse_stderr = true\n\n[placement_database]\nconnection = {db}\n\n[api]\nauth_strategy = keystone\n\n\
         [keystone_authtoken]\nwww_authenticate_uri = {ks}\nauth_url = {ks}\nauth_type = password\n\
         project_domain_name = Default\nuser_domain_name = Default\nproject_name = service\n\
         username = placement\npassword = {pass}\n",
        db = dsn("placement", &pw.placement_db, "placement"),
        ks = keystone_url(),
        pass = pw.placement_user,
    );
    let mut objects = vec![secret(
        "placement-config",
        json!({ "placement.conf": conf }),
    )];
    let listeners = Listeners {
        http: Ports::PLACEMENT,
        https: Ports::PLACEMENT_TLS,
    };
    objects.extend(wsgi_workload(
        PLACEMENT,
        listeners,
        wsgi_pod(
            release,
            "placement",
            "placement.wsgi.api",
            listeners,
            &retried("placement-manage db sync"),
            ("placement-config", "/etc/placement"),
            json!([]),
        ),
    ));
    objects
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pw() -> Passwords {
        Passwords::planted("PLANTED")
    }

    fn tls() -> Tls {
        Tls {
            ca_pem: "CA".into(),
            cert_pem: "CERT".into(),
            key_pem: "PLANTED-KEY".into(),
        }
    }

    #[test]
    fn every_object_lives_in_the_openstack_namespace_and_secrets_hold_the_passwords() {
        let objects = all("2026.1", &pw(), &tls());
        for o in &objects {
            assert_eq!(o["metadata"]["namespace"], NAMESPACE, "{o}");
            // A password may only ever appear in a Secret.
            if o["kind"] != "Secret" {
                assert!(!o.to_string().contains("PLANTED"), "{o}");
            }
        }
        let services: Vec<&str> = objects
            .iter()
            .filter(|o| o["kind"] == "Service")
            .filter_map(|o| o["metadata"]["name"].as_str())
            .collect();
        assert_eq!(
            services,
            [MARIADB, RABBITMQ, MEMCACHED, KEYSTONE, PLACEMENT]
        );
    }

    #[test]
    fn the_wsgi_services_run_the_release_image_as_nova() {
        let objects = all("2026.2", &pw(), &tls());
        let keystone = objects
            .iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == KEYSTONE)
            .expect("keystone");
        let spec = &keystone["spec"]["template"]["spec"];
        assert_eq!(spec["containers"][0]["image"], "ghcr.io/c5c3/nova:2026.2");
        assert_eq!(spec["securityContext"]["runAsUser"], 42424);
        assert_eq!(
            keystone_url(),
            "http://keystone.openstack.svc.cluster.local:5000/v3"
        );
    }

    #[test]
    fn keystone_and_placement_listen_over_http_and_https_with_the_made_certificate() {
        let objects = all("2026.1", &pw(), &tls());
        for (app, https) in [
            (KEYSTONE, Ports::KEYSTONE_TLS),
            (PLACEMENT, Ports::PLACEMENT_TLS),
        ] {
            let service = objects
                .iter()
                .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == app)
                .expect("a Service");
            assert_eq!(service["spec"]["ports"][1]["port"], https, "{app}");
            let deployment = objects
                .iter()
                .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == app)
                .expect("a Deployment");
            let tls = &deployment["spec"]["template"]["spec"]["containers"][1];
            let command = tls["command"].to_string();
            assert!(command.contains("--certfile"), "{command}");
            assert!(command.contains(&format!("0.0.0.0:{https}")), "{command}");
        }
        let secret = objects
            .iter()
            .find(|o| o["metadata"]["name"] == TLS_SECRET)
            .expect("the TLS Secret");
        assert_eq!(secret["stringData"]["ca.crt"], "CA");
        assert_eq!(
            keystone_tls_url(),
            "https://keystone.openstack.svc.cluster.local:5443/v3"
        );
        assert!(tls_names().contains(&"placement.openstack.svc.cluster.local".to_owned()));
    }
}
