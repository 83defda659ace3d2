//! Runs one webhook on one AdmissionReview body a given number of times, in process (no HTTP,
//! no TLS), for instruction counts that hold on a loaded machine. Two callgrind runs that
//! differ only in the count give the cost of one review:
//!
//! ```sh
//! B=webhook/fuzz/seeds/admission/novas-create.json
//! valgrind --tool=callgrind target/release/examples/reviews mutate 1 $B
//! valgrind --tool=callgrind target/release/examples/reviews mutate 201 $B
//! # (Ir of the second - Ir of the first) / 200 = instructions per review
//! ```

use nova_api::v1alpha1::Nova;
use nova_webhook::review::{self, Offline, Webhook};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, verb, count, body] = args.as_slice() else {
        anyhow::bail!("usage: reviews <mutate|validate> <count> <AdmissionReview of a Nova>");
    };
    let webhook = match verb.as_str() {
        "mutate" => Webhook::mutate::<Nova>(),
        "validate" => Webhook::validate::<Nova>(),
        other => anyhow::bail!("no webhook {other:?}"),
    };
    let count: usize = count.parse()?;
    let body = std::fs::read(body)?;
    nova_webhook::catalog::init()?;
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let mut bytes = 0;
    for _ in 0..count {
        let handled = rt.block_on(review::handle(webhook, &body, &Offline));
        anyhow::ensure!(handled.status == 200, "answered {}", handled.status);
        bytes += handled.body.len();
    }
    println!("{count} {verb} reviews, {bytes} response bytes");
    Ok(())
}
