//! The shared database provisioning flow (`common-types.md` §3.9) as the Database step runs it
//! for each of Nova's two blocks: the cluster gate, the schema-name guard, then the MariaDB
//! `Database`, `User` and `Grant` in managed mode, cell0 riding on the cell block as an
//! additional schema. Pure: what exists and is Ready comes in as [`BlockObserved`].

use std::collections::BTreeSet;

use kube::ResourceExt;
use nova_api::conditions::Reason;
use nova_api::defaults::default_nova;
use nova_api::names::{NovaNames, SCHEMA_NAME_MAX};
use nova_api::v1alpha1::{CredentialsMode, DatabaseSpec, Nova, NovaSpec};

use crate::objects::Child;
use crate::pipeline::Waiting;
use crate::render::mariadb::{self, MariaDbKind};

/// One schema block, resolved: where its objects live and what they are called.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The field path of the block, for errors (`spec.apiDatabase`).
    pub field: &'static str,
    /// The block itself.
    pub spec: DatabaseSpec,
    /// The instance name of the primary Database, the User and the primary Grant.
    pub instance: String,
    /// cell0 on the cell block: its object name and SQL schema.
    pub additional: Option<(String, String)>,
    /// The sized `max_user_connections` of the block's user.
    pub max_user_connections: i32,
}

impl Block {
    /// The MariaDB cluster of a managed block; None for a brownfield one.
    pub fn cluster(&self) -> Option<&str> {
        self.spec.cluster_ref.as_ref().map(|c| c.name.as_str())
    }

    /// Every object this block provisions, as (kind, name), in apply order.
    pub fn objects(&self) -> Vec<(MariaDbKind, String)> {
        if self.cluster().is_none() {
            return Vec::new();
        }
        let mut objects = vec![(MariaDbKind::Database, self.instance.clone())];
        objects.extend(
            self.additional
                .iter()
                .map(|(name, _)| (MariaDbKind::Database, name.clone())),
        );
        if static_mode(&self.spec) {
            objects.push((MariaDbKind::User, self.instance.clone()));
            objects.push((MariaDbKind::Grant, self.instance.clone()));
            objects.extend(
                self.additional
                    .iter()
                    .map(|(name, _)| (MariaDbKind::Grant, name.clone())),
            );
        }
        objects
    }
}

fn static_mode(spec: &DatabaseSpec) -> bool {
    spec.credentials_mode.unwrap_or(CredentialsMode::Static) == CredentialsMode::Static
}

/// The nova_api block and the cell block of `nova`, in the order they are provisioned.
pub fn blocks(nova: &Nova) -> [Block; 2] {
    let name = nova.name_any();
    let names = NovaNames::new(&name);
    let (api_connections, cell_connections) = max_user_connections(&nova.spec);
    let cell = &nova.spec.database;
    [
        Block {
            field: "spec.apiDatabase",
            spec: nova.spec.api_database.clone(),
            instance: names.api_db_instance(),
            additional: None,
            max_user_connections: api_connections,
        },
        Block {
            field: "spec.database",
            spec: cell.clone(),
            instance: names.cell_db_instance(),
            additional: Some((
                names.cell0_object(&cell.database),
                NovaNames::cell0_schema(&cell.database),
            )),
            max_user_connections: cell_connections,
        },
    ]
}

/// `max_user_connections` of the `{name}-api` user and of the cell user `{name}`, sized for
/// the CR's own topology as the workloads render it (`common-types.md` §3.9, "sizing").
pub fn max_user_connections(spec: &NovaSpec) -> (i32, i32) {
    let mut spec = spec.clone();
    default_nova(&mut spec);
    let replicas = |d: Option<&nova_api::v1alpha1::DeploymentSpec>| {
        d.and_then(|d| d.replicas).unwrap_or(1).max(0)
    };
    let api = spec.api.clone().unwrap_or_default();
    let api_pods = match &spec.autoscaling {
        Some(autoscaling) => autoscaling.max_replicas,
        None => replicas(api.deployment.as_ref()),
    };
    let uwsgi = |u: Option<&nova_api::v1alpha1::UWSGISpec>| {
        let u = u.cloned().unwrap_or_default();
        u.processes.unwrap_or(1) * u.threads.unwrap_or(1)
    };
    let metadata = &spec.metadata;
    let scheduler = spec.scheduler.clone().unwrap_or_default();
    let conductor = spec.conductor.clone().unwrap_or_default();
    let pooled = (api_pods + 1) * uwsgi(api.uwsgi.as_ref())
        + (replicas(metadata.deployment.as_ref()) + 1) * uwsgi(metadata.uwsgi.as_ref())
        + (replicas(scheduler.deployment.as_ref()) + 1) * scheduler.workers.unwrap_or(1)
        + (replicas(conductor.deployment.as_ref()) + 1) * conductor.workers.unwrap_or(1);
    let api_user = 2 * pooled + 4;
    let console = spec
        .console_proxy
        .as_ref()
        .filter(|c| c.enabled.unwrap_or(true))
        .map_or(0, |c| 2 * (replicas(c.deployment.as_ref()) + 1));
    (api_user, api_user + console)
}

