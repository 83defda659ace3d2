//! spec.extraConfig: the guards, the operator-owned keys and the option-catalog check
//! (`common-types.md` §3.14, §3.15; `novacompute.md` §3.3 rules 21–26, §3.5).
//!
//! No message ever quotes a value: an extraConfig value may be a credential. Only the typed
//! value check shows a value, and only for boolean, numeric and enumerated options whose name
//! does not look like it holds a secret.

use nova_api::ini_text::misread_key;
use nova_api::owned_keys::{self, OwnedKey, Treatment};
use nova_api::v1alpha1::ExtraConfig;

use super::has_line_break;
use crate::catalog::{Catalog, Opt, OptType, catalogs, release_key};
use crate::field::{BadValue, FieldError, Path, Violations, go_quote};

/// The path of spec.extraConfig.
static ROOT: Path<'static> = Path::new("spec.extraConfig");

/// `spec.extraConfig[section]`; its keys are `.key(key)` of it.
fn section_path(section: &str) -> Path<'_> {
    ROOT.key(section)
}

fn usable(s: &str) -> bool {
    !s.is_empty() && !has_line_break(s)
}

/// Rules 21–25: names, control characters, and the rejected owned keys.
pub fn guards(extra: &ExtraConfig, registry: &[OwnedKey], errors: &mut Violations) {
    for (section, keys) in extra {
        if section.is_empty() {
            errors.push(FieldError::invalid(
                ROOT,
                "",
                "extraConfig section name must not be empty",
            ));
        } else if has_line_break(section) {
            errors.push(FieldError::invalid(
                ROOT,
                section,
                "extraConfig section name must not contain a newline or carriage return",
            ));
        }
        for (key, value) in keys {
            if key.is_empty() {
                errors.push(FieldError::invalid(
                    section_path(section),
                    "",
                    "extraConfig key must not be empty",
                ));
            }
            if !key.is_empty() && !has_line_break(key) && misread_key(key) {
                errors.push(FieldError::invalid(
                    section_path(section),
                    key,
                    "extraConfig key must read back as written: oslo.config strips it, splits its line at the first '=' or ':' and reads a line starting with '#', ';' or '[' as a comment or a section, so a key must not start or end with whitespace, start with one of those characters or contain '=' or ':'",
                ));
            }
            if has_line_break(key) || has_line_break(value) {
                errors.push(FieldError::invalid_omitted(
                    section_path(section).key(key),
                    "extraConfig key and value must not contain a newline or carriage return: the rendered INI writes them verbatim, so a newline injects arbitrary config lines",
                ));
            }
            if let Some(owned) = owned_keys::lookup(registry, section, key)
                && owned.treatment == Treatment::Rejected
            {
                errors.push(FieldError::forbidden(
                    section_path(section).key(key),
                    owned.rejection_message(),
                ));
            }
        }
    }
}

/// The single warning when spec.openStackRelease names no release.
pub const NO_RELEASE_WARNING: &str = "spec.extraConfig was not validated against an option catalog: spec.openStackRelease does not name an OpenStack release";

/// The single warning when no catalog is embedded for the release.
pub fn no_catalog_warning(release: &str) -> String {
    format!(
        "spec.extraConfig was not validated against an option catalog: no catalog for release {} is embedded in this operator build",
        go_quote(release)
    )
}

/// The catalog a release resolves to, or the warning explaining why there is none.
pub fn catalog_for(release: &str) -> Result<(&'static Catalog, String), String> {
    let Some((year, n)) = release_key(release) else {
        return Err(NO_RELEASE_WARNING.to_owned());
    };
    let key = format!("{year}.{n}");
    match catalogs().get(&key) {
        Some(c) => Ok((c, key)),
        None => Err(no_catalog_warning(&key)),
    }
}

