//! Rules on the shared blocks (`common-types.md` Part 1) and the shared conventions of §3.24.

use nova_api::v1alpha1::{
    CacheSpec, CredentialsMode, DatabaseSpec, GatewaySpec, ImageSpec, LOG_LEVELS, LoggingSpec,
    MessagingSpec, SecretStoreRefSpec, TargetClusterRefSpec, UWSGISpec,
};

use super::{RENDERED_CRLF, has_line_break};
use crate::field::{BadValue, FieldError, Path, Violations};
use crate::grammar;

/// The oldest OpenStack release this operator version supports.
pub const RELEASE_FLOOR: (u32, u32) = (2026, 1);
/// The floor as text.
pub const RELEASE_FLOOR_TEXT: &str = "2026.1";
/// The rejection of a release below the floor.
pub const RELEASE_FLOOR_MESSAGE: &str = "must be 2026.1 or later: this operator version no longer supports OpenStack releases below 2026.1";

/// The warning on an unchanged stored release below the floor.
pub fn release_floor_warning(release: &str) -> String {
    format!(
        "spec.openStackRelease {} is below 2026.1, the oldest OpenStack release this operator version supports; the unchanged value is admitted, but the operator renders the 2026.1 configuration for it. Set spec.openStackRelease to 2026.1 or later.",
        crate::field::go_quote(release)
    )
}

/// Whether `s` matches `^\d{4}\.[12]$`.
pub fn matches_release_pattern(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 6
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'.'
        && matches!(b[5], b'1' | b'2')
}

/// spec.openStackRelease: the pattern twin and the release floor (reject on create and on
/// change, warn on an unchanged stored value).
pub fn release(new: &str, old: Option<&str>, errors: &mut Violations, warnings: &mut Vec<String>) {
    let path = "spec.openStackRelease";
    let Some(key) = release_pattern_key(new) else {
        errors.push(FieldError::invalid(
            path,
            new,
            r"should match '^\d{4}\.[12]$'",
        ));
        return;
    };
    if key < RELEASE_FLOOR {
        if old == Some(new) {
            warnings.push(release_floor_warning(new));
        } else {
            errors.push(FieldError::invalid(path, new, RELEASE_FLOOR_MESSAGE));
        }
    }
}

/// `(year, N)` of a value matching the release pattern. Any such value is ordered against
/// the floor, however old: a year the option catalogs do not know is still a release.
fn release_pattern_key(s: &str) -> Option<(u32, u32)> {
    if !matches_release_pattern(s) {
        return None;
    }
    let (year, n) = s.split_once('.')?;
    Some((year.parse().ok()?, n.parse().ok()?))
}

/// An ImageSpec: repository set, exactly one of tag or digest.
pub fn image(path: &Path, image: &ImageSpec, errors: &mut Violations) {
    if image.repository.is_empty() {
        errors.push(FieldError::required(
            path.child("repository"),
            "repository must be set",
        ));
    }
    if image.tag.is_some() == image.digest.is_some() {
        errors.push(FieldError::invalid_omitted(
            path,
            "exactly one of image.tag or image.digest must be set",
        ));
    }
}

/// A DatabaseSpec: the mode union and Dynamic-requires-clusterRef.
pub fn database(path: &Path, db: &DatabaseSpec, errors: &mut Violations) {
    if db.cluster_ref.is_some() == db.host.is_some() {
        errors.push(FieldError::invalid_omitted(
            path,
            "exactly one of clusterRef or host must be set",
        ));
    }
    if let Some(host) = db.host.as_deref()
        && host_with_port(host)
    {
        errors.push(FieldError::invalid(
            path.child("host"),
            host,
            format!("host must not include a port: set the port in {path}.port"),
        ));
    }
    if db.credentials_mode == Some(CredentialsMode::Dynamic) && db.cluster_ref.is_none() {
        errors.push(FieldError::invalid(
            path.child("credentialsMode"),
            "Dynamic",
            "credentialsMode Dynamic requires clusterRef (managed mode)",
        ));
    }
}

/// A `name:port` host (one colon: an IPv6 literal has several), a typo for the port field
/// that the DSN would turn into `name:port:3306`.
fn host_with_port(host: &str) -> bool {
    host.split_once(':').is_some_and(|(name, port)| {
        !name.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
    })
}

/// The cache block's own control-character message.
pub const CACHE_CRLF: &str = "value must not contain a newline or carriage return: it is rendered verbatim into the service configuration file, so a newline injects arbitrary config lines";