/// What the cache holds about one block's MariaDB objects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockObserved {
    /// The block's MariaDB cluster reports Ready=True.
    pub cluster_ready: bool,
    /// The block's objects that report Ready=True.
    pub ready: BTreeSet<(MariaDbKind, String)>,
}

/// How far one block's provisioning got.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Everything is provisioned and Ready (or there is nothing to provision).
    Ready,
    /// A gate did not pass.
    Wait(Waiting),
    /// The guard refused the schema names; nothing was applied.
    Refused(String),
}

/// The objects to apply for one block, and how far it got.
pub fn provision(block: &Block, observed: &BlockObserved) -> (Vec<Child>, Outcome) {
    let Some(cluster) = block.cluster() else {
        return (Vec::new(), Outcome::Ready);
    };
    if !observed.cluster_ready {
        return (
            Vec::new(),
            Outcome::Wait(Waiting {
                reason: Reason::ClusterNotReady,
                message: format!("MariaDB cluster {cluster:?} is not ready"),
            }),
        );
    }
    let schema = &block.spec.database;
    let schemas = std::iter::once(schema).chain(block.additional.iter().map(|(_, s)| s));
    for s in schemas {
        if let Some(problem) = schema_problem(s) {
            return (
                Vec::new(),
                Outcome::Refused(format!("{}.database: schema {s:?} {problem}", block.field)),
            );
        }
    }
    let ready = |kind, name: &str| observed.ready.contains(&(kind, name.to_owned()));
    let not_ready = |message: &str| {
        Outcome::Wait(Waiting {
            reason: Reason::WaitingForDatabase,
            message: message.to_owned(),
        })
    };
    let target = mariadb::Target {
        cluster,
        cleanup_policy: block.spec.deletion_policy().cleanup_policy(),
    };
    let mut children = vec![mariadb::database(&block.instance, target, schema)];
    children.extend(
        block
            .additional
            .iter()
            .map(|(name, s)| mariadb::database(name, target, s)),
    );
    let databases_ready = ready(MariaDbKind::Database, &block.instance)
        && block
            .additional
            .iter()
            .all(|(name, _)| ready(MariaDbKind::Database, name));
    if !databases_ready {
        return (children, not_ready("MariaDB Database CR is not ready"));
    }
    if !static_mode(&block.spec) {
        return (children, Outcome::Ready);
    }
    children.push(mariadb::user(
        &block.instance,
        target,
        &block.spec.secret_ref.name,
        block.max_user_connections,
    ));
    let user_or_grant = "MariaDB User or Grant CR is not ready";
    if !ready(MariaDbKind::User, &block.instance) {
        return (children, not_ready(user_or_grant));
    }
    children.push(mariadb::grant(
        &block.instance,
        target,
        schema,
        &block.instance,
    ));
    children.extend(
        block
            .additional
            .iter()
            .map(|(name, s)| mariadb::grant(name, target, s, &block.instance)),
    );
    let grants_ready = ready(MariaDbKind::Grant, &block.instance)
        && block
            .additional
            .iter()
            .all(|(name, _)| ready(MariaDbKind::Grant, name));
    if !grants_ready {
        return (children, not_ready(user_or_grant));
    }
    (children, Outcome::Ready)
}

