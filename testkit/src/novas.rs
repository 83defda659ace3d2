//! The waits and reads the suites make on a Nova and on a pool, each one [`Wait`] about the
//! object, so a give-up shows its conditions, events and the controller's log.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams};
use kube::{Client, ResourceExt};
use nova_api::conditions::NovaConditionType;
use nova_api::v1alpha1::{Nova, NovaCompute};

use crate::conditions::Conditioned;
use crate::fixtures::{CONVERGED, TIMEOUT};
use crate::inputs::accept_routes;
use crate::wait::{Seen, Timeout, Wait};

/// How long a pool may take to reach a state: a few of its 30 s polls on a loaded machine.
pub const POOL_TIMEOUT: Duration = Duration::from_secs(300);

/// A wait about the Nova `name` of `novas`.
pub fn about_nova(
    novas: &Api<Nova>,
    name: &str,
    label: impl Into<String>,
    timeout: Duration,
) -> Wait {
    let client = novas.clone().into_client();
    Wait::new(label, timeout).about::<Nova>(&client, namespace_of(novas).as_deref(), name)
}

/// A wait about the pool `name` of `pools`.
pub fn about_pool(
    pools: &Api<NovaCompute>,
    name: &str,
    label: impl Into<String>,
    timeout: Duration,
) -> Wait {
    let client = pools.clone().into_client();
    Wait::new(label, timeout).about::<NovaCompute>(&client, namespace_of(pools).as_deref(), name)
}

/// The namespace an Api is scoped to (read from its resource URL).
fn namespace_of<K: kube::Resource>(api: &Api<K>) -> Option<String> {
    let path = api.resource_url();
    let rest = path.split("/namespaces/").nth(1)?;
    Some(rest.split('/').next()?.to_owned())
}

/// Waits until the Nova `name` satisfies `check`; returns it.
pub async fn wait_nova_until(
    novas: &Api<Nova>,
    name: &str,
    label: &str,
    timeout: Duration,
    check: impl Fn(&Nova) -> bool,
) -> Result<Nova, Timeout> {
    about_nova(novas, name, label, timeout)
        .for_object(novas, name, check)
        .await
}

/// The (status, reason, message) of one condition of the Nova `nova`, once it exists.
pub async fn condition(novas: &Api<Nova>, type_: &str) -> Option<(String, String, String)> {
    novas
        .get("nova")
        .await
        .expect("nova")
        .triple(Nova::type_named(type_))
}

/// Waits until condition `type_` of the Nova `nova` carries `reason`; returns its message.
pub async fn wait_for(novas: &Api<Nova>, type_: &str, reason: &str) -> String {
    wait_reason(novas, "nova", type_, reason, Duration::from_secs(90)).await
}

/// Waits until the Nova's SecretsReady condition carries `reason`; returns its message.
pub async fn wait_for_reason(novas: &Api<Nova>, name: &str, reason: &str) -> String {
    wait_reason(novas, name, "SecretsReady", reason, TIMEOUT).await
}

