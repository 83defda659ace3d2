//! Which SQL schemas a Nova claims on which server, and which other Nova already claims one of
//! them: the rule the webhook refuses a second claimant with and the controller holds the
//! younger of two with (an operator decision beyond the spec, `controller/README.md`, "Data
//! retention"). Two Novas on one schema would run db-sync against each other's data, and
//! deleting one (under `deletionPolicy: Delete`) would drop the other's.

use std::fmt;

use crate::names::NovaNames;
use crate::v1alpha1::{DatabaseSpec, Nova};

/// The MariaDB port a brownfield block without `port` uses.
pub const DEFAULT_PORT: i32 = 3306;

/// The server a block's schemas live on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Server {
    /// A MariaDB of the MariaDB operator: `clusterRef` names it in the Nova's namespace, on
    /// the Nova's target cluster (`targetClusterRef`) or the management cluster.
    Managed {
        /// The target cluster's name; None for the management cluster.
        target: Option<String>,
        /// The Nova's (and the MariaDB's) namespace.
        namespace: String,
        /// The MariaDB's name.
        cluster: String,
    },
    /// A brownfield server: its host (DNS names compared case-insensitively) and port.
    Brownfield {
        /// The host, lower-cased.
        host: String,
        /// The port, 3306 when unset.
        port: i32,
    },
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Server::Managed {
                target,
                namespace,
                cluster,
            } => {
                write!(f, "MariaDB {namespace}/{cluster}")?;
                match target {
                    Some(target) => write!(f, " of target cluster {target}"),
                    None => Ok(()),
                }
            }
            Server::Brownfield { host, port } => write!(f, "database server {host}:{port}"),
        }
    }
}

/// One schema a Nova uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// Where it lives.
    pub server: Server,
    /// The SQL schema name.
    pub schema: String,
    /// The field that names it (`spec.apiDatabase.database`, `spec.database.database`; cell0
    /// is derived from the latter).
    pub field: &'static str,
}

/// The server of one block; None when it names neither a cluster nor a host.
fn server(nova: &Nova, block: &DatabaseSpec) -> Option<Server> {
    if let Some(cluster) = &block.cluster_ref {
        return Some(Server::Managed {
            target: nova
                .spec
                .target_cluster_ref
                .as_ref()
                .map(|t| t.name.clone()),
            namespace: nova.metadata.namespace.clone().unwrap_or_default(),
            cluster: cluster.name.clone(),
        });
    }
    block.host.as_ref().map(|host| Server::Brownfield {
        host: host.to_ascii_lowercase(),
        port: block.port.unwrap_or(DEFAULT_PORT),
    })
}

/// The nova_api, cell and cell0 schemas of `nova`, each with its server.
pub fn claims(nova: &Nova) -> Vec<Claim> {
    let spec = &nova.spec;
    let mut claims = Vec::new();
    if let Some(server) = server(nova, &spec.api_database) {
        claims.push(Claim {
            server,
            schema: spec.api_database.database.clone(),
            field: "spec.apiDatabase.database",
        });
    }
    if let Some(server) = server(nova, &spec.database) {
        for schema in [
            spec.database.database.clone(),
            NovaNames::cell0_schema(&spec.database.database),
        ] {
            claims.push(Claim {
                server: server.clone(),
                schema,
                field: "spec.database.database",
            });
        }
    }
    claims
}

/// A schema of the Nova being checked that another Nova already claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The checked Nova's claim.
    pub claim: Claim,
    /// The other Nova, `namespace/name`.
    pub other: String,
    /// The other Nova's field naming the schema.
    pub other_field: &'static str,
}

impl Conflict {
    /// Why the claim is refused or held, naming the other Nova and never a credential.
    pub fn message(&self) -> String {
        format!(
            "schema {} on {} is already used by Nova {} ({}): two Novas on one schema would migrate and delete each other's data",
            self.claim.schema, self.claim.server, self.other, self.other_field
        )
    }
}