/// §3.15: the scan of every (section, key) outside the owned-key registry against the
/// release's catalog. Fails open with a single warning when there is no catalog.
pub fn catalog_check(
    extra: &ExtraConfig,
    release: &str,
    registry: &[OwnedKey],
    errors: &mut Violations,
    warnings: &mut Vec<String>,
) {
    if extra.is_empty() {
        return;
    }
    let (catalog, rel) = match catalog_for(release) {
        Ok(found) => found,
        Err(warning) => {
            warnings.push(warning);
            return;
        }
    };
    // A section an auth_section key points at holds keystoneauth plugin options, which no
    // catalog enumerates: it is exempt like the owned keys.
    let auth_sections: Vec<&str> = extra
        .values()
        .filter_map(|keys| keys.get("auth_section"))
        .map(String::as_str)
        .collect();
    for (section, keys) in extra {
        if !usable(section) || auth_sections.contains(&section.as_str()) {
            continue;
        }
        let matched = catalog.section(section);
        for (key, value) in keys {
            if !usable(key) || owned_keys::lookup(registry, section, key).is_some() {
                continue;
            }
            let section_path = section_path(section);
            let path = section_path.key(key);
            let Some(m) = &matched else {
                errors.push(FieldError::invalid(
                    path,
                    section,
                    format!("no such section in the nova {rel} option catalog"),
                ));
                continue;
            };
            if let Some(opt) = m.section.opts.get(key) {
                if opt.deprecated_for_removal {
                    warnings.push(format!(
                        "spec.extraConfig [{section}] {key}: deprecated option in nova {rel} with no replacement"
                    ));
                }
                check_value(&path, section, key, value, opt, errors);
            } else if let Some(replacement) = m.section.deprecated.get(key) {
                let replacement = match m.suffix {
                    Some(suffix) => replacement
                        .replace("<type>", suffix)
                        .replace("<name>", suffix),
                    None => replacement.clone(),
                };
                if replacement.is_empty() {
                    warnings.push(format!(
                        "spec.extraConfig [{section}] {key}: deprecated option in nova {rel} with no replacement"
                    ));
                } else {
                    warnings.push(format!(
                        "spec.extraConfig [{section}] {key}: deprecated option in nova {rel}, replaced by {replacement}"
                    ));
                    if let Some((s, k)) = single_replacement(&replacement)
                        && let Some(opt) = catalog.option(s, k)
                    {
                        check_value(&path, section, key, value, opt, errors);
                    }
                }
            } else {
                errors.push(FieldError::invalid(
                    path,
                    key,
                    format!("no such option in the nova {rel} option catalog"),
                ));
            }
        }
    }
}

/// `"[S] k"` → (S, k), when the replacement names exactly one option.
fn single_replacement(text: &str) -> Option<(&str, &str)> {
    if text.contains(", ") {
        return None;
    }
    let rest = text.strip_prefix('[')?;
    let (section, key) = rest.split_once("] ")?;
    Some((section, key))
}

/// Whether an option name suggests it holds a credential, so its value is never shown.
fn secret_like(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "password",
        "secret",
        "token",
        "key",
        "credential",
        "passphrase",
    ]
    .iter()
    .any(|w| k.contains(w))
}

fn bounds_text(min: Option<f64>, max: Option<f64>) -> String {
    let fmt = |v: f64| {
        if v.fract() == 0.0 {
            format!("{}", v as i64)
        } else {
            format!("{v}")
        }
    };
    match (min, max) {
        (Some(lo), Some(hi)) => format!(" between {} and {}", fmt(lo), fmt(hi)),
        (Some(lo), None) => format!(" of at least {}", fmt(lo)),
        (None, Some(hi)) => format!(" of at most {}", fmt(hi)),
        (None, None) => String::new(),
    }
}

