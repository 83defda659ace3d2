//! The Nova controller's watches and indexes (`common-types.md` §3.23): the kinds its steps read
//! (registered once with the cluster handle), the references a Nova makes by name (the reverse
//! index that maps a Secret or store event to its Novas), and the controller that runs the
//! shared skeleton over the Nova pipeline, woken by those kinds on the management cluster and,
//! mapped by ownership labels, on every engaged target cluster.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::core::ApiResource;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use nova_api::effective;
use nova_api::v1alpha1::{Nova, SecretStoreKind};

use super::TABLES;
use super::claimants::Claimants;
use crate::clusters::{KindSpec, KubeCluster, Meta};
use crate::metrics::Metrics;
use crate::objects::kinds;
use crate::pipeline::index::{ObjectKey, ReferenceIndex};
use crate::pipeline::kinds::registered;
use crate::pipeline::runner;

/// Every kind the Nova steps read or apply, and how the handle caches it, as the rows declare
/// them (each step file's `KINDS`): content where a step reads or applies it (the Secrets,
/// ConfigMaps, workloads and policies), other operators' objects whole. Every one is watched:
/// an event wakes the Novas that own the object or name it.
pub fn kinds() -> Vec<KindSpec> {
    registered(TABLES)
}

/// Every Secret name a Nova reads (`nova-reconciler.txt`, "Watches and indexes"): both database
/// credentials, the service-user password, the metadata shared secret, the CA bundle and client
/// certificate of each enabled database TLS block, the brownfield messaging Secret, the broker CA
/// bundle, and the remote transport URL while that block is set.
pub fn referenced_secrets(nova: &Nova) -> BTreeSet<String> {
    let spec = &nova.spec;
    let mut names = BTreeSet::new();
    for block in [&spec.api_database, &spec.database] {
        names.insert(block.secret_ref.name.clone());
        if crate::render::dsn::tls_enabled(block).is_some()
            && let Some(tls) = &block.tls
        {
            names.insert(tls.ca_bundle_secret_ref.name.clone());
            names.insert(tls.client_cert_secret_ref.name.clone());
        }
    }
    names.insert(spec.service_user.secret_ref.name.clone());
    names.insert(spec.metadata.shared_secret_ref.name.clone());
    if let Some(secret) = &spec.messaging.secret_ref {
        names.insert(secret.name.clone());
    }
    if let Some(tls) = &spec.messaging.tls {
        names.insert(tls.ca_bundle_secret_ref.name.clone());
    }
    if let Some(tls) = &spec.tls {
        names.insert(tls.ca_bundle_secret_ref.name.clone());
    }
    if let Some(remote) = &spec.remote_compute {
        names.insert(remote.transport_url_secret_ref.name.clone());
    }
    names
}

/// Every object a Nova references by name: its Secrets (and the same-named ExternalSecrets
/// that explain a missing one), its effective secret store, its RabbitmqCluster, and the
/// MariaDB clusters of both database blocks (one key when both name the same cluster, so an
/// event enqueues the Nova once).
pub fn references(nova: &Nova) -> Vec<ObjectKey> {
    let ns = nova.namespace().unwrap_or_default();
    let secret = ApiResource::erase::<Secret>(&());
    let external_secret = kinds::external_secret();
    let mut keys: Vec<ObjectKey> = referenced_secrets(nova)
        .iter()
        .flat_map(|name| {
            [
                ObjectKey::new(&secret, &ns, name),
                ObjectKey::new(&external_secret, &ns, name),
            ]
        })
        .collect();
    keys.push(match effective::secret_store(&nova.spec) {
        (SecretStoreKind::ClusterSecretStore, name) => {
            ObjectKey::new(&kinds::cluster_secret_store(), "", &name)
        }
        (SecretStoreKind::SecretStore, name) => ObjectKey::new(&kinds::secret_store(), &ns, &name),
    });
    if let Some(cluster) = &nova.spec.messaging.cluster_ref {
        keys.push(ObjectKey::new(
            &kinds::rabbitmq_cluster(),
            &ns,
            &cluster.name,
        ));
    }
    let clusters: BTreeSet<&str> = [&nova.spec.api_database, &nova.spec.database]
        .into_iter()
        .filter_map(|block| block.cluster_ref.as_ref().map(|c| c.name.as_str()))
        .collect();
    keys.extend(
        clusters
            .into_iter()
            .map(|name| ObjectKey::new(&kinds::mariadb(), &ns, name)),
    );
    keys
}

