//! The subcommands: what the binary does without a cluster (render a CR's children, describe
//! the conditions a Nova reports and which of them this build's pipeline sets) and the chart's
//! in-cluster self-test, apart from the controller it runs by default.

use std::path::{Path, PathBuf};

use clap::{Subcommand, ValueEnum};
use nova_api::conditions::NovaConditionType;
use nova_api::v1alpha1::Nova;
use nova_controller::clusters::SecretSource;
use nova_controller::nova;
use nova_controller::offline;
use nova_controller::pipeline::{Reconciled, Stage, Step};

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Prints every child the pipeline would create for a CR, without a cluster: a Nova, or a
    /// NovaCompute with `--nova`.
    Render {
        /// The Nova manifest, or the NovaCompute manifest when `--nova` is given.
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        /// The manifest of the Nova a NovaCompute joins: renders the pool's ConfigMap and
        /// DaemonSet as if the Nova had installed its release and published its contract, and
        /// lists on stderr the OpenStack actions the pool would take against an empty cloud.
        #[arg(long)]
        nova: Option<PathBuf>,
        /// A directory of Secret manifests to read credentials from; placeholders otherwise.
        #[arg(long)]
        secrets_dir: Option<PathBuf>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "yaml")]
        output: Output,
    },
    /// Prints every condition type a Nova reports besides Ready, one per line in the spec's
    /// order, each followed by its tags: `aggregated` when Ready needs it True, `step`
    /// when a step of this build's pipeline reports on it (the main job's view marks an
    /// aggregated condition without `step` as not implemented).
    Conditions,
    /// Checks from inside the cluster that the served CRDs are this release's and that the
    /// webhook answers the API server (what the chart's `helm test` runs).
    Selftest {
        /// The namespace of the dry-run Nova: one the webhooks admit.
        #[arg(long)]
        namespace: String,
        /// The bound on each request, in seconds.
        #[arg(long, default_value_t = 10)]
        timeout_seconds: u64,
    },
}

/// The render command's output format.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    /// A multi-document YAML stream.
    Yaml,
    /// One v1 List.
    Json,
}

impl Command {
    /// Runs the subcommand.
    pub async fn run(self) -> anyhow::Result<()> {
        match self {
            Command::Render {
                file,
                nova,
                secrets_dir,
                output,
            } => render(&file, nova.as_deref(), secrets_dir.as_deref(), output).await,
            Command::Conditions => {
                for line in condition_lines() {
                    println!("{line}");
                }
                Ok(())
            }
            Command::Selftest {
                namespace,
                timeout_seconds,
            } => {
                super::selftest::run(&namespace, std::time::Duration::from_secs(timeout_seconds))
                    .await
            }
        }
    }
}

/// The `render` subcommand: prints what was rendered (the objects on stdout, so they can be
/// piped to `kubectl`; a pool's OpenStack actions against an empty cloud on stderr), then fails
/// if the pipeline stopped.
async fn render(
    file: &Path,
    nova: Option<&Path>,
    secrets_dir: Option<&Path>,
    output: Output,
) -> anyhow::Result<()> {
    let secrets = match secrets_dir {
        Some(dir) => offline::secrets_from_dir(dir)?,
        None => SecretSource::default(),
    };
    let rendered = match nova {
        Some(nova) => {
            let pool = offline::read_pool(file)?;
            offline::render_pool(pool, offline::read_nova(nova)?, secrets).await?
        }
        None => offline::render(offline::read_nova(file)?, secrets).await?,
    };
    let text = match output {
        Output::Yaml => offline::to_yaml(&rendered.objects)?,
        Output::Json => offline::to_json(rendered.objects)?,
    };
    print!("{text}");
    if !rendered.effects.is_empty() {
        eprintln!("# OpenStack actions, against an empty cloud (not sent):");
        for effect in &rendered.effects {
            eprintln!("#   {effect}");
        }
    }
    match rendered.stopped {
        Some(reason) => anyhow::bail!("{reason}"),
        None => Ok(()),
    }
}

/// The `conditions` subcommand's lines: each Nova condition type but Ready itself and Paused
/// (there only while the pause annotation holds), with its `aggregated` and `step` tags.
fn condition_lines() -> Vec<String> {
    let steps = step_conditions();
    NovaConditionType::ALL
        .iter()
        .filter(|&&c| c != NovaConditionType::Ready && c != NovaConditionType::Paused)
        .map(|condition| {
            let mut line = condition.as_str().to_owned();
            if Nova::aggregated().contains(condition) {
                line.push_str(" aggregated");
            }
            if steps.contains(condition) {
                line.push_str(" step");
            }
            line
        })
        .collect()
}

/// The condition types the Nova pipeline's steps report on.
fn step_conditions() -> Vec<NovaConditionType> {
    nova::PIPELINE
        .iter()
        .flat_map(|stage| -> &[Step<Nova>] {
            match stage {
                Stage::Sequential(step) => std::slice::from_ref(step),
                Stage::Parallel(members) => members,
            }
        })
        .map(|step| step.condition)
        .collect()
}
