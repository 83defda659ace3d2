//! The Prometheus text format, read just enough for the scale run: samples with their labels.

use std::collections::BTreeMap;

/// One sample: metric name, labels, value.
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, empty when absent.
    pub fn label(&self, key: &str) -> &str {
        self.labels.get(key).map(String::as_str).unwrap_or_default()
    }
}

/// Every sample of `text` whose metric name is `name`.
pub fn samples(text: &str, name: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(parse)
        .filter(|s| s.name == name)
        .collect()
}

fn parse(line: &str) -> Option<Sample> {
    let (series, value) = line.rsplit_once(' ')?;
    let value = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, rest.strip_suffix('}')?),
        None => (series, ""),
    };
    let mut parsed = BTreeMap::new();
    let mut rest = labels;
    while let Some((key, after)) = rest.split_once("=\"") {
        let end = after.find('"')?;
        parsed.insert(
            key.trim_start_matches(',').to_owned(),
            after[..end].to_owned(),
        );
        rest = &after[end + 1..];
    }
    Some(Sample {
        name: name.to_owned(),
        labels: parsed,
        value,
    })
}

/// The `q` quantile of a cumulative histogram given as (upper bound, count) pairs sorted by
/// bound, interpolated linearly inside the bucket it falls in (as `histogram_quantile` does).
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(bound, count) in buckets {
        if count >= rank {
            if bound.is_infinite() {
                return Some(lower.0);
            }
            let inside = (rank - lower.1) / (count - lower.1).max(f64::MIN_POSITIVE);
            return Some(lower.0 + (bound - lower.0) * inside);
        }
        lower = (bound, count);
    }
    None
}

/// The buckets of histogram `name` (summed over every series `keep` accepts), as (upper bound,
/// cumulative count) sorted by bound.
pub fn buckets(text: &str, name: &str, keep: impl Fn(&Sample) -> bool) -> Vec<(f64, f64)> {
    let mut by_bound: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for sample in samples(text, &format!("{name}_bucket"))
        .iter()
        .filter(|s| keep(s))
    {
        let le = sample.label("le");
        let bound = match le {
            "+Inf" => f64::INFINITY,
            other => other.parse().unwrap_or(f64::INFINITY),
        };
        by_bound.entry(le.to_owned()).or_insert((bound, 0.0)).1 += sample.value;
    }
    let mut out: Vec<(f64, f64)> = by_bound.into_values().collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The bucket-wise difference `after - before` of two histograms of the same buckets.
pub fn minus(after: &[(f64, f64)], before: &[(f64, f64)]) -> Vec<(f64, f64)> {
    after
        .iter()
        .map(|&(bound, count)| {
            let earlier = before
                .iter()
                .find(|(b, _)| *b == bound)
                .map_or(0.0, |(_, c)| *c);
            (bound, count - earlier)
        })
        .collect()
}

/// The sum of every sample of `name` that `keep` accepts (a histogram's `_sum` or `_count`).
pub fn total(text: &str, name: &str, keep: impl Fn(&Sample) -> bool) -> f64 {
    samples(text, name)
        .iter()
        .filter(|s| keep(s))
        .map(|s| s.value)
        .sum()
}

/// The share of a cumulative histogram's observations at or below `bound`, when it is a bucket
/// bound.
pub fn share_within(buckets: &[(f64, f64)], bound: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    let within = buckets.iter().find(|(b, _)| *b == bound)?.1;
    (total > 0.0).then(|| within / total)
}

/// The text of a plain-HTTP `/metrics` on a loopback port (empty when it cannot be read).
pub async fn scrape(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return String::new();
    };
    let request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body).await;
    body
}
