//! Simulated infrastructure operators: the MariaDB, RabbitMQ and External Secrets operators do
//! not run here, so these small controllers play their part with real effects, and say so in
//! their field managers, condition messages and logs.
//!
//! - **simulated mariadb-operator**: a `Database`, `User` or `Grant` (`k8s.mariadb.com/v1alpha1`)
//!   creates the real schema, user (password from its `passwordSecretKeyRef`) or grant in the
//!   shared MariaDB, then reports `Ready`. Once a `Database` or `User` it created is deleted, it
//!   honours the object's last seen `spec.cleanupPolicy` as the real operator's finalizer does:
//!   `Delete` (also its default when unset) drops the schema or the user, `Skip` leaves it and
//!   its rows. It sets no finalizer (a namespace deleted after the simulation stopped must not
//!   hang), so a deletion while it is not running is not cleaned up; a `Grant`'s privileges go
//!   with its user.
//! - **simulated rabbitmq-cluster-operator**: a `RabbitmqCluster` gets a real broker of its own,
//!   a RabbitMQ Deployment and Service named after it in its namespace, as the real operator
//!   gives it a StatefulSet, and once that broker is available a `<name>-default-user` Secret
//!   (username, password, host, port) and the status reference to it. Nova's RPC topics
//!   (`conductor`, `scheduler`, `compute.<host>`) are the same in every cell, so two Novas on one
//!   vhost answer each other's calls: a broker per cluster keeps the tests of a run apart. In
//!   the OpenStack namespace itself (`scripts/run.sh`) the cluster is the shared broker.
//! - **simulated external-secrets**: every `SecretStore`/`ClusterSecretStore` is reported `Ready`
//!   (the credential Secrets themselves are written directly by the tests).
//! - **simulated OVN chassis** ([`ovn_chassis`]): the real node runs no Open vSwitch, so a pod
//!   answers the compute pools' chassis gate on the host's OVSDB socket.
//!
//! They run on a thread of their own (each test has its own runtime) and poll every 500 ms.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};

use crate::openstack::{NAMESPACE, OpenStack, Ports, RABBITMQ_USER, available, write_secret};
use crate::{Error, Result, kube_err};

/// Runs the simulated operators until dropped.
pub struct SimulatedOperators {
    stop: Arc<AtomicBool>,
}

