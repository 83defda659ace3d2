//! The DBConnectionSecrets step (`common-types.md` §3.7): the two pymysql DSNs into
//! `{name}-api-db-connection` and `{name}-db-connection`. The nova_api half goes first and
//! returns on its own wait, so a cell Secret is never derived while the nova_api credentials
//! are missing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::{DatabaseSpec, Nova};

use crate::clusters::SecretValues;
use crate::clusters::{Caching, KindSpec};
use crate::nova::resolved::{Digests, Resolved};
use crate::nova::{NovaPass, NovaPlan};
use crate::pipeline::uses::{Uses, names, owns};
use crate::pipeline::{
    Gate, Plan, REQUEUE_SECRET_POLLING, StepError, StepFuture, observe_then_plan,
};
use crate::render::children::derived_secret;
use crate::render::dsn;
use crate::render::paths::{API_TLS_MOUNT, CELL_TLS_MOUNT, CONNECTION_KEY};
use crate::sensitive::Sensitive;

const CONDITION: NovaConditionType = NovaConditionType::SecretsReady;
const KEYS: [&str; 2] = ["username", "password"];

/// The two upstream credentials Secrets (None when absent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// `spec.apiDatabase.secretRef`.
    pub api: Option<SecretValues>,
    /// `spec.database.secretRef`.
    pub cell: Option<SecretValues>,
}

/// Both database credential Secrets, by name, and the two connection Secrets derived from them.
pub const KINDS: &[Uses] = &[
    names(|| KindSpec::of::<Secret>(Caching::OnDemand)),
    owns(|| KindSpec::of::<Secret>(Caching::OnDemand)),
];

/// The DBConnectionSecrets step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    let spec = &pass.cr.spec;
    Ok(Observed {
        api: pass
            .cluster
            .secret(ns, &spec.api_database.secret_ref.name, &KEYS)
            .await?,
        cell: pass
            .cluster
            .secret(ns, &spec.database.secret_ref.name, &KEYS)
            .await?,
    })
}

/// The DBConnectionSecrets step's plan.
pub fn plan(nova: &Nova, observed: &Observed, _: &Resolved) -> NovaPlan {
    let name = nova.name_any();
    let ns = nova.namespace().unwrap_or_default();
    let names = NovaNames::new(&name);
    let spec = &nova.spec;
    let api = match dsn_of(
        &ns,
        &spec.api_database,
        &names.api_db_instance(),
        observed.api.as_ref(),
        API_TLS_MOUNT,
    )
    .ready()
    {
        Ok(api) => api,
        Err(waiting) => return Plan::wait(CONDITION, waiting, REQUEUE_SECRET_POLLING),
    };
    let mut digests = Digests {
        api_db_connection: api.digest(),
        ..Default::default()
    };
    let mut plan =
        Plan::proceed().apply(derived_secret(&names.api_db_connection(), &one_key(&api)));
    match dsn_of(
        &ns,
        &spec.database,
        &names.cell_db_instance(),
        observed.cell.as_ref(),
        CELL_TLS_MOUNT,
    )
    .ready()
    {
        Ok(cell) => {
            digests.db_connection = cell.digest();
            plan = plan.apply(derived_secret(&names.db_connection(), &one_key(&cell)));
        }
        Err(waiting) => {
            plan = plan
                .waiting(CONDITION, waiting)
                .requeue(REQUEUE_SECRET_POLLING)
        }
    }
    plan.resolve(Resolved {
        digests,
        ..Default::default()
    })
}

fn one_key(dsn: &Sensitive) -> BTreeMap<String, Sensitive> {
    BTreeMap::from([(CONNECTION_KEY.to_owned(), dsn.clone())])
}

