//! nova-controller: reconciles Nova control planes and NovaCompute node pools.

mod cli;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    cli::run().await
}
