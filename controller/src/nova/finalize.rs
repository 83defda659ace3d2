//! The deletion path (`common-types.md` §3.13): release the MariaDB CRs both schemas were
//! provisioned under, then the finalizer.

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::EventType;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;

use super::FINALIZER;
use super::pass::NovaPass;
use crate::external;
use crate::pipeline::{Flow, REQUEUE_DATABASE_WAIT, StepError, delete_if_present};

/// The MariaDB object names of both schemas: `{name}-api`, `{name}`, and cell0's Database and
/// Grant, reached through the cell key as an additional schema.
fn mariadb_names(nova: &Nova) -> Vec<String> {
    let name = nova.name_any();
    let names = NovaNames::new(&name);
    vec![
        names.api_db_instance(),
        names.cell_db_instance(),
        names.cell0_object(&nova.spec.database.database),
    ]
}

/// Observes first whether anything is still live, then issues the deletes, so a Delete that
/// flips the deletion timestamp never makes the check read "none live" too early.
pub async fn run(pass: &NovaPass) -> Result<Flow, StepError> {
    let ns = pass.namespace();
    let mut live = false;
    for resource in external::mariadb_children() {
        let api = pass.dynamic(&resource);
        for name in mariadb_names(&pass.nova) {
            let object: Option<DynamicObject> = api.get_opt(&name).await.map_err(|e| {
                StepError::kube(format!("reading {} {ns}/{name}", resource.kind), e)
            })?;
            let Some(object) = object else { continue };
            live |= object.metadata.deletion_timestamp.is_none();
            delete_if_present(&api, &name, &format!("{} {ns}/{name}", resource.kind)).await?;
        }
    }
    if live {
        pass.publish(
            EventType::Normal,
            "FinalizingDatabase",
            "Deleting the MariaDB Database, User and Grant objects of both schemas",
        )
        .await;
        return Ok(Flow::RequeueAfter(REQUEUE_DATABASE_WAIT));
    }
    pass.publish(
        EventType::Normal,
        "DatabaseFinalized",
        "No MariaDB object of either schema is left; releasing the finalizer",
    )
    .await;
    remove_finalizer(pass).await?;
    Ok(Flow::Continue)
}

async fn remove_finalizer(pass: &NovaPass) -> Result<(), StepError> {
    let finalizers: Vec<String> = pass
        .nova
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    let api: Api<Nova> = Api::namespaced(pass.ctx.client.clone(), &pass.namespace());
    let patch = serde_json::json!({
        "metadata": { "finalizers": finalizers, "resourceVersion": pass.nova.resource_version() }
    });
    api.patch(&pass.name(), &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| StepError::kube("removing the finalizer", e))?;
    Ok(())
}