/// The [project decision] of §3.15: a value that cannot parse as its option's type is
/// rejected, naming the option, the problem and the expected type. Substituted values
/// (`$name`, `${name}`) are resolved at run time and skipped; free-form types are not checked.
fn check_value(
    path: &Path,
    section: &str,
    key: &str,
    value: &str,
    opt: &Opt,
    errors: &mut Violations,
) {
    // A control character is the guard's to report, without showing the value.
    if value.contains('$') || has_line_break(value) {
        return;
    }
    let shown = if secret_like(key) {
        BadValue::Omitted
    } else {
        BadValue::Str(value.to_owned())
    };
    let name = format!("[{section}] {key}");
    let mut reject = |problem: &str, expected: String| {
        errors.push(FieldError::invalid(
            path,
            shown.clone(),
            format!("{problem}: {name} expects {expected}"),
        ));
    };
    let trimmed = value.trim();
    match opt.kind {
        OptType::Boolean => {
            let v = trimmed.to_ascii_lowercase();
            if !["true", "false", "yes", "no", "on", "off", "1", "0"].contains(&v.as_str()) {
                reject(
                    "not a boolean",
                    "a boolean (true/false, yes/no, on/off or 1/0)".into(),
                );
            }
        }
        OptType::Integer | OptType::Port => {
            if opt.kind == OptType::Integer && trimmed.is_empty() {
                return; // oslo.config reads an empty integer as unset
            }
            let (what, min, max) = match opt.kind {
                OptType::Port => (
                    "a port number",
                    opt.min.or(Some(0.0)),
                    opt.max.or(Some(65535.0)),
                ),
                _ => ("an integer", opt.min, opt.max),
            };
            let expected = format!("{what}{}", bounds_text(min, max));
            let digits = trimmed.strip_prefix(['+', '-']).unwrap_or(trimmed);
            let parsed = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| trimmed.parse::<i64>().ok())
                .flatten();
            let Some(n) = parsed else {
                reject("not an integer", expected);
                return;
            };
            let nf = n as f64;
            if min.is_some_and(|lo| nf < lo) || max.is_some_and(|hi| nf > hi) {
                reject("out of range", expected);
                return;
            }
            if let Some(choices) = &opt.choices {
                let ok = choices
                    .iter()
                    .any(|c| c.as_i64() == Some(n) || c.as_str() == Some(trimmed));
                if !ok {
                    reject(
                        "not one of the choices",
                        format!("one of {}", choice_list(choices)),
                    );
                }
            }
        }
        OptType::Float => {
            let expected = format!("a float{}", bounds_text(opt.min, opt.max));
            let Ok(f) = trimmed.parse::<f64>() else {
                reject("not a number", expected);
                return;
            };
            if opt.min.is_some_and(|lo| f < lo) || opt.max.is_some_and(|hi| f > hi) {
                reject("out of range", expected);
            }
        }
        OptType::String => {
            if let Some(choices) = &opt.choices {
                let ok = choices.iter().filter_map(|c| c.as_str()).any(|c| {
                    if opt.ignore_case {
                        c.eq_ignore_ascii_case(value)
                    } else {
                        c == value
                    }
                });
                if !ok {
                    reject(
                        "not one of the choices",
                        format!("one of {}", choice_list(choices)),
                    );
                }
            }
        }
        _ => {}
    }
}