/// A CacheSpec: the mode union and the control-character guard.
pub fn cache(path: &Path, cache: &CacheSpec, errors: &mut Violations) {
    let has_servers = cache.servers.as_ref().is_some_and(|s| !s.is_empty());
    if cache.cluster_ref.is_some() == has_servers {
        errors.push(FieldError::invalid_omitted(
            path,
            "exactly one of clusterRef or servers must be set",
        ));
    }
    if let Some(cluster) = &cache.cluster_ref
        && has_line_break(&cluster.name)
    {
        errors.push(FieldError::invalid(
            path.child("clusterRef").child("name"),
            &cluster.name,
            CACHE_CRLF,
        ));
    }
    if let Some(backend) = cache.backend.as_deref()
        && has_line_break(backend)
    {
        errors.push(FieldError::invalid(
            path.child("backend"),
            backend,
            CACHE_CRLF,
        ));
    }
    for (i, server) in cache.servers.iter().flatten().enumerate() {
        if has_line_break(server) {
            errors.push(FieldError::invalid(
                path.child("servers").index(i),
                server,
                CACHE_CRLF,
            ));
        }
    }
}

/// A MessagingSpec: the mode union and the CA bundle name.
pub fn messaging(path: &Path, messaging: &MessagingSpec, errors: &mut Violations) {
    if messaging.cluster_ref.is_some() == messaging.secret_ref.is_some() {
        errors.push(FieldError::invalid_omitted(
            path,
            "exactly one of clusterRef or secretRef must be set",
        ));
    }
    if let Some(tls) = &messaging.tls
        && tls.ca_bundle_secret_ref.name.is_empty()
    {
        errors.push(FieldError::required(
            path.child("tls").child("caBundleSecretRef").child("name"),
            format!("caBundleSecretRef.name must be set when {path}.tls is configured"),
        ));
    }
}

/// A SecretStoreRefSpec (the kind enum is checked on the raw object).
pub fn secret_store(path: &Path, store: &SecretStoreRefSpec, errors: &mut Violations) {
    if store.name.is_empty() {
        errors.push(FieldError::required(
            path.child("name"),
            "store name must be set",
        ));
    }
}

/// A TargetClusterRefSpec: the name, and on UPDATE the two immutability rules.
pub fn target_cluster(
    path: &Path,
    new: Option<&TargetClusterRefSpec>,
    old: Option<Option<&TargetClusterRefSpec>>,
    errors: &mut Violations,
) {
    if let Some(target) = new
        && target.name.is_empty()
    {
        errors.push(FieldError::required(
            path.child("name"),
            "target cluster name must be set",
        ));
    }
    let Some(old) = old else { return };
    match (new, old) {
        (Some(_), None) | (None, Some(_)) => errors.push(FieldError::invalid_omitted(
            path,
            "targetClusterRef is immutable (adding or removing it after creation is not permitted)",
        )),
        (Some(n), Some(o)) if n.name != o.name => errors.push(FieldError::invalid(
            path.child("name"),
            &n.name,
            "targetClusterRef is immutable (the children already exist on the previously named cluster)",
        )),
        _ => {}
    }
}

/// A GatewaySpec: hostname and parentRef.name, each message naming the block's own path.
pub fn gateway(path: &Path, gateway: &GatewaySpec, errors: &mut Violations) {
    if gateway.hostname.is_empty() {
        errors.push(FieldError::required(
            path.child("hostname"),
            format!("hostname must be set when {path} is configured"),
        ));
    }
    for msg in grammar::dns1123_subdomain(&gateway.hostname)
        .into_iter()
        .filter(|_| !gateway.hostname.is_empty())
    {
        errors.push(FieldError::invalid(
            path.child("hostname"),
            &gateway.hostname,
            msg,
        ));
    }
    if gateway.parent_ref.name.is_empty() {
        errors.push(FieldError::required(
            path.child("parentRef").child("name"),
            format!("parentRef.name must be set when {path} is configured"),
        ));
    }
}

/// A LoggingSpec's per-logger levels (format and level are checked on the raw object).
pub fn logging(path: &Path, logging: &LoggingSpec, errors: &mut Violations) {
    let map_path = path.child("perLoggerLevels");
    for (name, level) in logging.per_logger_levels.iter().flatten() {
        if name.is_empty() {
            errors.push(FieldError::invalid(
                map_path,
                "",
                "logger name must not be empty",
            ));
        } else if has_line_break(name) {
            // Logger names are rendered verbatim into [DEFAULT] default_log_levels.
            errors.push(FieldError::invalid(map_path, name, RENDERED_CRLF));
        }
        if !LOG_LEVELS.contains(&level.as_str()) {
            errors.push(FieldError::invalid(
                map_path.key(name),
                level,
                "level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
            ));
        }
    }
}

