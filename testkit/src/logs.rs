//! What the in-process controllers of this test binary logged: the kit installs one capturing
//! subscriber per process, so a test can assert on a log line and a wait that gives up can
//! show the controller's last words about the namespace it waited in.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The most the capture keeps; past it, the older half is dropped (a tier binary runs every
/// controller of its tests, and a log kept whole would grow with the run).
const KEPT_BYTES: usize = 16 << 20;

/// Lines of the tail a failed wait shows.
const TAIL_LINES: usize = 40;

fn buffer() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Captured(buffer.clone());
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .try_init();
        buffer
    })
}

/// Installs the capture (the first call does; later calls are free). Every helper that starts
/// a controller calls it, so its first log line is kept.
pub fn capture() {
    buffer();
}

/// Everything captured so far (since the capture started, less what the cap dropped).
pub fn logged() -> String {
    String::from_utf8_lossy(&buffer().lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
}

/// The last lines that mention `needle` (a namespace, an object name), oldest first.
pub fn tail(needle: &str) -> Vec<String> {
    let all = logged();
    let mut lines: Vec<String> = all
        .lines()
        .rev()
        .filter(|l| l.contains(needle))
        .take(TAIL_LINES)
        .map(str::to_owned)
        .collect();
    lines.reverse();
    lines
}

/// A log sink appending to the shared buffer.
#[derive(Clone)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() + bytes.len() > KEPT_BYTES {
            let cut = kept.len() / 2;
            let start = kept[cut..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(kept.len(), |p| cut + p + 1);
            kept.drain(..start);
        }
        kept.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
