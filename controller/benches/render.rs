//! The full render of the spec's Example: the config ConfigMap (nova.conf, the four overlays,
//! the hash) and both compute fragments. The remote fragment needs spec.remoteCompute, which
//! requires messaging.tls, so the remote case adds both to the Example.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use nova_api::v1alpha1::{MessagingTLSSpec, Nova, NovaRemoteComputeSpec, SecretRefSpec};
use nova_controller::render::{ContractVariant, render_compute_fragment, render_config};

fn example() -> Nova {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/nova.yaml");
    let text = std::fs::read_to_string(path).expect("examples/nova.yaml");
    serde_saphyr::from_str(&text).expect("a Nova manifest")
}

fn bench(c: &mut Criterion) {
    let nova = example();
    let name = nova.metadata.name.clone().expect("name");
    let namespace = nova.metadata.namespace.clone().expect("namespace");
    let spec = nova.spec;
    let mut remote = spec.clone();
    remote.messaging.tls = Some(MessagingTLSSpec {
        ca_bundle_secret_ref: SecretRefSpec {
            name: "rabbitmq-ca".into(),
            key: None,
        },
    });
    remote.remote_compute = Some(NovaRemoteComputeSpec {
        keystone_endpoint: "https://keystone.example.com/v3".into(),
        transport_url_secret_ref: SecretRefSpec {
            name: "rabbitmq-external".into(),
            key: None,
        },
    });

    c.bench_function("render_config/example", |b| {
        b.iter(|| render_config(black_box(&name), black_box(&namespace), black_box(&spec)))
    });
    c.bench_function("render_compute_fragment/example/in-cluster", |b| {
        b.iter(|| {
            render_compute_fragment(
                black_box(&name),
                black_box(&namespace),
                black_box(&spec),
                ContractVariant::InCluster,
            )
        })
    });
    c.bench_function("render_compute_fragment/example/remote", |b| {
        b.iter(|| {
            render_compute_fragment(
                black_box(&name),
                black_box(&namespace),
                black_box(&remote),
                ContractVariant::Remote,
            )
        })
    });
    c.bench_function("render_all/example", |b| {
        b.iter(|| {
            let config = render_config(black_box(&name), black_box(&namespace), black_box(&remote));
            let local =
                render_compute_fragment(&name, &namespace, &remote, ContractVariant::InCluster);
            let far = render_compute_fragment(&name, &namespace, &remote, ContractVariant::Remote);
            (config, local, far)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