async fn wait_reason(
    novas: &Api<Nova>,
    name: &str,
    type_: &str,
    reason: &str,
    timeout: Duration,
) -> String {
    let t = Nova::type_named(type_);
    let nova = wait_nova_until(novas, name, &format!("{type_}={reason}"), timeout, |n| {
        n.reason(t) == Some(reason)
    })
    .await
    .expect("the Nova's condition");
    nova.condition(t)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Deletes the Nova `nova` and waits until its finalizer released it.
pub async fn delete_until_gone(novas: &Api<Nova>) {
    delete_until_gone_within(novas, TIMEOUT).await;
}

/// [`delete_until_gone`], waiting at most `timeout`.
pub async fn delete_until_gone_within(novas: &Api<Nova>, timeout: Duration) {
    novas
        .delete("nova", &DeleteParams::default())
        .await
        .expect("delete");
    about_nova(novas, "nova", "the finalizer released the Nova", timeout)
        .for_deletion(novas, "nova")
        .await
        .expect("the Nova is gone");
}

/// The first data entry of the Secret `name`, as (key, text).
pub async fn data_of(api: &Api<Secret>, name: &str) -> Option<(String, String)> {
    let secret = api.get_opt(name).await.expect("get")?;
    let (key, value) = secret.data?.into_iter().next()?;
    Some((key, String::from_utf8(value.0).expect("utf8")))
}

/// Waits until the first data entry of the Secret `name` passes `check`; returns it.
pub async fn wait_for_data(api: &Api<Secret>, name: &str, check: impl Fn(&str) -> bool) -> String {
    Wait::new(format!("Secret {name} to reach the expected data"), TIMEOUT)
        .until(|| async {
            match data_of(api, name).await {
                Some((_, value)) if check(&value) => Seen::Done(value),
                Some((key, _)) => Seen::Saw(format!("key {key} with other data")),
                None => Seen::Saw("no data".into()),
            }
        })
        .await
        .expect("the Secret's data")
}

/// Waits until every condition of the pipeline so far of the Nova `name` is True (kwok makes
/// the workloads' pods ready, [`accept_routes`] plays the Gateway, the controller probes a
/// simulated nova-api); `alive` fails early (a process that exited).
pub async fn wait_converged(
    novas: &Api<Nova>,
    name: &str,
    alive: impl FnMut() -> Result<(), String>,
) {
    wait_true(novas, name, &CONVERGED, alive).await;
}

/// Waits until each of `conditions` of the Nova `name` is True, playing the Gateway meanwhile
/// (the probe accepts the routes the pass created since the last look).
pub async fn wait_true(
    novas: &Api<Nova>,
    name: &str,
    conditions: &[NovaConditionType],
    mut alive: impl FnMut() -> Result<(), String>,
) {
    let client = novas.clone().into_client();
    about_nova(novas, name, "the Nova to converge", TIMEOUT)
        .until(|| {
            let alive = alive();
            let client = client.clone();
            async move {
                if let Err(why) = alive {
                    panic!("{why}");
                }
                let nova = match novas.get(name).await {
                    Ok(nova) => nova,
                    Err(e) => return Seen::Saw(format!("reading the Nova: {e}")),
                };
                accept_routes(&client, &nova.namespace().unwrap_or_default()).await;
                let pending = nova.pending(conditions);
                if pending.is_empty() {
                    Seen::Done(())
                } else {
                    Seen::Saw(format!("{pending:#?}"))
                }
            }
        })
        .await
        .expect("the Nova converged");
}

/// Waits until `check` passes on the Nova `nova` of `client`'s namespace `ns`, playing the
/// Gateway meanwhile; fails after `timeout` with the Nova's state and (for the real tier) the
/// namespace's pods and their logs.
pub async fn wait_nova_for(
    client: &Client,
    ns: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&Nova) -> bool,
) -> Nova {
    let novas: Api<Nova> = Api::namespaced(client.clone(), ns);
    let waited = about_nova(&novas, "nova", what, timeout)
        .until(|| async {
            accept_routes(client, ns).await;
            match novas.get("nova").await {
                Ok(nova) if check(&nova) => Seen::Done(nova),
                Ok(nova) => Seen::Saw(format!("{:#?}", nova.pending(&CONVERGED))),
                Err(e) => Seen::Saw(format!("reading the Nova: {e}")),
            }
        })
        .await;
    match waited {
        Ok(nova) => nova,
        Err(timeout) => {
            crate::diagnose::dump(client, ns).await;
            panic!("{timeout}");
        }
    }
}

/// The (status, reason, message) of a pool condition, read from the API server.
pub async fn pool_condition(
    pools: &Api<NovaCompute>,
    name: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    pools
        .get_opt(name)
        .await
        .expect("pool")?
        .triple(NovaCompute::type_named(type_))
}

/// The pool `name` once `check` holds for it; fails after [`POOL_TIMEOUT`] naming the wait
/// (`what`) with the pool's conditions and events.
pub async fn wait_pool(
    pools: &Api<NovaCompute>,
    name: &str,
    what: &str,
    check: impl Fn(&NovaCompute) -> bool,
) -> Result<NovaCompute, Timeout> {
    wait_pool_for(pools, name, what, POOL_TIMEOUT, check).await
}

/// [`wait_pool`] with another bound.
pub async fn wait_pool_for(
    pools: &Api<NovaCompute>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&NovaCompute) -> bool,
) -> Result<NovaCompute, Timeout> {
    about_pool(pools, name, format!("{name}: {what}"), timeout)
        .for_object(pools, name, check)
        .await
}

/// The message of condition `type_` of pool `name`, once its reason is `reason`.
pub async fn pool_reason(
    pools: &Api<NovaCompute>,
    name: &str,
    type_: &str,
    reason: &str,
) -> Result<String, Timeout> {
    pool_reason_for(pools, name, type_, reason, POOL_TIMEOUT).await
}

/// [`pool_reason`] with another bound.
pub async fn pool_reason_for(
    pools: &Api<NovaCompute>,
    name: &str,
    type_: &str,
    reason: &str,
    timeout: Duration,
) -> Result<String, Timeout> {
    let t = NovaCompute::type_named(type_);
    let pool = wait_pool_for(pools, name, &format!("{type_}={reason}"), timeout, |p| {
        p.reason(t) == Some(reason)
    })
    .await?;
    Ok(pool
        .condition(t)
        .map(|c| c.message.clone())
        .unwrap_or_default())
}