impl Drop for SimulatedOperators {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Starts the simulated operators for every namespace of the control plane `os` runs in.
pub fn start(os: &OpenStack) -> Result<SimulatedOperators> {
    let stop = Arc::new(AtomicBool::new(false));
    let os = os.clone();
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("nova-test-simulated-operators".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("[simulated operators] cannot start a runtime: {e}");
                    return;
                }
            };
            runtime.block_on(async move {
                let mut done = Done::new();
                let mut created = Created::new();
                while !flag.load(Ordering::SeqCst) {
                    if let Err(e) = reconcile_all(&os, &mut done, &mut created).await {
                        eprintln!("[simulated operators] {e}");
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            });
        })
        .map_err(crate::io_err("starting the simulated operators' thread"))?;
    Ok(SimulatedOperators { stop })
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The (uid, generation) pairs reconciled successfully: some CRDs prune `observedGeneration`
/// from their conditions, so the status alone cannot say a generation was handled.
type Done = std::collections::HashSet<(String, i64)>;

/// The MariaDB objects whose SQL side the simulated operator created, by (kind, UID): what it
/// cleans up once they are gone.
type Created = std::collections::HashMap<(String, String), DynamicObject>;

async fn reconcile_all(os: &OpenStack, done: &mut Done, created: &mut Created) -> Result<()> {
    let client = os.client()?;
    for (kind, plural) in [
        ("Database", "databases"),
        ("User", "users"),
        ("Grant", "grants"),
    ] {
        let ar = resource("k8s.mariadb.com", "v1alpha1", kind, plural);
        clean_up_deleted(os, &client, &ar, created).await?;
        for object in pending(&client, &ar, done).await? {
            let outcome = mariadb_effect(os, &client, kind, &object).await;
            if outcome.is_ok() {
                created.insert((kind.to_owned(), key(&object).0), object.clone());
            }
            report(
                &client,
                &ar,
                &object,
                "simulated-mariadb-operator",
                outcome,
                done,
            )
            .await?;
        }
    }
    let ar = resource(
        "rabbitmq.com",
        "v1beta1",
        "RabbitmqCluster",
        "rabbitmqclusters",
    );
    for object in pending(&client, &ar, done).await? {
        let outcome = match broker(os, &client, &object).await {
            // Still starting: the status stays as it is until the broker answers.
            Ok(false) => continue,
            Ok(true) => default_user(&client, &object, os.rabbitmq_password()).await,
            Err(e) => Err(e),
        };
        report(
            &client,
            &ar,
            &object,
            "simulated-rabbitmq-cluster-operator",
            outcome,
            done,
        )
        .await?;
    }
    for (kind, plural) in [
        ("SecretStore", "secretstores"),
        ("ClusterSecretStore", "clustersecretstores"),
    ] {
        let ar = resource("external-secrets.io", "v1", kind, plural);
        for object in pending(&client, &ar, done).await? {
            report(
                &client,
                &ar,
                &object,
                "simulated-external-secrets",
                Ok(json!({})),
                done,
            )
            .await?;
        }
    }
    Ok(())
}

fn key(object: &DynamicObject) -> (String, i64) {
    (
        object.metadata.uid.clone().unwrap_or_default(),
        object.metadata.generation.unwrap_or(0),
    )
}

/// Carries out the cleanup policy of every created object of `ar`'s kind that is gone: under
/// `Delete` (or unset) the schema or user is dropped, under `Skip` nothing is.
async fn clean_up_deleted(
    os: &OpenStack,
    client: &kube::Client,
    ar: &ApiResource,
    created: &mut Created,
) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    let mut live = std::collections::HashSet::new();
    for object in api
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing {}", ar.plural)))?
        .items
        .into_iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
    {
        let Some(uid) = object.metadata.uid.clone() else {
            continue;
        };
        // The policy honoured is the one last seen, as the real operator's finalizer reads
        // the object it deletes: a spec edited after the object was reconciled counts.
        if let Some(kept) = created.get_mut(&(ar.kind.clone(), uid.clone())) {
            *kept = object;
        }
        live.insert(uid);
    }
    let gone: Vec<(String, String)> = created
        .keys()
        .filter(|(kind, uid)| *kind == ar.kind && !live.contains(uid))
        .cloned()
        .collect();
    for slot in gone {
        let Some(object) = created.remove(&slot) else {
            continue;
        };
        let meta_name = object.metadata.name.clone().unwrap_or_default();
        let ns = object.metadata.namespace.clone().unwrap_or_default();
        let policy = object.data["spec"]["cleanupPolicy"]
            .as_str()
            .unwrap_or("Delete");
        let sql = match (ar.kind.as_str(), policy) {
            (_, "Skip") => None,
            ("Database", _) => Some(format!(
                "DROP DATABASE IF EXISTS `{}`;\n",
                sql_name(&object)?
            )),
            ("User", _) => Some(format!(
                "DROP USER IF EXISTS {}@{};\n",
                literal(&sql_name(&object)?),
                literal(object.data["spec"]["host"].as_str().unwrap_or("%"))
            )),
            _ => None,
        };
        eprintln!(
            "[simulated-mariadb-operator] {} {ns}/{meta_name} deleted, cleanupPolicy {policy}: {}",
            ar.kind,
            if sql.is_some() {
                "dropping it"
            } else {
                "keeping it"
            }
        );
        if let Some(sql) = sql {
            let job = job_name(&format!("drop{}", ar.kind), &ns, &meta_name);
            os.run_sql(&job, &sql).await?;
        }
    }
    Ok(())
}

/// The SQL name of a Database or User: `spec.name`, else the object's name.
fn sql_name(object: &DynamicObject) -> Result<String> {
    let meta_name = object.metadata.name.clone().unwrap_or_default();
    identifier(
        "spec.name",
        object.data["spec"]["name"].as_str().unwrap_or(&meta_name),
    )
}

/// Objects whose current generation was not reconciled successfully yet.
async fn pending(
    client: &kube::Client,
    ar: &ApiResource,
    done: &Done,
) -> Result<Vec<DynamicObject>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing {}", ar.plural)))?;
    Ok(list
        .items
        .into_iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none() && !done.contains(&key(o)))
        .collect())
}

