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

/// `http://<service>.openstack.svc.cluster.local:<port>`.
pub fn service_url(service: &str, port: u16) -> String {
    format!("http://{service}.{NAMESPACE}.svc.cluster.local:{port}")
}

/// The Keystone v3 endpoint every pod uses.
pub fn keystone_url() -> String {
    format!("{}/v3", service_url(KEYSTONE, Ports::KEYSTONE))
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
    workload_in(NAMESPACE, app, port, pod_spec)
}

fn workload_in(namespace: &str, app: &str, port: u16, pod_spec: Value) -> [Value; 2] {
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
            "spec": { "selector": labels(app), "ports": [{ "name": "main", "port": port, "targetPort": port }] }
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

/// Every object, in apply order.
pub(crate) fn all(release: &str, pw: &Passwords) -> Vec<Value> {
    let mut objects = Vec::new();
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
        Ports::RABBITMQ,
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

/// The pod spec of a WSGI service of the nova image: an init container that migrates (and
/// bootstraps), then gunicorn serving `module` through the argv-clearing wrapper.
fn wsgi_pod(
    release: &str,
    name: &str,
    module: &str,
    port: u16,
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
            "command": ["gunicorn", "--bind", format!("0.0.0.0:{port}"), "--workers", "2", "--threads", "4", "--no-control-socket",
                        "--graceful-timeout", "3", "--chdir", "/etc/openstack-wsgi", "wsgi_app:application"],
            "env": [{ "name": "WSGI_MODULE", "value": module }],
            "readinessProbe": tcp_ready(port),
            "volumeMounts": mounts
        }],
        "volumes": [
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
    objects.extend(workload(
        KEYSTONE,
        Ports::KEYSTONE,
        wsgi_pod(
            release,
            "keystone",
            "keystone.wsgi.api",
            Ports::KEYSTONE,
            &script,
            ("keystone-config", "/etc/keystone"),
            env,
        ),
    ));
    objects
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
    objects.extend(workload(
        PLACEMENT,
        Ports::PLACEMENT,
        wsgi_pod(
            release,
            "placement",
            "placement.wsgi.api",
            Ports::PLACEMENT,
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

    #[test]
    fn every_object_lives_in_the_openstack_namespace_and_secrets_hold_the_passwords() {
        let objects = all("2026.1", &pw());
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
        let objects = all("2026.2", &pw());
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
}
