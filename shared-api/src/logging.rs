//! Both binaries' log filter, switchable at runtime.
//!
//! The filter (tracing's `EnvFilter` syntax, e.g. `info,nova_controller=debug`) comes from the
//! binary's `--log-filter-file` when it is set and readable, else `RUST_LOG`, else the binary's
//! default. The file is read again every [`FOLLOW_EVERY`]: a changed content becomes the filter
//! without a restart, so an SRE raises the level of a running controller or webhook by editing
//! the chart's logging ConfigMap (the kubelet updates the mounted file within its sync period,
//! about a minute). A content that does not parse is logged and the filter in force stays.
//! Each binary keeps its own output shape (stream, JSON layout): it hands [`install`] its
//! output layer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tracing_subscriber::layer::{Layered, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

/// How often the filter file is read again.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(5);

/// Swaps the filter in force.
type FilterHandle = reload::Handle<EnvFilter, Registry>;

/// What a binary's output layer sits on: the registry behind the reloadable filter.
pub type Filtered = Layered<reload::Layer<EnvFilter, Registry>, Registry>;

/// Installs the global subscriber: `output` behind a reloadable filter, from `file` when it is
/// readable and valid, else `RUST_LOG`, else `default`; with a `file`, follows it on the
/// current Tokio runtime (every [`FOLLOW_EVERY`], a changed content becomes the filter).
pub fn install(
    output: Box<dyn Layer<Filtered> + Send + Sync>,
    file: Option<PathBuf>,
    default: &str,
) {
    let text = file
        .as_deref()
        .and_then(|path| std::fs::read_to_string(path).ok())
        .and_then(|text| parse(&text).ok().map(|_| text.trim().to_owned()))
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| default.to_owned());
    let filter = parse(&text).unwrap_or_else(|_| EnvFilter::new(default));
    let (filter, handle) = reload::Layer::new(filter);
    tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .init();
    if let Some(path) = file {
        tokio::spawn(follow(path, handle, text));
    }
}

/// A filter text as `EnvFilter` takes it; empty is an error (it would silence everything).
fn parse(text: &str) -> Result<EnvFilter, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("the filter is empty".into());
    }
    EnvFilter::try_new(text).map_err(|e| e.to_string())
}

/// Reads `path` once: a content other than `current` that parses becomes the filter (and
/// `current`). Returns what happened, for the log.
fn refresh(path: &Path, handle: &FilterHandle, current: &mut String) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    if text == current {
        return None;
    }
    Some(match parse(text) {
        Ok(filter) => match handle.reload(filter) {
            Ok(()) => {
                let note = format!("log filter changed from {current:?} to {text:?}");
                *current = text.to_owned();
                note
            }
            Err(e) => format!("log filter {text:?} not applied: {e}"),
        },
        Err(e) => format!("log filter {text:?} in {} ignored: {e}", path.display()),
    })
}

/// Follows `path` forever: every [`FOLLOW_EVERY`], a changed content becomes the filter.
async fn follow(path: PathBuf, handle: FilterHandle, mut current: String) {
    let mut tick = tokio::time::interval(FOLLOW_EVERY);
    loop {
        tick.tick().await;
        if let Some(note) = refresh(&path, &handle, &mut current) {
            tracing::warn!("{note}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reloadable filter (kept alive: a handle to a dropped layer reloads nothing) and
    /// its handle.
    fn reloadable(text: &str) -> (reload::Layer<EnvFilter, Registry>, FilterHandle) {
        reload::Layer::new(EnvFilter::new(text))
    }

    fn in_force(handle: &FilterHandle) -> String {
        handle.with_current(|f| f.to_string()).expect("a filter")
    }

    #[test]
    fn a_changed_file_becomes_the_filter_and_a_bad_one_is_ignored() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("filter");
        let (_layer, handle) = reloadable("info");
        let mut current = "info".to_owned();
        assert_eq!(refresh(&path, &handle, &mut current), None, "no file yet");

        std::fs::write(&path, "info\n").expect("write");
        assert_eq!(refresh(&path, &handle, &mut current), None, "unchanged");

        std::fs::write(&path, "debug,kube=warn\n").expect("write");
        let note = refresh(&path, &handle, &mut current).expect("changed");
        assert!(note.contains("debug,kube=warn"), "{note}");
        assert_eq!(current, "debug,kube=warn");
        assert!(in_force(&handle).contains("debug"), "{}", in_force(&handle));

        for bad in ["nova_controller=loud", "   "] {
            std::fs::write(&path, bad).expect("write");
            let note = refresh(&path, &handle, &mut current).expect("reported");
            assert!(note.contains("ignored"), "{note}");
            assert_eq!(current, "debug,kube=warn", "the filter in force stays");
        }
    }
}
