//! The per-release nova option catalogs (`catalogs/<release>.json`, `common-types.md` §3.15),
//! embedded at build time and parsed once at startup.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::Value;

/// The embedded catalog files, by release.
pub const EMBEDDED: [(&str, &str); 2] = [
    ("2026.1", include_str!("../../catalogs/2026.1.json")),
    ("2026.2", include_str!("../../catalogs/2026.2.json")),
];

/// An option's value type, as the catalog names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptType {
    /// true/false, yes/no, on/off, 1/0, case-insensitive.
    Boolean,
    /// An integer within min/max.
    Integer,
    /// A float within min/max.
    Float,
    /// A port number within min/max (0..65535 by default).
    Port,
    /// A free-form string (choices checked when present).
    String,
    /// A string that may repeat.
    Multistring,
    /// A comma-separated list.
    List,
    /// A key:value map.
    Dict,
    /// A URI.
    Uri,
    /// An IP address.
    Ipaddress,
    /// A host name.
    Hostname,
    /// A host name or address.
    Hostaddress,
    /// A host domain.
    Hostdomain,
    /// A numeric range.
    Range,
}

impl OptType {
    /// The type name the messages use.
    pub fn name(self) -> &'static str {
        match self {
            OptType::Boolean => "boolean",
            OptType::Integer => "integer",
            OptType::Float => "float",
            OptType::Port => "port",
            OptType::String => "string",
            OptType::Multistring => "multistring",
            OptType::List => "list",
            OptType::Dict => "dict",
            OptType::Uri => "uri",
            OptType::Ipaddress => "ipaddress",
            OptType::Hostname => "hostname",
            OptType::Hostaddress => "hostaddress",
            OptType::Hostdomain => "hostdomain",
            OptType::Range => "range",
        }
    }
}

/// One option of a section.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Opt {
    /// The value type.
    #[serde(rename = "type")]
    pub kind: OptType,
    /// The allowed values, when restricted.
    #[serde(default)]
    pub choices: Option<Vec<Value>>,
    /// Whether the choices match without regard to case.
    #[serde(default)]
    pub ignore_case: bool,
    /// The lower bound of a numeric option.
    #[serde(default)]
    pub min: Option<f64>,
    /// The upper bound of a numeric option.
    #[serde(default)]
    pub max: Option<f64>,
    /// Whether the option still works but goes away.
    #[serde(default)]
    pub deprecated_for_removal: bool,
}

/// One section: its live options and its deprecated aliases.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Section {
    /// Live options by dest.
    #[serde(default)]
    pub opts: BTreeMap<String, Opt>,
    /// Deprecated alias → `"[<section>] <key>"` (several joined with `", "`), or `""`.
    #[serde(default)]
    pub deprecated: BTreeMap<String, String>,
}

/// One release's catalog.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Catalog {
    /// Always `nova`.
    pub service: String,
    /// `YYYY.N`.
    pub release: String,
    /// Ordinary sections, compared verbatim.
    pub sections: BTreeMap<String, Section>,
    /// Section families matched by prefix (`mdev_`, `vgpu_`, `neutron_physnet_`).
    #[serde(default)]
    pub dynamic_sections: BTreeMap<String, Section>,
}

/// Why an embedded catalog is unusable.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The JSON does not parse.
    #[error("option catalog {release}: {source}")]
    Parse {
        /// The release.
        release: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The catalog is empty.
    #[error("option catalog {0} has no sections")]
    Empty(String),
    /// The file names another release than its name.
    #[error("option catalog {file} declares release {declared}")]
    Mismatch {
        /// The file's release.
        file: String,
        /// The release inside.
        declared: String,
    },
}

/// A matched section: the catalog's entry and, for a dynamic family, the matched suffix.
pub struct SectionMatch<'a, 'n> {
    /// The section entry.
    pub section: &'a Section,
    /// The suffix a dynamic family matched (`<type>` / `<name>` in replacements).
    pub suffix: Option<&'n str>,
}