fn choice_list(choices: &[serde_json::Value]) -> String {
    choices
        .iter()
        .map(|c| match c {
            serde_json::Value::String(s) => go_quote(s),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn extra(entries: &[(&str, &str, &str)]) -> ExtraConfig {
        let mut map: ExtraConfig = BTreeMap::new();
        for (s, k, v) in entries {
            map.entry((*s).to_owned())
                .or_default()
                .insert((*k).to_owned(), (*v).to_owned());
        }
        map
    }

    fn nova_registry() -> Vec<OwnedKey> {
        owned_keys::nova().copied().collect()
    }

    fn scan(entries: &[(&str, &str, &str)], release: &str) -> (Vec<String>, Vec<String>) {
        let mut errors = Violations::default();
        let mut warnings = Vec::new();
        catalog_check(
            &extra(entries),
            release,
            &nova_registry(),
            &mut errors,
            &mut warnings,
        );
        (errors.iter().map(ToString::to_string).collect(), warnings)
    }

    #[test]
    fn known_options_pass_and_unknown_ones_are_named() {
        assert_eq!(
            scan(
                &[(
                    "filter_scheduler",
                    "build_failure_weight_multiplier",
                    "1000000.0"
                )],
                "2026.1"
            ),
            (vec![], vec![])
        );
        assert_eq!(
            scan(&[("DEFAULT", "no_such_thing", "1")], "2026.1").0,
            vec![
                r#"spec.extraConfig[DEFAULT][no_such_thing]: Invalid value: "no_such_thing": no such option in the nova 2026.1 option catalog"#
            ]
        );
        assert_eq!(
            scan(&[("nosuch", "x", "1")], "2026.2").0,
            vec![
                r#"spec.extraConfig[nosuch][x]: Invalid value: "nosuch": no such section in the nova 2026.2 option catalog"#
            ]
        );
        // Section names are compared verbatim.
        assert_eq!(scan(&[("default", "debug", "true")], "2026.1").0.len(), 1);
        // A dashed spelling is unknown.
        assert_eq!(scan(&[("DEFAULT", "log-file", "x")], "2026.1").0.len(), 1);
    }

    #[test]
    fn owned_keys_are_exempt_from_the_scan() {
        // Reported keys and rejected keys alike; [Placement] matches the registry's [placement].
        assert_eq!(
            scan(
                &[
                    ("placement", "timeout", "90"),
                    ("Placement", "password", "x")
                ],
                "2026.1"
            ),
            (vec![], vec![])
        );
    }

    #[test]
    fn deprecated_aliases_warn_with_their_replacement() {
        let (errors, warnings) = scan(
            &[("DEFAULT", "api_paste_config", "/etc/nova/api-paste.ini")],
            "2026.1",
        );
        assert!(errors.is_empty());
        assert_eq!(
            warnings,
            vec![
                "spec.extraConfig [DEFAULT] api_paste_config: deprecated option in nova 2026.1, replaced by [wsgi] api_paste_config"
            ]
        );
        let (_, warnings) = scan(
            &[("vgpu_nvidia-35", "device_addresses", "0000:84:00.0")],
            "2026.1",
        );
        assert_eq!(
            warnings,
            vec![
                "spec.extraConfig [vgpu_nvidia-35] device_addresses: deprecated option in nova 2026.1, replaced by [mdev_nvidia-35] device_addresses"
            ]
        );
        let (_, warnings) = scan(&[("DEFAULT", "backdoor_port", "1234")], "2026.1");
        assert_eq!(
            warnings,
            vec![
                "spec.extraConfig [DEFAULT] backdoor_port: deprecated option in nova 2026.1 with no replacement"
            ]
        );
    }

    #[test]
    fn releases_without_a_catalog_warn_once() {
        assert_eq!(
            scan(&[("a", "b", "c"), ("d", "e", "f")], "2027.1"),
            (vec![], vec![r#"spec.extraConfig was not validated against an option catalog: no catalog for release "2027.1" is embedded in this operator build"#.to_owned()])
        );
        assert_eq!(
            scan(&[("a", "b", "c")], "latest"),
            (vec![], vec![NO_RELEASE_WARNING.to_owned()])
        );
        assert_eq!(scan(&[], "latest"), (vec![], vec![]));
    }

    #[test]
    fn typed_values_are_checked() {
        type Case<'a> = ((&'a str, &'a str, &'a str), Option<&'a str>);
        let cases: &[Case] = &[
            (
                ("DEFAULT", "allow_resize_to_same_host", "maybe"),
                Some(
                    r#"spec.extraConfig[DEFAULT][allow_resize_to_same_host]: Invalid value: "maybe": not a boolean: [DEFAULT] allow_resize_to_same_host expects a boolean (true/false, yes/no, on/off or 1/0)"#,
                ),
            ),
            (("DEFAULT", "allow_resize_to_same_host", "Yes"), None),
            (("DEFAULT", "debug", "maybe"), None), // owned (reported): exempt from the scan
            (("vnc", "novncproxy_port", "70000"), None), // owned: exempt from the scan
            (
                ("libvirt", "rx_queue_size", "300"),
                Some(
                    r#"spec.extraConfig[libvirt][rx_queue_size]: Invalid value: "300": not one of the choices: [libvirt] rx_queue_size expects one of 256, 512, 1024"#,
                ),
            ),
            (("libvirt", "rx_queue_size", "512"), None),
            (
                ("oslo_messaging_rabbit", "kombu_reconnect_delay", "5"),
                Some(
                    r#"spec.extraConfig[oslo_messaging_rabbit][kombu_reconnect_delay]: Invalid value: "5": out of range: [oslo_messaging_rabbit] kombu_reconnect_delay expects a float between 0 and 4.5"#,
                ),
            ),
            (
                ("oslo_messaging_rabbit", "kombu_reconnect_delay", "fast"),
                Some(
                    r#"spec.extraConfig[oslo_messaging_rabbit][kombu_reconnect_delay]: Invalid value: "fast": not a number: [oslo_messaging_rabbit] kombu_reconnect_delay expects a float between 0 and 4.5"#,
                ),
            ),
            (
                ("DEFAULT", "arq_binding_timeout", "0"),
                Some(
                    r#"spec.extraConfig[DEFAULT][arq_binding_timeout]: Invalid value: "0": out of range: [DEFAULT] arq_binding_timeout expects an integer of at least 1"#,
                ),
            ),
            (
                ("DEFAULT", "arq_binding_timeout", "ten"),
                Some(
                    r#"spec.extraConfig[DEFAULT][arq_binding_timeout]: Invalid value: "ten": not an integer: [DEFAULT] arq_binding_timeout expects an integer of at least 1"#,
                ),
            ),
            (("DEFAULT", "arq_binding_timeout", "$other"), None),
            (("DEFAULT", "log_rotation_type", "SIZE"), None),
            (
                ("DEFAULT", "log_rotation_type", "weekly"),
                Some(
                    r#"spec.extraConfig[DEFAULT][log_rotation_type]: Invalid value: "weekly": not one of the choices: [DEFAULT] log_rotation_type expects one of "interval", "size", "none""#,
                ),
            ),
            (("serial_console", "port_range", "x"), None),
        ];
        for (entry, want) in cases {
            let (errors, _) = scan(&[*entry], "2026.1");
            assert_eq!(
                errors,
                want.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
                "{entry:?}"
            );
        }
    }

    #[test]
    fn keys_oslo_would_misread_are_refused() {
        let mut errors = Violations::default();
        guards(
            &extra(&[
                ("DEFAULT", "transport_url=x", "v"),
                ("DEFAULT", " debug", "v"),
                ("DEFAULT", "debug", "v"),
            ]),
            &nova_registry(),
            &mut errors,
        );
        let got: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(got.len(), 2, "{got:#?}");
        assert!(got[0].starts_with(r#"spec.extraConfig[DEFAULT]: Invalid value: " debug": extraConfig key must read back as written"#), "{}", got[0]);
        assert!(got[1].starts_with(r#"spec.extraConfig[DEFAULT]: Invalid value: "transport_url=x": extraConfig key must read back as written"#), "{}", got[1]);
    }

    #[test]
    fn guards_and_rejected_keys() {
        let mut errors = Violations::default();
        guards(
            &extra(&[
                ("", "a", "b"),
                ("x\ny", "a", "b"),
                ("DEFAULT", "", "v"),
                ("DEFAULT", "k", "v\nw"),
                ("DEFAULT", "transport_url", "rabbit://u:p@h"),
            ]),
            &nova_registry(),
            &mut errors,
        );
        let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(got, vec![
            r#"spec.extraConfig: Invalid value: "": extraConfig section name must not be empty"#.to_owned(),
            r#"spec.extraConfig[DEFAULT]: Invalid value: "": extraConfig key must not be empty"#.to_owned(),
            "spec.extraConfig[DEFAULT][k]: Invalid value: extraConfig key and value must not contain a newline or carriage return: the rendered INI writes them verbatim, so a newline injects arbitrary config lines".to_owned(),
            "spec.extraConfig[DEFAULT][transport_url]: Forbidden: transport_url is managed via spec.messaging and must not be set in extraConfig (env-injected via OS_DEFAULT__TRANSPORT_URL, so a file value is inert at runtime and only copies the broker credentials into the rendered config)".to_owned(),
            r#"spec.extraConfig: Invalid value: "x\ny": extraConfig section name must not contain a newline or carriage return"#.to_owned(),
        ]);
        assert!(got.iter().all(|m| !m.contains("rabbit://")));
    }
}
