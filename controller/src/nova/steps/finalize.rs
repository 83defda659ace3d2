//! The deletion path (`common-types.md` §3.13): release the MariaDB CRs both schemas were
//! provisioned under, then the finalizer.

use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::events::EventReason;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;

use crate::nova::db_provision::{self, BlockObserved};
use crate::nova::resolved::Resolved;
use crate::nova::steps::database::mariadb_child;
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::{Child, kinds};
use crate::pipeline::uses::{Uses, reads};
use crate::pipeline::{Plan, REQUEUE_DATABASE_WAIT, StepError, StepFuture, observe_then_plan};

/// The MariaDB object names of the managed schemas: `{name}-api`, `{name}`, and cell0's
/// Database and Grant, reached through the cell key as an additional schema. A brownfield block
/// (`host`) provisioned nothing (`common-types.md` §3.9), so objects of those names belong to
/// someone else and are left alone; the mode is immutable, so it is the one provisioned under.
fn mariadb_names(nova: &Nova) -> Vec<String> {
    let name = nova.name_any();
    let names = NovaNames::new(&name);
    let spec = &nova.spec;
    let mut keys = Vec::new();
    if spec.api_database.cluster_ref.is_some() {
        keys.push(names.api_db_instance());
    }
    if spec.database.cluster_ref.is_some() {
        keys.push(names.cell_db_instance());
        keys.push(names.cell0_object(&spec.database.database));
    }
    keys
}

/// A MariaDB object that still exists.
#[derive(Clone, Debug, PartialEq)]
pub struct Remaining {
    /// Its kind.
    pub kind: ApiResource,
    /// Its name.
    pub name: String,
    /// Whether it is not being deleted yet.
    pub live: bool,
}

/// The MariaDB objects of both schemas that still exist.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Each remaining object this Nova controls.
    pub remaining: Vec<Remaining>,
    /// `Kind/name` of each object of one of those names this Nova does not control (another
    /// owner's, or nobody's): never deleted, never waited for.
    pub foreign: Vec<String>,
}

/// The kinds provisioned per schema, whose release the finalizer waits for.
pub const KINDS: &[Uses] = &[
    reads(mariadb_child::<0>),
    reads(mariadb_child::<1>),
    reads(mariadb_child::<2>),
];

/// The cleanup step: observe first whether anything is still live, then delete, so a delete
/// that flips the deletion timestamp never makes the check read "none live" too early.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    // A deleting Nova is probed no more: its passing probe leaves the cache.
    super::health_check::forget(ns, &pass.cr.name_any());
    let mut observed = Observed::default();
    for kind in kinds::mariadb_children() {
        for name in mariadb_names(&pass.cr) {
            let Some(meta) = pass.cluster.metadata(&kind, ns, &name)? else {
                continue;
            };
            if !pass.owner.controls(&meta.metadata) {
                observed.foreign.push(format!("{}/{name}", kind.kind));
                continue;
            }
            observed.remaining.push(Remaining {
                kind: kind.clone(),
                live: meta.metadata.deletion_timestamp.is_none(),
                name,
            });
        }
    }
    Ok(observed)
}

/// Every MariaDB object the Database step would apply for `nova`, fully provisioned: what a
/// live object is brought to before its delete, so it carries the block's current
/// `cleanupPolicy` (an object applied before the policy existed carries none, and the MariaDB
/// operator's default would drop its schema).
fn provisioned(nova: &Nova) -> Vec<Child> {
    db_provision::blocks(nova)
        .iter()
        .flat_map(|block| {
            let all_ready = BlockObserved {
                cluster_ready: true,
                ready: block.objects().into_iter().collect(),
            };
            db_provision::provision(block, &all_ready).0
        })
        .collect()
}