/// The DSN of one block from its upstream Secret, or why it waits.
fn dsn_of(
    ns: &str,
    block: &DatabaseSpec,
    instance: &str,
    secret: Option<&SecretValues>,
    tls_mount: &str,
) -> Gate<Sensitive> {
    let upstream = &block.secret_ref.name;
    let Some(secret) = secret else {
        return Gate::wait(
            Reason::WaitingForDBCredentials,
            format!("Upstream database credentials Secret {ns}/{upstream} not found"),
        );
    };
    let user_key = (!dsn::uses_instance_user(block)).then_some("username");
    if let Some(key) = user_key
        .into_iter()
        .chain(["password"])
        .find(|k| secret.get(k).is_none())
    {
        return Gate::wait(
            Reason::WaitingForDBCredentials,
            format!("Upstream database credentials Secret {ns}/{upstream} missing key \"{key}\""),
        );
    }
    let user = match user_key.and_then(|k| secret.get(k)) {
        Some(user) => user.clone(),
        None => Sensitive::plain(instance),
    };
    let password = secret
        .get("password")
        .cloned()
        .unwrap_or_else(|| Sensitive::new(""));
    Gate::Ready(Sensitive::derive([&user, &password], |[user, password]| {
        dsn::pymysql(block, ns, user, password, tls_mount)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::{example, values};
    use crate::pipeline::Flow;

    fn creds(password: &str) -> Option<SecretValues> {
        Some(values(&[
            ("username", "ignored".into()),
            ("password", password.into()),
        ]))
    }

    fn data(plan: &NovaPlan, child: usize) -> String {
        let owner = crate::objects::Owner::of(&example(), BTreeMap::new());
        let body = plan.children[child].stamped(&owner).expect("stamps");
        let secret: k8s_openapi::api::core::v1::Secret =
            serde_json::from_value(body).expect("a Secret");
        let bytes = secret
            .data
            .unwrap_or_default()
            .remove(CONNECTION_KEY)
            .unwrap_or_default();
        String::from_utf8(bytes.0).expect("utf8")
    }

    #[test]
    fn both_dsns_are_derived_and_digested() {
        let observed = Observed {
            api: creds("api-pw"),
            cell: creds("cell@pw"),
        };
        let plan = plan(&example(), &observed, &Resolved::default());
        assert_eq!(plan.flow, Flow::Continue);
        assert!(
            plan.verdicts.is_empty(),
            "a passing step leaves SecretsReady to the Secrets step"
        );
        let names: Vec<&str> = plan.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["nova-api-db-connection", "nova-db-connection"]);
        assert_eq!(
            data(&plan, 1),
            "mysql+pymysql://nova:cell%40pw@openstack-mariadb.openstack.svc:3306/nova?charset=utf8"
        );
        assert!(!plan.resolved.digests.api_db_connection.is_empty());
        assert!(!plan.resolved.digests.db_connection.is_empty());
    }

    #[test]
    fn the_api_half_waits_first_and_the_cell_half_waits_after_it() {
        let cases = [
            (
                "api absent",
                Observed {
                    api: None,
                    cell: creds("c"),
                },
                0,
                "Upstream database credentials Secret openstack/nova-api-db not found",
            ),
            (
                "api without password",
                Observed {
                    api: Some(values(&[("username", "u".into())])),
                    cell: creds("c"),
                },
                0,
                "Upstream database credentials Secret openstack/nova-api-db missing key \"password\"",
            ),
            (
                "cell absent",
                Observed {
                    api: creds("a"),
                    cell: None,
                },
                1,
                "Upstream database credentials Secret openstack/nova-db not found",
            ),
        ];
        for (what, observed, children, message) in cases {
            let plan = plan(&example(), &observed, &Resolved::default());
            let v = plan.verdict(CONDITION).expect("verdict");
            assert_eq!(
                (v.ok, v.reason, v.message.as_str()),
                (false, Reason::WaitingForDBCredentials, message),
                "{what}"
            );
            assert_eq!(plan.children.len(), children, "{what}");
            assert_eq!(
                plan.flow,
                Flow::RequeueAfter(REQUEUE_SECRET_POLLING),
                "{what}"
            );
        }
    }

    #[test]
    fn a_brownfield_block_reads_its_username_from_the_secret() {
        let mut nova = example();
        nova.spec.database.cluster_ref = None;
        nova.spec.database.host = Some("db.example.com".into());
        let missing = Observed {
            api: creds("a"),
            cell: Some(values(&[("password", "p".into())])),
        };
        let plan = plan(&nova, &missing, &Resolved::default());
        assert_eq!(
            plan.verdict(CONDITION).map(|v| v.message.as_str()),
            Some("Upstream database credentials Secret openstack/nova-db missing key \"username\"")
        );
    }
}