/// The Novas an event on a watched object concerns: its Nova owners, and every Nova that
/// references it by name.
fn novas_for(
    index: &ReferenceIndex<Nova>,
    kind: &ApiResource,
    meta: &Meta,
) -> Vec<ObjectRef<Nova>> {
    let ns = meta.namespace().unwrap_or_default();
    let api_version = Nova::api_version(&());
    let mut novas: Vec<ObjectRef<Nova>> = meta
        .owner_references()
        .iter()
        .filter(|o| o.kind == "Nova" && o.api_version == api_version)
        .map(|o| ObjectRef::new(&o.name).within(&ns))
        .collect();
    novas.extend(index.lookup(&ObjectKey::new(kind, &ns, &meta.name_any())));
    novas
}

/// How the controller runs.
pub use crate::pipeline::runner::Options;

/// Runs the Nova controller over `cluster` (whose caches must have synced) until `shutdown`
/// resolves.
pub async fn run(
    client: Client,
    metrics: Metrics,
    cluster: Arc<KubeCluster>,
    options: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (store, writer) = reflector::store();
    let ctx = runner::context::<Nova>(
        &client,
        cluster.clone(),
        metrics,
        "nova-controller",
        &options,
        Arc::new(Claimants::new(store.clone())),
    );
    let index = Arc::new(ReferenceIndex::new(references));
    let follow = {
        let index = index.clone();
        move |event: &watcher::Event<Nova>| index.apply(event)
    };
    let local = kinds().into_iter().map(|spec| {
        let index = index.clone();
        let kind = spec.resource;
        cluster
            .subscribe(&kind)
            .flat_map(move |meta| futures::stream::iter(novas_for(&index, &kind, &meta)))
            .boxed()
    });
    // The same kinds once more on every engaged target cluster, each event mapped by the
    // ownership labels and the reference index to the Novas placed on that cluster.
    let remote = options.targets.iter().flat_map(|fleet| {
        kinds().into_iter().map(|spec| {
            let (index, store) = (index.clone(), store.clone());
            let kind = spec.resource;
            fleet
                .subscribe(&kind)
                .flat_map(move |(target, meta)| {
                    let referencing = index.lookup(&ObjectKey::new(
                        &kind,
                        &meta.namespace().unwrap_or_default(),
                        &meta.name_any(),
                    ));
                    let novas = runner::placed_on(&store, &target, &meta, referencing);
                    futures::stream::iter(novas)
                })
                .boxed()
        })
    });
    let triggers = futures::stream::select_all(local.chain(remote));
    runner::run(ctx, &options, (store, writer), follow, triggers, shutdown).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clusters::Caching;
    use crate::nova::fixtures::example;
    use crate::pipeline::Reconciled;
    use crate::pipeline::kinds::{in_role, registration};
    use crate::pipeline::uses::Role;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    use k8s_openapi::api::core::v1::{ConfigMap, Service};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;

    #[test]
    fn the_rows_register_and_sweep_what_the_controller_listed_by_hand() {
        let mut listed = vec![
            KindSpec::of::<Secret>(Caching::OnDemand),
            KindSpec::of::<ConfigMap>(Caching::OnDemand),
            KindSpec::of::<Deployment>(Caching::OnDemand),
            KindSpec::of::<Service>(Caching::OnDemand),
            KindSpec::of::<PodDisruptionBudget>(Caching::OnDemand),
            KindSpec::of::<HorizontalPodAutoscaler>(Caching::OnDemand),
            KindSpec::of::<NetworkPolicy>(Caching::OnDemand),
            KindSpec::of::<Job>(Caching::OnDemand),
            KindSpec::of::<CronJob>(Caching::OnDemand),
            KindSpec::external(kinds::secret_store(), Caching::Full),
            KindSpec::external(kinds::cluster_secret_store(), Caching::Full).cluster_scoped(),
            KindSpec::external(kinds::external_secret(), Caching::Full),
            KindSpec::external(kinds::rabbitmq_cluster(), Caching::Full),
            KindSpec::external(kinds::http_route(), Caching::Full),
            KindSpec::external(kinds::vertical_pod_autoscaler(), Caching::Full),
            KindSpec::external(kinds::mariadb(), Caching::Full),
        ];
        listed.extend(
            kinds::mariadb_children()
                .into_iter()
                .map(|kind| KindSpec::external(kind, Caching::Full)),
        );
        assert_eq!(registration(kinds()), registration(listed));
        let mut swept: Vec<String> = <Nova as Reconciled>::remote_kinds()
            .into_iter()
            .map(|k| k.kind)
            .collect();
        swept.sort();
        let mut owned = [
            "ConfigMap",
            "CronJob",
            "Database",
            "Deployment",
            "Grant",
            "HTTPRoute",
            "HorizontalPodAutoscaler",
            "Job",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Secret",
            "Service",
            "User",
            "VerticalPodAutoscaler",
        ];
        owned.sort_unstable();
        assert_eq!(
            swept, owned,
            "common-types.md §3.17 \"Nova's remote kinds\""
        );
        assert_eq!(
            <Nova as Reconciled>::remote_kinds(),
            in_role(TABLES, Role::Owns)
        );
    }

    #[test]
    fn a_nova_references_its_secrets_store_and_broker() {
        let keys = references(&example());
        let secret = ApiResource::erase::<Secret>(&());
        for name in [
            "nova-api-db",
            "nova-db",
            "nova-keystone",
            "nova-metadata-secret",
        ] {
            assert!(
                keys.contains(&ObjectKey::new(&secret, "openstack", name)),
                "{name}"
            );
        }
        assert!(keys.contains(&ObjectKey::new(
            &kinds::cluster_secret_store(),
            "",
            "openbao-cluster-store"
        )));
        assert!(keys.contains(&ObjectKey::new(
            &kinds::rabbitmq_cluster(),
            "openstack",
            "openstack-rabbitmq"
        )));
    }

    #[test]
    fn a_mariadb_cluster_named_by_both_blocks_is_one_reference() {
        let mariadb = |nova: &Nova| {
            references(nova)
                .into_iter()
                .filter(|k| {
                    *k == ObjectKey::new(&kinds::mariadb(), "openstack", "openstack-mariadb")
                })
                .count()
        };
        let mut nova = example();
        assert_eq!(mariadb(&nova), 1, "both blocks name openstack-mariadb");
        nova.spec.api_database.cluster_ref = None;
        nova.spec.api_database.host = Some("db.example.com".into());
        assert_eq!(mariadb(&nova), 1, "the cell block still names it");
        nova.spec.database.cluster_ref = Some(nova_api::v1alpha1::ClusterRef {
            name: "other".into(),
        });
        assert_eq!(mariadb(&nova), 0);
        assert!(references(&nova).contains(&ObjectKey::new(
            &kinds::mariadb(),
            "openstack",
            "other"
        )));
    }

    #[test]
    fn an_event_maps_to_owners_and_referencing_novas() {
        let index = ReferenceIndex::new(references);
        index.apply(&watcher::Event::Apply(example()));
        let secret = ApiResource::erase::<Secret>(&());
        let meta = |name: &str, owner: Option<&str>| -> Meta {
            let mut m = kube::api::PartialObjectMeta::<kube::api::DynamicObject> {
                types: None,
                metadata: Default::default(),
                _phantom: Default::default(),
            };
            m.metadata.name = Some(name.into());
            m.metadata.namespace = Some("openstack".into());
            m.metadata.owner_references = owner.map(|o| {
                vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: Nova::api_version(&()).into_owned(),
                        kind: "Nova".into(),
                        name: o.into(),
                        ..Default::default()
                    },
                ]
            });
            Arc::new(m)
        };
        let names =
            |refs: Vec<ObjectRef<Nova>>| refs.into_iter().map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(
            names(novas_for(&index, &secret, &meta("nova-keystone", None))),
            ["nova"]
        );
        assert_eq!(
            names(novas_for(
                &index,
                &secret,
                &meta("nova-transport-url", Some("nova"))
            )),
            ["nova"]
        );
        assert!(novas_for(&index, &secret, &meta("unrelated", None)).is_empty());
    }
}