/// Why a schema name fails `^[A-Za-z0-9_]{1,64}$`, if it does. The name is interpolated into
/// a single-quoted shell word of the db-sync script, so the guard is what keeps a quote out.
pub fn schema_problem(schema: &str) -> Option<&'static str> {
    if schema.is_empty() {
        Some("must not be empty")
    } else if schema.len() > SCHEMA_NAME_MAX {
        Some("must be at most 64 characters")
    } else if !schema
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        Some("must consist of letters, digits and underscores only")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use nova_api::v1alpha1::{AutoscalingSpec, NovaConsoleProxySpec};

    fn names(children: &[Child]) -> Vec<String> {
        children
            .iter()
            .map(|c| format!("{}/{}", c.kind.kind, c.name))
            .collect()
    }

    fn all_ready(block: &Block) -> BlockObserved {
        BlockObserved {
            cluster_ready: true,
            ready: block.objects().into_iter().collect(),
        }
    }

    #[test]
    fn the_default_topology_sizes_44_and_48_connections() {
        assert_eq!(max_user_connections(&example().spec), (44, 48));
        let mut spec = example().spec;
        spec.console_proxy = Some(NovaConsoleProxySpec {
            enabled: Some(false),
            ..Default::default()
        });
        assert_eq!(max_user_connections(&spec), (44, 44), "no proxy, no extra");
        spec.autoscaling = Some(AutoscalingSpec {
            max_replicas: 10,
            ..Default::default()
        });
        // API pods = maxReplicas: (10 + 1) * 2 + 4 + 4 + 4 = 34; 2 * 34 + 4.
        assert_eq!(max_user_connections(&spec).0, 72);
    }

    #[test]
    fn the_cell_block_applies_in_the_specified_order_and_gates_each_stage() {
        let [api, cell] = blocks(&example());
        assert_eq!(api.instance, "nova-api");
        assert_eq!(
            cell.additional,
            Some(("nova-nova-cell0".into(), "nova_cell0".into()))
        );
        let mut observed = BlockObserved {
            cluster_ready: true,
            ..Default::default()
        };
        let wait = |message: &str| {
            Outcome::Wait(Waiting {
                reason: Reason::WaitingForDatabase,
                message: message.into(),
            })
        };
        let (children, outcome) = provision(&cell, &observed);
        assert_eq!(
            names(&children),
            ["Database/nova", "Database/nova-nova-cell0"]
        );
        assert_eq!(outcome, wait("MariaDB Database CR is not ready"));
        observed
            .ready
            .insert((MariaDbKind::Database, "nova".into()));
        observed
            .ready
            .insert((MariaDbKind::Database, "nova-nova-cell0".into()));
        let (children, outcome) = provision(&cell, &observed);
        assert_eq!(
            children.len(),
            3,
            "the User, and no Grant before it is Ready"
        );
        assert_eq!(outcome, wait("MariaDB User or Grant CR is not ready"));
        observed.ready.insert((MariaDbKind::User, "nova".into()));
        let (children, outcome) = provision(&cell, &observed);
        assert_eq!(
            names(&children),
            [
                "Database/nova",
                "Database/nova-nova-cell0",
                "User/nova",
                "Grant/nova",
                "Grant/nova-nova-cell0"
            ]
        );
        assert_eq!(outcome, wait("MariaDB User or Grant CR is not ready"));
        let (_, outcome) = provision(&cell, &all_ready(&cell));
        assert_eq!(outcome, Outcome::Ready);
    }

    #[test]
    fn the_cluster_gate_comes_first_and_names_the_cluster() {
        let [api, _] = blocks(&example());
        let (children, outcome) = provision(&api, &BlockObserved::default());
        assert!(children.is_empty());
        assert_eq!(
            outcome,
            Outcome::Wait(Waiting {
                reason: Reason::ClusterNotReady,
                message: "MariaDB cluster \"openstack-mariadb\" is not ready".into(),
            })
        );
    }

    #[test]
    fn brownfield_provisions_nothing_and_dynamic_only_the_schemas() {
        let mut nova = example();
        nova.spec.database.cluster_ref = None;
        nova.spec.database.host = Some("db.example.com".into());
        nova.spec.api_database.credentials_mode = Some(CredentialsMode::Dynamic);
        let [api, cell] = blocks(&nova);
        assert_eq!(
            provision(&cell, &BlockObserved::default()),
            (Vec::new(), Outcome::Ready)
        );
        assert!(cell.objects().is_empty());
        let (children, outcome) = provision(&api, &all_ready(&api));
        assert_eq!(names(&children), ["Database/nova-api"]);
        assert_eq!(outcome, Outcome::Ready);
    }

    #[test]
    fn the_schema_guard_refuses_before_anything_is_applied() {
        for (schema, problem) in [
            (
                "nova'x",
                "must consist of letters, digits and underscores only",
            ),
            (&"n".repeat(60), "must be at most 64 characters"),
        ] {
            let mut nova = example();
            nova.spec.database.database = schema.to_owned();
            let [_, cell] = blocks(&nova);
            let (children, outcome) = provision(&cell, &all_ready(&cell));
            assert!(children.is_empty(), "{schema}");
            let Outcome::Refused(message) = outcome else {
                panic!("{schema}: {outcome:?}");
            };
            assert!(
                message.starts_with("spec.database.database: schema "),
                "{message}"
            );
            assert!(message.ends_with(problem), "{message}");
        }
        assert_eq!(schema_problem("nova_cell0"), None);
        assert_eq!(schema_problem(""), Some("must not be empty"));
    }
}