/// Writes the Ready condition (and any extra status) of one simulated reconcile.
async fn report(
    client: &kube::Client,
    ar: &ApiResource,
    object: &DynamicObject,
    manager: &str,
    outcome: Result<Value>,
    done: &mut Done,
) -> Result<()> {
    if outcome.is_ok() {
        done.insert(key(object));
    }
    let name = object.metadata.name.clone().unwrap_or_default();
    let ns = object.metadata.namespace.clone();
    let generation = object.metadata.generation.unwrap_or(0);
    let (mut status, ready, reason, message) = match outcome {
        Ok(extra) => (
            extra,
            "True",
            "Created",
            format!("{} reconciled (simulated by nova-test-harness)", ar.kind),
        ),
        Err(e) => (
            json!({}),
            "False",
            "Failed",
            format!("simulated by nova-test-harness: {e}"),
        ),
    };
    eprintln!(
        "[{manager}] {} {}/{name}: Ready={ready}: {message}",
        ar.kind,
        ns.as_deref().unwrap_or("")
    );
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    status["conditions"] = json!([{ "type": "Ready", "status": ready, "reason": reason, "message": message,
                                    "lastTransitionTime": now, "observedGeneration": generation }]);
    let api: Api<DynamicObject> = match &ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .map(|_| ())
    .map_err(kube_err(format!(
        "writing the status of {} {name}",
        ar.kind
    )))
}

/// An SQL identifier the simulated operator accepts (the real one quotes; this one refuses).
fn identifier(field: &str, value: &str) -> Result<String> {
    if !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        Ok(value.to_owned())
    } else {
        Err(Error::Invalid {
            context: format!("field {field}"),
            message: format!("{value:?} is not a plain SQL identifier"),
        })
    }
}

/// A single-quoted SQL string literal.
fn literal(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

async fn mariadb_effect(
    os: &OpenStack,
    client: &kube::Client,
    kind: &str,
    object: &DynamicObject,
) -> Result<Value> {
    let spec = &object.data["spec"];
    let meta_name = object.metadata.name.clone().unwrap_or_default();
    let ns = object.metadata.namespace.clone().unwrap_or_default();
    let name = sql_name(object)?;
    let host = spec["host"].as_str().unwrap_or("%").to_owned();
    let sql = match kind {
        "Database" => format!(
            "CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET {} COLLATE {};\n",
            identifier(
                "spec.characterSet",
                spec["characterSet"].as_str().unwrap_or("utf8")
            )?,
            identifier(
                "spec.collate",
                spec["collate"].as_str().unwrap_or("utf8_general_ci")
            )?,
        ),
        "User" => {
            let secret = spec["passwordSecretKeyRef"]["name"]
                .as_str()
                .unwrap_or_default();
            let key = spec["passwordSecretKeyRef"]["key"]
                .as_str()
                .unwrap_or("password");
            let password = secret_value(client, &ns, secret, key).await?;
            format!(
                "CREATE USER IF NOT EXISTS {user}@{host} IDENTIFIED BY {pw};\nALTER USER {user}@{host} IDENTIFIED BY {pw};\n",
                user = literal(&name),
                host = literal(&host),
                pw = literal(&password),
            )
        }
        _ => {
            let privileges: Vec<String> = spec["privileges"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|p| {
                    if p.chars().all(|c| c.is_ascii_alphabetic() || c == ' ') {
                        Ok(p.to_owned())
                    } else {
                        Err(Error::Invalid {
                            context: "field spec.privileges".into(),
                            message: format!("{p:?} is not a privilege"),
                        })
                    }
                })
                .collect::<Result<_>>()?;
            let database = spec["database"].as_str().unwrap_or("*");
            let database = if database == "*" {
                "*".to_owned()
            } else {
                format!("`{}`", identifier("spec.database", database)?)
            };
            let table = spec["table"].as_str().unwrap_or("*");
            let table = if table == "*" {
                "*".to_owned()
            } else {
                format!("`{}`", identifier("spec.table", table)?)
            };
            let user = identifier(
                "spec.username",
                spec["username"].as_str().unwrap_or_default(),
            )?;
            format!(
                "GRANT {} ON {database}.{table} TO {}@{}{};\n",
                privileges.join(", "),
                literal(&user),
                literal(&host),
                if spec["grantOption"].as_bool().unwrap_or(false) {
                    " WITH GRANT OPTION"
                } else {
                    ""
                },
            )
        }
    };
    os.run_sql(&job_name(kind, &ns, &meta_name), &sql).await?;
    Ok(json!({}))
}

/// The name of the Job that carries out the effect on `ns/name`: readable (the kind and the
/// namespace's start) and unique (a hash of both names). Truncated names alone collided, and
/// could end in a '-' no Job name may end in: namespaces `nova-real-…` and `outages-…` share
/// their Databases' first 20 characters between the cell and cell0 schemas.
fn job_name(kind: &str, ns: &str, name: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (ns, name).hash(&mut hasher);
    let start: String = ns
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(20)
        .collect::<String>()
        .to_ascii_lowercase();
    format!(
        "{}-{}-{:016x}",
        kind.to_ascii_lowercase(),
        start.trim_end_matches('-'),
        hasher.finish()
    )
}

async fn secret_value(client: &kube::Client, ns: &str, name: &str, key: &str) -> Result<String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = api
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading Secret {ns}/{name}")))?
        .ok_or_else(|| Error::Invalid {
            context: "spec.passwordSecretKeyRef".into(),
            message: format!("Secret {ns}/{name} not found"),
        })?;
    let bytes = secret
        .data
        .and_then(|d| d.get(key).map(|b| b.0.clone()))
        .ok_or_else(|| Error::Invalid {
            context: "spec.passwordSecretKeyRef".into(),
            message: format!("Secret {ns}/{name} has no key {key:?}"),
        })?;
    String::from_utf8(bytes).map_err(|_| Error::Invalid {
        context: "spec.passwordSecretKeyRef".into(),
        message: format!("key {key:?} of Secret {ns}/{name} is not UTF-8"),
    })
}