impl Catalog {
    /// Parses one embedded file.
    pub fn parse(release: &str, json: &str) -> Result<Self, CatalogError> {
        let catalog: Catalog =
            serde_json::from_str(json).map_err(|source| CatalogError::Parse {
                release: release.to_owned(),
                source,
            })?;
        if catalog.sections.is_empty() {
            return Err(CatalogError::Empty(release.to_owned()));
        }
        if catalog.release != release {
            return Err(CatalogError::Mismatch {
                file: release.to_owned(),
                declared: catalog.release,
            });
        }
        Ok(catalog)
    }

    /// The catalog entry of an extraConfig section: compared verbatim, then by dynamic prefix.
    pub fn section<'a, 'n>(&'a self, name: &'n str) -> Option<SectionMatch<'a, 'n>> {
        if let Some(section) = self.sections.get(name) {
            return Some(SectionMatch {
                section,
                suffix: None,
            });
        }
        self.dynamic_sections.iter().find_map(|(prefix, section)| {
            name.strip_prefix(prefix.as_str())
                .filter(|suffix| !suffix.is_empty())
                .map(|suffix| SectionMatch {
                    section,
                    suffix: Some(suffix),
                })
        })
    }

    /// The live option `[section] key`, following a `"[S] k"` replacement text.
    pub fn option(&self, section: &str, key: &str) -> Option<&Opt> {
        self.section(section).and_then(|m| m.section.opts.get(key))
    }

    /// Number of live options over the ordinary sections.
    pub fn option_count(&self) -> usize {
        self.sections.values().map(|s| s.opts.len()).sum()
    }
}

/// Every embedded catalog, parsed.
pub struct Catalogs {
    by_release: BTreeMap<String, Catalog>,
}

impl Catalogs {
    /// Parses every embedded file.
    pub fn embedded() -> Result<Self, CatalogError> {
        let mut by_release = BTreeMap::new();
        for (release, json) in EMBEDDED {
            by_release.insert(release.to_owned(), Catalog::parse(release, json)?);
        }
        Ok(Self { by_release })
    }

    /// The catalog of `YYYY.N`.
    pub fn get(&self, release: &str) -> Option<&Catalog> {
        self.by_release.get(release)
    }

    /// The releases with a catalog.
    pub fn releases(&self) -> impl Iterator<Item = &str> {
        self.by_release.keys().map(String::as_str)
    }
}

static CATALOGS: LazyLock<Catalogs> = LazyLock::new(|| match Catalogs::embedded() {
    Ok(c) => c,
    // The files are embedded at build time and parsed by a unit test; a broken one is a
    // startup failure, and main forces this before serving.
    Err(e) => panic!("{e}"),
});

/// The process-wide parsed catalogs.
pub fn catalogs() -> &'static Catalogs {
    &CATALOGS
}

/// Parses the embedded catalogs now, so a broken build fails at startup rather than on the
/// first admission.
pub fn init() -> Result<(), CatalogError> {
    Catalogs::embedded().map(|_| ())?;
    LazyLock::force(&CATALOGS);
    Ok(())
}

