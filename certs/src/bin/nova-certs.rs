//! Writes a throw-away CA and a serving certificate for the given SANs into a directory
//! (`ca.crt`, `tls.crt`, `tls.key`), e.g. to run the webhook locally against the test control
//! plane: `nova-certs --out /tmp/webhook-certs --san 127.0.0.1 --san localhost`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use nova_certs::ServingBundle;

#[derive(Parser)]
#[command(about = "Write ca.crt, tls.crt and tls.key for the given SANs into a directory")]
struct Args {
    /// Directory to write into (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Subject alternative name; IP addresses become IP SANs. Repeat for more.
    #[arg(long = "san", default_values = ["127.0.0.1", "localhost"])]
    sans: Vec<String>,
    /// Common name of the serving certificate.
    #[arg(long, default_value = "nova-webhook")]
    common_name: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let sans: Vec<&str> = args.sans.iter().map(String::as_str).collect();
    let result = ServingBundle::generate(&args.common_name, &sans)
        .and_then(|bundle| bundle.write_to_dir(&args.out));
    match result {
        Ok(()) => {
            println!("{}", args.out.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("nova-certs: {err}");
            ExitCode::FAILURE
        }
    }
}
