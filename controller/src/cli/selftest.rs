//! `nova-controller selftest`: what the chart's `helm test` hook runs inside the cluster. It
//! passes when the served CRDs are this release's (`crd_currency`: their schema digests) and
//! the webhook answers through the API server: a server-side dry-run create of the Example
//! Nova named `selftest-api`, which only the webhook refuses (a Nova's name must not end in
//! `-api`), comes back refused with the webhook's own message. Nothing is stored.

use std::time::Duration;

use anyhow::{Context as _, bail};
use kube::api::{Api, PostParams};
use kube::{Client, Config};
use nova_api::v1alpha1::Nova;
use nova_controller::crd_currency::{self, Currency};

/// The Example Nova the release ships (`examples/nova.yaml`).
const EXAMPLE: &str = include_str!("../../../examples/nova.yaml");
/// The name only the webhook refuses.
const NAME: &str = "selftest-api";
/// What the webhook says about it.
const DENIAL: &str = "name must not end in \"-api\"";

/// Runs both checks against the cluster the pod runs in, each request bounded by `timeout`;
/// prints what it found, and fails naming what is wrong.
pub async fn run(namespace: &str, timeout: Duration) -> anyhow::Result<()> {
    let mut config = Config::infer()
        .await
        .context("inferring the in-cluster client configuration")?;
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    let client = Client::try_from(config)?;
    tokio::time::timeout(timeout * 4, checks(&client, namespace))
        .await
        .context("the self-test did not finish in time")?
}

async fn checks(client: &Client, namespace: &str) -> anyhow::Result<()> {
    let mut failures = Vec::new();
    for checked in crd_currency::check(client).await {
        match &checked.currency {
            Currency::Current => println!("ok: the served CRD {} is this release's", checked.crd),
            other => failures.push(format!("the CRD {}: {other:?}", checked.crd)),
        }
    }
    match webhook_answers(client, namespace).await {
        Ok(()) => println!("ok: the webhook answers the API server and refuses what it should"),
        Err(e) => failures.push(format!("the webhook: {e:#}")),
    }
    if !failures.is_empty() {
        bail!("self-test failed:\n  {}", failures.join("\n  "));
    }
    Ok(())
}

/// The dry-run create of a Nova only the webhook refuses, refused by the webhook.
async fn webhook_answers(client: &Client, namespace: &str) -> anyhow::Result<()> {
    let mut nova: Nova = serde_saphyr::from_str(EXAMPLE).context("the Example Nova")?;
    nova.metadata.name = Some(NAME.to_owned());
    nova.metadata.namespace = Some(namespace.to_owned());
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match Api::<Nova>::namespaced(client.clone(), namespace)
        .create(&params, &nova)
        .await
    {
        Err(kube::Error::Api(status)) if status.message.contains(DENIAL) => Ok(()),
        Err(e) => bail!("a dry-run create of Nova {namespace}/{NAME} failed otherwise: {e}"),
        Ok(_) => bail!(
            "a dry-run create of Nova {namespace}/{NAME} was admitted: no webhook validated it"
        ),
    }
}