/// A UWSGISpec's floors and the keep-alive rule; the harakiri window is checked with the
/// deployment block it drains in.
pub fn uwsgi(path: &Path, uwsgi: &UWSGISpec, errors: &mut Violations) {
    for (field, value, detail) in [
        ("processes", uwsgi.processes, "processes must be at least 1"),
        ("threads", uwsgi.threads, "threads must be at least 1"),
        ("harakiri", uwsgi.harakiri, "harakiri must be at least 1"),
        (
            "httpKeepAliveTimeout",
            uwsgi.http_keep_alive_timeout,
            "httpKeepAliveTimeout must be at least 1",
        ),
    ] {
        floor(path, field, value, 1, detail, errors);
    }
    if uwsgi.http_keep_alive_timeout.is_some() && uwsgi.http_keep_alive == Some(false) {
        errors.push(FieldError::invalid(
            path.child("httpKeepAliveTimeout"),
            uwsgi.http_keep_alive_timeout.unwrap_or_default(),
            "httpKeepAliveTimeout may only be set when httpKeepAlive is true",
        ));
    }
}

/// Rejects a set numeric field `parent.field` below its floor, as the API server's Minimum
/// would. The path is only built for a violation.
pub fn floor<T>(
    parent: &Path,
    field: &str,
    value: Option<T>,
    min: T,
    detail: &str,
    errors: &mut Violations,
) where
    T: PartialOrd + Into<BadValue>,
{
    if let Some(v) = value
        && v < min
    {
        errors.push(FieldError::invalid(parent.child(field), v, detail));
    }
}

/// The control-character guard on a typed field rendered verbatim into nova.conf and
/// nova-compute.conf.
pub fn rendered(path: &Path, value: Option<&str>, errors: &mut Violations) {
    if let Some(v) = value
        && has_line_break(v)
    {
        errors.push(FieldError::invalid(path, v, RENDERED_CRLF));
    }
}

/// A cron schedule: no time zone, then the standard 5-field grammar or a descriptor.
pub fn cron_schedule(path: &Path, schedule: &str, errors: &mut Violations) {
    if schedule.contains("TZ") {
        errors.push(FieldError::invalid(
            path,
            schedule,
            "TZ and CRON_TZ are not allowed in the schedule: the CronJob API rejects them",
        ));
        return;
    }
    if let Err(e) = cron::parse_standard(schedule) {
        errors.push(FieldError::invalid(
            path,
            schedule,
            format!("invalid cron expression: {e}"),
        ));
    }
}