/// Applies the broker of a `RabbitmqCluster` and says whether it is available (the shared
/// broker, for a cluster in the OpenStack namespace, always is).
async fn broker(os: &OpenStack, client: &kube::Client, object: &DynamicObject) -> Result<bool> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let ns = object.metadata.namespace.clone().unwrap_or_default();
    if ns == NAMESPACE {
        return Ok(true);
    }
    os.apply_broker_in(client, &ns, &name).await?;
    available(client, &ns, &name).await
}

async fn default_user(
    client: &kube::Client,
    object: &DynamicObject,
    password: &str,
) -> Result<Value> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let ns = object.metadata.namespace.clone().unwrap_or_default();
    let secret = format!("{name}-default-user");
    let host = format!("{name}.{ns}.svc");
    let port = Ports::RABBITMQ.to_string();
    write_secret(
        client,
        &ns,
        &secret,
        &[
            ("username", RABBITMQ_USER),
            ("password", password),
            ("host", &host),
            ("port", &port),
            ("provider", "rabbitmq"),
            ("type", "rabbitmq"),
        ],
    )
    .await?;
    Ok(json!({
        "defaultUser": { "secretReference": { "name": secret, "namespace": ns,
            "keys": { "username": "username", "password": "password" } } }
    }))
}

/// The SIMULATED OVN chassis of the real node, which runs no Open vSwitch: a pod answering the
/// compute pools' `wait-for-chassis` gate on the host's OVSDB socket. `scripts/run.sh` applies
/// the same manifest.
pub const OVN_CHASSIS: &str = include_str!("simulated-ovn-chassis.yaml");

/// Runs the simulated OVN chassis in `namespace` from `image` (one with python3: the node's nova
/// image) and waits until its socket is there.
pub async fn ovn_chassis(
    client: &kube::Client,
    namespace: &str,
    image: &str,
    timeout: Duration,
) -> Result<()> {
    use k8s_openapi::api::core::v1::Pod;
    let invalid = |e: String| Error::Invalid {
        context: "the simulated OVN chassis manifest".into(),
        message: e,
    };
    let mut pod: Value = serde_saphyr::from_str(OVN_CHASSIS).map_err(|e| invalid(e.to_string()))?;
    pod["metadata"]["namespace"] = json!(namespace);
    pod["spec"]["containers"][0]["image"] = json!(image);
    let name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.patch(
        &name,
        &PatchParams::apply("simulated-ovn-chassis").force(),
        &Patch::Apply(&pod),
    )
    .await
    .map_err(kube_err(format!("applying Pod {namespace}/{name}")))?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let pod = pods
            .get(&name)
            .await
            .map_err(kube_err(format!("reading Pod {namespace}/{name}")))?;
        let ready = pod
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if ready {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("the simulated OVN chassis {namespace}/{name} to serve"),
                after: timeout,
                detail: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_inputs_are_refused_unless_plain_and_literals_are_escaped() {
        assert!(identifier("spec.name", "nova_api").is_ok());
        assert!(identifier("spec.name", "x`; DROP").is_err());
        assert!(identifier("spec.name", "").is_err());
        assert_eq!(literal("it's\\"), "'it\\'s\\\\'");
    }

    #[test]
    fn job_names_are_unique_and_valid_where_truncated_names_met() {
        let cell = job_name("Database", "nova-real-1a2b3c", "nova-nova-nova-real-1a2b3c");
        let cell0 = job_name(
            "Database",
            "nova-real-1a2b3c",
            "nova-nova-nova-real-1a2b3c-cell0",
        );
        assert_ne!(cell, cell0);
        for name in [&cell, &cell0] {
            assert!(name.len() <= 52, "{name}");
            assert!(!name.ends_with('-') && !name.contains("--"), "{name}");
        }
    }
}
