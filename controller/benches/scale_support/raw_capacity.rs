//! The API server's raw capacity for the controller's object set: every object the Novas and
//! pools own in the measured namespace (found through discovery, by owner reference), created
//! again in a fresh namespace by a plain client at the controller's parallelism, with nothing
//! read, compared, planned or waited for.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::{Discovery, Scope, verbs};

/// What the plain client did.
pub struct Raw {
    pub objects: usize,
    pub elapsed: Duration,
    /// Objects by kind, sorted by count.
    pub kinds: Vec<(String, usize)>,
}

/// Whether a Nova or a NovaCompute owns the object.
fn owned_by_operator(object: &DynamicObject) -> bool {
    object
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| matches!(o.kind.as_str(), "Nova" | "NovaCompute"))
}

/// The object as a client would first create it: its name, labels, annotations and body;
/// nothing the API server or another controller filled in.
fn as_created(object: &DynamicObject) -> DynamicObject {
    let mut copy = DynamicObject {
        types: object.types.clone(),
        metadata: Default::default(),
        data: object.data.clone(),
    };
    copy.metadata.name = object.metadata.name.clone();
    copy.metadata.labels = object.metadata.labels.clone();
    copy.metadata.annotations = object.metadata.annotations.clone();
    if let Some(body) = copy.data.as_object_mut() {
        body.remove("status");
    }
    if let Some(spec) = copy.data["spec"].as_object_mut() {
        // A Service's allocated addresses.
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    // A Job's generated selector and the pod labels it selects.
    if object.types.as_ref().is_some_and(|t| t.kind == "Job") {
        if let Some(spec) = copy.data["spec"].as_object_mut() {
            spec.remove("selector");
        }
        if let Some(labels) = copy.data["spec"]["template"]["metadata"]["labels"].as_object_mut() {
            labels.retain(|k, _| !k.contains("controller-uid") && !k.contains("job-name"));
        }
    }
    copy
}

/// Creates a copy of everything the operator owns in `from` inside `to`, `parallelism` creates
/// at once.
pub async fn replay(client: &Client, from: &str, to: &str, parallelism: usize) -> Raw {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let mut objects = Vec::new();
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            if capabilities.scope != Scope::Namespaced
                || !capabilities.supports_operation(verbs::LIST)
                || !capabilities.supports_operation(verbs::CREATE)
            {
                continue;
            }
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), from, &resource);
            let Ok(list) = api.list(&ListParams::default()).await else {
                continue;
            };
            for mut object in list.items.into_iter().filter(owned_by_operator) {
                object.types = Some(kube::api::TypeMeta {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                });
                objects.push((resource.clone(), as_created(&object)));
            }
        }
    }
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for (resource, _) in &objects {
        *kinds.entry(resource.kind.clone()).or_default() += 1;
    }
    let count = objects.len();
    let started = Instant::now();
    futures::stream::iter(objects.into_iter().map(|(resource, object)| {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), to, &resource);
        async move { api.create(&PostParams::default(), &object).await.map(drop) }
    }))
    .buffer_unordered(parallelism)
    .try_collect::<Vec<()>>()
    .await
    .expect("raw create");
    let elapsed = started.elapsed();
    let mut kinds: Vec<(String, usize)> = kinds.into_iter().collect();
    kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
    Raw {
        objects: count,
        elapsed,
        kinds,
    }
}
