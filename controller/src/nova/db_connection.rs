//! The DBConnectionSecrets step (`common-types.md` §3.7): the two pymysql DSNs into
//! `{name}-api-db-connection` and `{name}-db-connection`. The nova_api half runs first and
//! returns on its own wait, so a cell Secret is never derived while the nova_api credentials
//! are missing.

use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::DatabaseSpec;

use super::dsn;
use super::pass::{NovaPass, secret_value};
use crate::derived_secret::{self, Desired};
use crate::pipeline::{Flow, REQUEUE_SECRET_POLLING, StepError, StepFuture};
use crate::sensitive::Sensitive;

/// Where the nova_api block's TLS files are mounted.
pub const API_TLS_MOUNT: &str = "/etc/nova-db-tls/api/";
/// Where the cell block's TLS files are mounted.
pub const CELL_TLS_MOUNT: &str = "/etc/nova-db-tls/cell/";
/// The one key of a derived DSN Secret.
pub const CONNECTION_KEY: &str = "connection";

/// The DBConnectionSecrets step.
pub fn run(pass: &mut NovaPass) -> StepFuture<'_> {
    Box::pin(async move {
        let name = pass.name();
        let names = NovaNames::new(&name);
        let spec = pass.nova.spec.clone();
        let api = derive(
            pass,
            &spec.api_database,
            &names.api_db_instance(),
            &names.api_db_connection(),
            API_TLS_MOUNT,
        )
        .await?;
        let Some(api) = api else {
            return Ok(Flow::RequeueAfter(REQUEUE_SECRET_POLLING));
        };
        pass.resolved.digests.api_db_connection = api;
        let cell = derive(
            pass,
            &spec.database,
            &names.cell_db_instance(),
            &names.db_connection(),
            CELL_TLS_MOUNT,
        )
        .await?;
        let Some(cell) = cell else {
            return Ok(Flow::RequeueAfter(REQUEUE_SECRET_POLLING));
        };
        pass.resolved.digests.db_connection = cell;
        Ok(Flow::Continue)
    })
}

/// Derives the DSN Secret `target` of one block; returns the DSN digest, or None after setting
/// the wait condition.
async fn derive(
    pass: &mut NovaPass,
    block: &DatabaseSpec,
    instance: &str,
    target: &str,
    tls_mount: &str,
) -> Result<Option<String>, StepError> {
    let ns = pass.namespace();
    let upstream = &block.secret_ref.name;
    let Some(secret) = pass.read_secret(upstream).await? else {
        wait(
            pass,
            format!("Upstream database credentials Secret {ns}/{upstream} not found"),
        );
        return Ok(None);
    };
    let user_key = (!dsn::uses_instance_user(block)).then_some("username");
    let mut missing = user_key
        .into_iter()
        .chain(["password"])
        .filter(|k| secret_value(&secret, k).is_none());
    if let Some(key) = missing.next() {
        wait(
            pass,
            format!("Upstream database credentials Secret {ns}/{upstream} missing key \"{key}\""),
        );
        return Ok(None);
    }
    let user = match user_key {
        Some(key) => secret_value(&secret, key)
            .map(|v| v.expose().to_owned())
            .unwrap_or_default(),
        None => instance.to_owned(),
    };
    let password = secret_value(&secret, "password").unwrap_or_else(|| Sensitive::new(""));
    let connection = Sensitive::new(dsn::pymysql(
        block,
        &ns,
        &user,
        password.expose(),
        tls_mount,
    ));
    derived_secret::ensure(
        &pass.secrets(),
        Desired {
            name: target,
            data: derived_secret::one_key(CONNECTION_KEY, &connection),
            owner: pass.owner_reference()?,
            labels: pass.common_labels(),
        },
    )
    .await?;
    Ok(Some(connection.digest()))
}

fn wait(pass: &mut NovaPass, message: String) {
    pass.set_condition(
        NovaConditionType::SecretsReady,
        false,
        Reason::WaitingForDBCredentials,
        message,
    );
}