/// The standard cron grammar of the CronJob API (robfig/cron v3 `ParseStandard`), with its
/// error texts.
pub mod cron {
    struct Bounds {
        min: u32,
        max: u32,
        names: &'static [&'static str],
    }

    const MINUTES: Bounds = Bounds {
        min: 0,
        max: 59,
        names: &[],
    };
    const HOURS: Bounds = Bounds {
        min: 0,
        max: 23,
        names: &[],
    };
    const DOM: Bounds = Bounds {
        min: 1,
        max: 31,
        names: &[],
    };
    const MONTHS: Bounds = Bounds {
        min: 1,
        max: 12,
        names: &[
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ],
    };
    const DOW: Bounds = Bounds {
        min: 0,
        max: 6,
        names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
    };

    fn must_parse_int(expr: &str) -> Result<u32, String> {
        let valid = !expr.is_empty()
            && expr.bytes().enumerate().all(|(i, b)| {
                b.is_ascii_digit() || (i == 0 && (b == b'+' || b == b'-')) && expr.len() > 1
            });
        if !valid {
            return Err(format!(
                "failed to parse int from {expr}: strconv.Atoi: parsing {}: invalid syntax",
                crate::field::go_quote(expr)
            ));
        }
        let n: i64 = expr.parse().map_err(|_| {
            format!(
                "failed to parse int from {expr}: strconv.Atoi: parsing {}: value out of range",
                crate::field::go_quote(expr)
            )
        })?;
        if n < 0 {
            return Err(format!("negative number ({n}) not allowed: {expr}"));
        }
        u32::try_from(n).map_err(|_| {
            format!(
                "failed to parse int from {expr}: strconv.Atoi: parsing {}: value out of range",
                crate::field::go_quote(expr)
            )
        })
    }

    fn parse_int_or_name(expr: &str, bounds: &Bounds) -> Result<u32, String> {
        let lower = expr.to_ascii_lowercase();
        if let Some(i) = bounds.names.iter().position(|n| *n == lower) {
            return Ok(bounds.min + i as u32);
        }
        must_parse_int(expr)
    }

    fn range(expr: &str, bounds: &Bounds) -> Result<(), String> {
        let range_and_step: Vec<&str> = expr.split('/').collect();
        let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
        let single = low_and_high.len() == 1;
        let (start, mut end) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
            (bounds.min, bounds.max)
        } else {
            let start = parse_int_or_name(low_and_high[0], bounds)?;
            let end = match low_and_high.len() {
                1 => start,
                2 => parse_int_or_name(low_and_high[1], bounds)?,
                _ => return Err(format!("too many hyphens: {expr}")),
            };
            (start, end)
        };
        let step = match range_and_step.len() {
            1 => 1,
            2 => {
                let step = must_parse_int(range_and_step[1])?;
                if single {
                    end = bounds.max;
                }
                step
            }
            _ => return Err(format!("too many slashes: {expr}")),
        };
        if start < bounds.min {
            return Err(format!(
                "beginning of range ({start}) below minimum ({}): {expr}",
                bounds.min
            ));
        }
        if end > bounds.max {
            return Err(format!(
                "end of range ({end}) above maximum ({}): {expr}",
                bounds.max
            ));
        }
        if start > end {
            return Err(format!(
                "beginning of range ({start}) beyond end of range ({end}): {expr}"
            ));
        }
        if step == 0 {
            return Err(format!("step of range should be a positive number: {expr}"));
        }
        Ok(())
    }

    fn field(expr: &str, bounds: &Bounds) -> Result<(), String> {
        expr.split(',').try_for_each(|r| range(r, bounds))
    }

    fn go_duration(s: &str) -> bool {
        let mut rest = s.strip_prefix(['+', '-']).unwrap_or(s);
        if rest == "0" {
            return true;
        }
        if rest.is_empty() {
            return false;
        }
        while !rest.is_empty() {
            let n = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            let num = &rest[..n];
            if num.is_empty() || num == "." {
                return false;
            }
            rest = &rest[n..];
            let unit_len = ["ns", "us", "µs", "μs", "ms", "s", "m", "h"]
                .iter()
                .find(|u| rest.starts_with(**u))
                .map(|u| u.len());
            match unit_len {
                Some(l) => rest = &rest[l..],
                None => return false,
            }
        }
        true
    }

    /// Parses a five-field expression or a descriptor.
    pub fn parse_standard(spec: &str) -> Result<(), String> {
        if spec.is_empty() {
            return Err("empty spec string".into());
        }
        if let Some(descriptor) = spec.strip_prefix('@') {
            return match descriptor {
                "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => {
                    Ok(())
                }
                d if d.starts_with("every ") => {
                    let duration = &d["every ".len()..];
                    if go_duration(duration) {
                        Ok(())
                    } else {
                        Err(format!(
                            "failed to parse duration {spec}: time: invalid duration {}",
                            crate::field::go_quote(duration)
                        ))
                    }
                }
                _ => Err(format!("unrecognized descriptor: {spec}")),
            };
        }
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "expected exactly 5 fields, found {}: [{}]",
                fields.len(),
                fields.join(" ")
            ));
        }
        field(fields[0], &MINUTES)?;
        field(fields[1], &HOURS)?;
        field(fields[2], &DOM)?;
        field(fields[3], &MONTHS)?;
        field(fields[4], &DOW)?;
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::parse_standard;

        #[test]
        fn the_standard_grammar() {
            for ok in [
                "@daily",
                "@every 1h30m",
                "0 3 * * *",
                "*/15 0-6 1,15 jan-mar sun",
                "0 0 * * 0",
                "5 4 * * mon-fri",
                "0 0 1 */2 ?",
            ] {
                assert_eq!(parse_standard(ok), Ok(()), "{ok}");
            }
            let cases = [
                ("@fortnightly", "unrecognized descriptor: @fortnightly"),
                ("0 3 * *", "expected exactly 5 fields, found 4: [0 3 * *]"),
                ("61 * * * *", "end of range (61) above maximum (59): 61"),
                ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
                (
                    "5-1 * * * *",
                    "beginning of range (5) beyond end of range (1): 5-1",
                ),
                (
                    "*/0 * * * *",
                    "step of range should be a positive number: */0",
                ),
                (
                    "x * * * *",
                    "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
                ),
                ("* * * * 7", "end of range (7) above maximum (6): 7"),
                ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
                ("", "empty spec string"),
            ];
            for (spec, want) in cases {
                assert_eq!(parse_standard(spec), Err(want.to_owned()), "{spec}");
            }
        }
    }
}
