//! A scale run of the Nova controller against a real API server: how long N Novas take to
//! converge through the credential, Config and ComputeConfig steps, how many writes and
//! GET/LIST reads that costs, and how many a pass over the converged set costs (the answer
//! must be zero for both). All Novas share one namespace and one set of input Secrets, so the
//! content cache fills once for all of them; Novas with Secrets of their own cost about one
//! read per referenced Secret on their first pass.
//!
//! `cargo bench -p nova-controller --bench scale` (N from `NOVA_SCALE_N`, default 50).

#[path = "../tests/nova_support/mod.rs"]
mod nova_support;

use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams, PostParams};
use nova_api::v1alpha1::Nova;
use nova_support::*;

/// Counts the Novas whose ComputeConfigReady is True.
async fn converged(novas: &Api<Nova>) -> usize {
    let list = novas.list(&Default::default()).await.expect("list");
    list.items
        .iter()
        .filter(|n| {
            n.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "ComputeConfigReady" && c.status == "True")
            })
        })
        .count()
}

/// Writes to Secrets, ConfigMaps and Nova status, then GET/LIST reads of everything a pass
/// reads (Secrets, ConfigMaps, Deployments and the other operators' kinds).
async fn all_requests(client: &kube::Client) -> [u64; 4] {
    [
        writes(client, "secrets", "").await,
        writes(client, "configmaps", "").await,
        writes(client, "novas", "status").await,
        requests(client, &READ_RESOURCES, &READ_VERBS).await,
    ]
}

fn main() {
    let n: usize = std::env::var("NOVA_SCALE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let cp = nova_test_harness::shared().await.expect("control plane");
        let client = cp.client().expect("client");
        let ns = cp.namespace("nova-scale").await.expect("namespace");
        provide_inputs(&client, &ns).await;
        let metrics = start_controller(client.clone(), &ns).await;
        let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);

        let before = all_requests(&client).await;
        let started = Instant::now();
        for i in 0..n {
            let mut nova = example(&ns);
            nova.metadata.name = Some(format!("nova-{i:03}"));
            novas.create(&PostParams::default(), &nova).await.expect("create");
        }
        let created = started.elapsed();
        while converged(&novas).await < n {
            assert!(started.elapsed() < Duration::from_secs(600), "{n} Novas did not converge in 10 minutes");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let convergence = started.elapsed();
        let after = all_requests(&client).await;
        tokio::time::sleep(Duration::from_secs(3)).await;

        let passes_before = passes(&metrics);
        let steady = all_requests(&client).await;
        for i in 0..n {
            let touch = serde_json::json!({"metadata": {"annotations": {"scale.nova/touch": "1"}}});
            novas.patch(&format!("nova-{i:03}"), &PatchParams::default(), &Patch::Merge(touch)).await.expect("touch");
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while passes(&metrics) < passes_before + n as u64 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let quiet = all_requests(&client).await;
        let touched_passes = passes(&metrics) - passes_before;

        let per = |total: u64| total as f64 / n as f64;
        println!("scale run: {n} Novas (created in {:.1}s)", created.as_secs_f64());
        println!("  converged (ComputeConfigReady=True for all) after {:.1}s, {:.1} Novas/s", convergence.as_secs_f64(), n as f64 / convergence.as_secs_f64());
        println!(
            "  writes while converging: {} Secret ({:.1}/Nova), {} ConfigMap ({:.1}/Nova), {} status ({:.1}/Nova)",
            after[0] - before[0], per(after[0] - before[0]), after[1] - before[1], per(after[1] - before[1]), after[2] - before[2], per(after[2] - before[2])
        );
        println!(
            "  reads while converging: {} GET/LIST ({:.1}/Nova)",
            after[3] - before[3], per(after[3] - before[3])
        );
        println!(
            "  steady state: {touched_passes} passes over converged Novas issued {} Secret, {} ConfigMap and {} status writes, {} GET/LIST reads ({:.2} reads/pass)",
            quiet[0] - steady[0], quiet[1] - steady[1], quiet[2] - steady[2], quiet[3] - steady[3],
            (quiet[3] - steady[3]) as f64 / touched_passes.max(1) as f64
        );
        for step in ["Secrets", "DBConnectionSecrets", "TransportURLSecret", "Config", "ComputeConfig"] {
            let h = metrics.reconcile_duration.with_label_values(&[step]);
            println!("  {step:<20} {:>6} runs, mean {:.1} ms", h.get_sample_count(), 1000.0 * h.get_sample_sum() / h.get_sample_count().max(1) as f64);
        }
    });
}