/// The identity of a Nova as the rule compares it: `namespace/name`.
pub fn key(nova: &Nova) -> String {
    format!(
        "{}/{}",
        nova.metadata.namespace.as_deref().unwrap_or_default(),
        nova.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Each claim of `nova` another of `others` already holds (the first such Nova per claim);
/// `nova` itself, by namespace and name, is skipped among the others.
pub fn conflicts<'a>(nova: &Nova, others: impl IntoIterator<Item = &'a Nova>) -> Vec<Conflict> {
    let own = key(nova);
    let theirs: Vec<(String, Vec<Claim>)> = others
        .into_iter()
        .filter(|other| key(other) != own)
        .map(|other| (key(other), claims(other)))
        .collect();
    claims(nova)
        .into_iter()
        .filter_map(|claim| {
            theirs.iter().find_map(|(other, held)| {
                held.iter()
                    .find(|h| h.server == claim.server && h.schema == claim.schema)
                    .map(|h| Conflict {
                        claim: claim.clone(),
                        other: other.clone(),
                        other_field: h.field,
                    })
            })
        })
        .collect()
}

/// Whether `a` came first: the older creationTimestamp, then the smaller `namespace/name`.
pub fn older(a: &Nova, b: &Nova) -> bool {
    let created = |n: &Nova| n.metadata.creation_timestamp.as_ref().map(|t| t.0);
    match (created(a), created(b)) {
        (Some(x), Some(y)) if x != y => x < y,
        _ => key(a) < key(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1alpha1::ClusterRef;

    fn nova(ns: &str, name: &str, api: &str, cell: &str) -> Nova {
        let mut nova: Nova =
            serde_saphyr::from_str(include_str!("../../examples/nova.yaml")).expect("example");
        nova.metadata.name = Some(name.into());
        nova.metadata.namespace = Some(ns.into());
        let managed = |schema: &str| DatabaseSpec {
            cluster_ref: Some(ClusterRef {
                name: "openstack-mariadb".into(),
            }),
            database: schema.into(),
            ..Default::default()
        };
        nova.spec.api_database = managed(api);
        nova.spec.database = managed(cell);
        nova
    }

    #[test]
    fn a_schema_claimed_on_the_same_server_conflicts_and_names_the_other_nova() {
        let first = nova("openstack", "a", "nova_api", "nova");
        let second = nova("openstack", "b", "nova_api", "nova2");
        let found = conflicts(&second, [&first]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].claim.field, "spec.apiDatabase.database");
        assert_eq!(
            found[0].message(),
            "schema nova_api on MariaDB openstack/openstack-mariadb is already used by Nova openstack/a (spec.apiDatabase.database): two Novas on one schema would migrate and delete each other's data"
        );
        // cell0 is derived from the cell schema: the first Nova's cell "nova" claims nova_cell0.
        let clash = nova("openstack", "d", "nova_cell0", "x");
        assert_eq!(
            conflicts(&clash, [&first])[0].other_field,
            "spec.database.database"
        );
    }

    #[test]
    fn another_namespace_another_cluster_or_itself_is_no_conflict() {
        let first = nova("openstack", "a", "nova_api", "nova");
        assert!(conflicts(&nova("other", "a", "nova_api", "nova"), [&first]).is_empty());
        let mut elsewhere = nova("openstack", "b", "nova_api", "nova");
        elsewhere.spec.api_database.cluster_ref = Some(ClusterRef {
            name: "second-mariadb".into(),
        });
        elsewhere.spec.database.cluster_ref = elsewhere.spec.api_database.cluster_ref.clone();
        assert!(conflicts(&elsewhere, [&first]).is_empty());
        let mut placed = nova("openstack", "b", "nova_api", "nova");
        placed.spec.target_cluster_ref = Some(crate::v1alpha1::TargetClusterRefSpec {
            name: "west".into(),
        });
        assert!(
            conflicts(&placed, [&first]).is_empty(),
            "another cluster's MariaDB"
        );
        assert!(conflicts(&first, [&first.clone()]).is_empty(), "itself");
    }

    #[test]
    fn brownfield_servers_compare_by_host_case_insensitively_and_port() {
        let brownfield = |ns: &str, name: &str, host: &str, port: Option<i32>| {
            let mut n = nova(ns, name, "nova_api", "nova");
            for block in [&mut n.spec.api_database, &mut n.spec.database] {
                block.cluster_ref = None;
                block.host = Some(host.into());
                block.port = port;
            }
            n
        };
        let first = brownfield("east", "a", "db.example.com", None);
        assert_eq!(
            conflicts(
                &brownfield("west", "b", "DB.example.com", Some(3306)),
                [&first]
            )
            .len(),
            3,
            "another namespace, the same server: all three schemas"
        );
        assert!(
            conflicts(
                &brownfield("west", "b", "db.example.com", Some(3307)),
                [&first]
            )
            .is_empty()
        );
    }

    #[test]
    fn the_older_nova_is_the_earlier_created_then_the_smaller_name() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let mut a = nova("openstack", "b", "x", "y");
        let mut b = nova("openstack", "a", "x", "y");
        assert!(older(&b, &a), "no timestamps: by name");
        a.metadata.creation_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
        b.metadata.creation_timestamp = Some(Time("2026-01-02T00:00:00Z".parse().unwrap()));
        assert!(older(&a, &b));
        assert!(!older(&b, &a));
    }
}
