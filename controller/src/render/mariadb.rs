//! The MariaDB operator's objects a schema is provisioned with (`common-types.md` §3.9, Part 4):
//! a `Database`, and in Static mode a `User` and a `Grant`, all `k8s.mariadb.com/v1alpha1`.
//! Only the fields the flow owns are written, so a value another writer set on a field we do
//! not own (an externally sized `maxUserConnections` while we size none) is left alone.

use serde_json::json;

use crate::objects::{Child, kinds};

/// The password key of the upstream credentials Secret a `User` reads.
pub const PASSWORD_KEY: &str = "password";

/// One of the three provisioned kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MariaDbKind {
    /// A schema.
    Database,
    /// An SQL user.
    User,
    /// A privilege grant of a user on a schema.
    Grant,
}

impl MariaDbKind {
    /// Every provisioned kind, in the order of `kinds::mariadb_children`.
    pub const ALL: [MariaDbKind; 3] =
        [MariaDbKind::Database, MariaDbKind::User, MariaDbKind::Grant];

    /// The dynamic resource of this kind.
    pub fn resource(self) -> kube::core::ApiResource {
        let [database, user, grant] = kinds::mariadb_children();
        match self {
            MariaDbKind::Database => database,
            MariaDbKind::User => user,
            MariaDbKind::Grant => grant,
        }
    }
}

/// Where a block's objects go and what the MariaDB operator does with the SQL side when they
/// are deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    /// The MariaDB cluster in the CR's namespace.
    pub cluster: &'a str,
    /// The objects' `spec.cleanupPolicy`: `Skip` keeps the schema or user, `Delete` drops it.
    pub cleanup_policy: &'static str,
}

/// The `Database` CR `name` creating the SQL schema `schema` on the target's cluster.
pub fn database(name: &str, target: Target<'_>, schema: &str) -> Child {
    Child::dynamic(
        MariaDbKind::Database.resource(),
        name,
        json!({
            "metadata": {},
            "spec": {
                "mariaDbRef": {"name": target.cluster},
                "cleanupPolicy": target.cleanup_policy,
                "characterSet": "utf8",
                "collate": "utf8_general_ci",
                "name": schema,
            },
        }),
    )
}

/// The `User` CR `name` (also the SQL user name), its password read by the MariaDB operator
/// from the upstream Secret `password_secret`; `max_user_connections` is written only when
/// sized (> 0), so the CRD default applies otherwise.
pub fn user(
    name: &str,
    target: Target<'_>,
    password_secret: &str,
    max_user_connections: i32,
) -> Child {
    let mut spec = json!({
        "mariaDbRef": {"name": target.cluster},
        "cleanupPolicy": target.cleanup_policy,
        "passwordSecretKeyRef": {"name": password_secret, "key": PASSWORD_KEY},
    });
    if max_user_connections > 0 {
        spec["maxUserConnections"] = max_user_connections.into();
    }
    Child::dynamic(
        MariaDbKind::User.resource(),
        name,
        json!({"metadata": {}, "spec": spec}),
    )
}

/// The `Grant` CR `name` giving the SQL user `username` every privilege on `schema`.
pub fn grant(name: &str, target: Target<'_>, schema: &str, username: &str) -> Child {
    Child::dynamic(
        MariaDbKind::Grant.resource(),
        name,
        json!({
            "metadata": {},
            "spec": {
                "mariaDbRef": {"name": target.cluster},
                "cleanupPolicy": target.cleanup_policy,
                "privileges": ["ALL PRIVILEGES"],
                "database": schema,
                "table": "*",
                "username": username,
            },
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Owner;
    use std::collections::BTreeMap;

    fn body(child: &Child) -> serde_json::Value {
        let owner = Owner {
            kind: "Nova".into(),
            namespace: "openstack".into(),
            reference: None,
            labels: BTreeMap::new(),
        };
        child.stamped(&owner).expect("stamps")
    }

    const DB: Target<'static> = Target {
        cluster: "db",
        cleanup_policy: "Skip",
    };

    #[test]
    fn the_three_objects_carry_exactly_the_fields_the_flow_owns() {
        let target = Target {
            cluster: "openstack-mariadb",
            cleanup_policy: "Delete",
        };
        assert_eq!(
            body(&database("nova-api", target, "nova_api")),
            json!({"apiVersion": "k8s.mariadb.com/v1alpha1", "kind": "Database",
                   "metadata": {"name": "nova-api", "namespace": "openstack", "labels": {}},
                   "spec": {"mariaDbRef": {"name": "openstack-mariadb"}, "characterSet": "utf8",
                            "cleanupPolicy": "Delete",
                            "collate": "utf8_general_ci", "name": "nova_api"}})
        );
        assert_eq!(
            body(&user("nova", DB, "nova-db", 48))["spec"],
            json!({"mariaDbRef": {"name": "db"}, "maxUserConnections": 48, "cleanupPolicy": "Skip",
                   "passwordSecretKeyRef": {"name": "nova-db", "key": "password"}})
        );
        assert!(
            body(&user("nova", DB, "nova-db", 0))["spec"]
                .get("maxUserConnections")
                .is_none(),
            "an unsized user leaves the CRD default"
        );
        assert_eq!(
            body(&grant("nova-nova-cell0", DB, "nova_cell0", "nova"))["spec"],
            json!({"mariaDbRef": {"name": "db"}, "cleanupPolicy": "Skip", "privileges": ["ALL PRIVILEGES"],
                   "database": "nova_cell0", "table": "*", "username": "nova"})
        );
        assert_eq!(MariaDbKind::Grant.resource().plural, "grants");
    }
}
