//! The command line of `nova-controller`: the controller itself by default (its flags in
//! `flags`, its run in `serve`), or one of the `subcommands` that need no cluster. Binary-local:
//! the library crate stays free of argument parsing and process set-up.

mod admin;
mod flags;
mod selftest;
mod serve;
mod subcommands;

use clap::Parser;

use flags::Flags;
use subcommands::Command;

/// Reconciles Nova and NovaCompute resources.
///
/// A flag given twice takes its last value, so the chart's `extraArgs` (appended after the
/// flags the chart renders) can override one of them.
#[derive(Debug, Parser)]
#[command(name = "nova-controller", version, args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    flags: Flags,
}

/// Parses the command line and runs what it asks for.
pub async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(command) => command.run().await,
        None => serve::run(cli.flags).await,
    }
}