/// `YYYY.N` of a release string (`YYYY.N` or `YYYY.N-<patch>`, year ≥ 2010, N in 1 or 2).
pub fn release_key(release: &str) -> Option<(u32, u32)> {
    let base = release
        .split_once('-')
        .map_or(release, |(b, patch)| if patch.is_empty() { "" } else { b });
    let (year, n) = base.split_once('.')?;
    if year.len() != 4 || !year.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if n.len() != 1 {
        return None;
    }
    let year: u32 = year.parse().ok()?;
    let n: u32 = n.parse().ok()?;
    (year >= 2010 && (n == 1 || n == 2)).then_some((year, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_catalog_parses_and_is_plausible() {
        let catalogs = Catalogs::embedded().expect("catalogs parse");
        assert_eq!(
            catalogs.releases().collect::<Vec<_>>(),
            vec!["2026.1", "2026.2"]
        );
        for release in ["2026.1", "2026.2"] {
            let c = catalogs.get(release).expect("catalog");
            assert_eq!(c.service, "nova");
            assert!(
                c.sections.len() >= 62,
                "{release}: {} sections",
                c.sections.len()
            );
            assert!(
                c.option_count() >= 1106,
                "{release}: {} options",
                c.option_count()
            );
            assert!(c.sections.contains_key("DEFAULT"));
            assert_eq!(
                c.option("filter_scheduler", "build_failure_weight_multiplier")
                    .unwrap()
                    .kind,
                OptType::Float
            );
            assert_eq!(
                c.option("filter_scheduler", "shuffle_best_same_weighed_hosts")
                    .unwrap()
                    .kind,
                OptType::Boolean
            );
            assert_eq!(
                c.option("vnc", "novncproxy_port").unwrap().kind,
                OptType::Port
            );
            assert!(c.option("DEFAULT", "web").is_some());
            assert!(c.option("api", "local_metadata_per_cell").is_some());
            assert!(
                c.option("scheduler", "discover_hosts_in_cells_interval")
                    .is_some()
            );
            assert!(c.option("api", "auth_strategy").is_none());
            assert!(c.option("mdev_nvidia-35", "device_addresses").is_some());
            assert!(c.option("neutron_physnet_foo", "numa_nodes").is_some());
            assert!(c.section("mdev_").is_none(), "a bare prefix is no section");
        }
        let placement = |r| {
            catalogs
                .get(r)
                .unwrap()
                .option("placement", "timeout")
                .unwrap()
                .kind
        };
        assert_eq!(placement("2026.1"), OptType::Integer);
        assert_eq!(placement("2026.2"), OptType::Float);
    }

    /// The sizes `option-catalogs.md` gives: the generator alone, then with the runtime-only
    /// options (keystoneauth plugins, [manila], [oslo_messaging_metrics], privsep contexts,
    /// [neutron_tunnel]) and the deprecated aliases added.
    #[test]
    fn the_catalogs_are_at_least_as_large_as_the_facts_page_says() {
        let catalogs = Catalogs::embedded().expect("catalogs parse");
        for (release, generator_options, sections, keys) in
            [("2026.1", 1106, 67, 1559), ("2026.2", 1137, 68, 1618)]
        {
            let c = catalogs.get(release).expect("catalog");
            let deprecated: usize = c.sections.values().map(|s| s.deprecated.len()).sum();
            assert!(
                c.option_count() >= generator_options,
                "{release}: {} options",
                c.option_count()
            );
            assert!(
                c.sections.len() >= sections,
                "{release}: {} sections",
                c.sections.len()
            );
            assert!(
                c.option_count() + deprecated >= keys,
                "{release}: {} keys",
                c.option_count() + deprecated
            );
            for (section, key) in [
                ("keystone_authtoken", "auth_url"),
                ("manila", "endpoint_override"),
                ("nova_sys_admin", "user"),
                ("neutron_tunnel", "numa_nodes"),
            ] {
                assert!(
                    c.option(section, key).is_some(),
                    "{release}: [{section}] {key}"
                );
            }
            assert!(c.section("oslo_messaging_metrics").is_some(), "{release}");
        }
    }

    #[test]
    fn a_broken_or_empty_catalog_is_an_error() {
        assert!(Catalog::parse("2026.1", "{").is_err());
        let empty = r#"{"service":"nova","release":"2026.1","sections":{}}"#;
        assert_eq!(
            Catalog::parse("2026.1", empty).unwrap_err().to_string(),
            "option catalog 2026.1 has no sections"
        );
    }

    #[test]
    fn release_keys() {
        assert_eq!(release_key("2026.1"), Some((2026, 1)));
        assert_eq!(release_key("2026.2-3"), Some((2026, 2)));
        for bad in [
            "latest", "2025", "2025.2.3", "2026.3", "1999.1", "26.1", "2026.1-", "",
        ] {
            assert_eq!(release_key(bad), None, "{bad}");
        }
    }
}