/// The cleanup plan: bring every live object to the block's cleanup policy, then delete every
/// remaining object; while any was live, wait and keep the finalizer; once none is, release
/// it.
pub fn plan(nova: &Nova, observed: &Observed, _: &Resolved) -> NovaPlan {
    let remaining = &observed.remaining;
    let mut plan = Plan::proceed();
    let desired = provisioned(nova);
    for object in remaining.iter().filter(|o| o.live) {
        if let Some(child) = desired
            .iter()
            .find(|c| c.kind == object.kind && c.name == object.name)
        {
            plan = plan.apply(child.clone());
        }
    }
    for object in remaining {
        plan = plan.remove(object.kind.clone(), object.name.clone());
    }
    if remaining.iter().any(|o| o.live) {
        return plan
            .event(
                EventReason::FinalizingDatabase,
                "Deleting the MariaDB Database, User and Grant objects of both schemas",
            )
            .requeue(REQUEUE_DATABASE_WAIT);
    }
    let left_alone = if observed.foreign.is_empty() {
        String::new()
    } else {
        format!(
            "; left alone, as this Nova does not control them: {}",
            observed.foreign.join(", ")
        )
    };
    plan.event(
        EventReason::DatabaseFinalized,
        format!("No MariaDB object of either schema is left{left_alone}; releasing the finalizer"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::pipeline::Flow;

    #[test]
    fn live_objects_hold_the_finalizer_and_terminating_ones_do_not() {
        let database = kinds::mariadb_children()[0].clone();
        let object = |name: &str, live| Remaining {
            kind: database.clone(),
            name: name.into(),
            live,
        };
        assert_eq!(
            mariadb_names(&example()),
            ["nova-api", "nova", "nova-nova-cell0"]
        );
        let held = plan(
            &example(),
            &Observed {
                remaining: vec![object("nova-nova-cell0", true), object("nova", false)],
                ..Observed::default()
            },
            &Resolved::default(),
        );
        assert_eq!(held.flow, Flow::RequeueAfter(REQUEUE_DATABASE_WAIT));
        assert_eq!(held.removals.len(), 2);
        // The live one is first brought to the block's cleanup policy, the terminating one not.
        assert_eq!(held.children.len(), 1);
        assert_eq!(held.children[0].name, "nova-nova-cell0");
        let owner = crate::objects::Owner {
            kind: "Nova".into(),
            namespace: "openstack".into(),
            reference: None,
            labels: Default::default(),
        };
        assert_eq!(
            held.children[0].stamped(&owner).expect("stamps")["spec"]["cleanupPolicy"],
            "Skip"
        );
        assert_eq!(held.events[0].reason, EventReason::FinalizingDatabase);
        let terminating = plan(
            &example(),
            &Observed {
                remaining: vec![object("nova", false)],
                ..Observed::default()
            },
            &Resolved::default(),
        );
        assert_eq!(terminating.flow, Flow::Continue);
        assert_eq!(terminating.events[0].reason, EventReason::DatabaseFinalized);
        let gone = plan(&example(), &Observed::default(), &Resolved::default());
        assert!(gone.removals.is_empty());
        assert_eq!(gone.flow, Flow::Continue);
    }

    #[test]
    fn objects_this_nova_does_not_control_are_neither_deleted_nor_waited_for() {
        let foreign = plan(
            &example(),
            &Observed {
                remaining: Vec::new(),
                foreign: vec!["Database/nova-api".into()],
            },
            &Resolved::default(),
        );
        assert!(foreign.removals.is_empty());
        assert_eq!(foreign.flow, Flow::Continue);
        assert_eq!(
            foreign.events[0].note,
            "No MariaDB object of either schema is left; left alone, as this Nova does not control them: Database/nova-api; releasing the finalizer"
        );
    }

    #[test]
    fn a_brownfield_block_names_nothing_to_delete() {
        let mut nova = example();
        nova.spec.database.cluster_ref = None;
        nova.spec.database.host = Some("db.example.com".into());
        assert_eq!(mariadb_names(&nova), ["nova-api"]);
        nova.spec.api_database.cluster_ref = None;
        nova.spec.api_database.host = Some("db.example.com".into());
        assert!(mariadb_names(&nova).is_empty());
    }
}
