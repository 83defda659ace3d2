//! oslo.log derivation (`common-types.md`, LoggingSpec): `[DEFAULT] default_log_levels` from
//! spec.logging.perLoggerLevels, and, while the format is json, `logging.ini` beside nova.conf
//! with `[DEFAULT] log_config_append` naming it.
//!
//! Unset fields resolve to the defaulting webhook's values: text, INFO, debug false.

use nova_api::v1alpha1::{LogFormat, LogLevel, NovaSpec};

use super::error::RenderError;
use super::ini::IniDocument;
use super::inputs::verbatim;

/// Whether spec.logging.format resolves to json.
pub(crate) fn is_json(spec: &NovaSpec) -> bool {
    spec.logging
        .as_ref()
        .and_then(|l| l.format)
        .unwrap_or_default()
        == LogFormat::Json
}

fn level_name(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Debug => "DEBUG",
        LogLevel::Info => "INFO",
        LogLevel::Warning => "WARNING",
        LogLevel::Error => "ERROR",
        LogLevel::Critical => "CRITICAL",
    }
}

/// The per-logger levels, sorted by logger name, each checked for a line break.
fn per_logger_levels(spec: &NovaSpec) -> Result<Vec<(&str, &str)>, RenderError> {
    let Some(levels) = spec
        .logging
        .as_ref()
        .and_then(|l| l.per_logger_levels.as_ref())
    else {
        return Ok(Vec::new());
    };
    levels
        .iter()
        .map(|(name, level)| {
            let field = format!("spec.logging.perLoggerLevels[{name:?}]");
            Ok((verbatim(&field, name)?, verbatim(&field, level)?))
        })
        .collect()
}

/// `[DEFAULT] default_log_levels`: the per-logger levels as a `name=LEVEL` list sorted by
/// logger name and joined with `,`, or None while the map is empty.
pub(crate) fn default_log_levels(spec: &NovaSpec) -> Result<Option<String>, RenderError> {
    let levels = per_logger_levels(spec)?;
    if levels.is_empty() {
        return Ok(None);
    }
    let entries: Vec<String> = levels
        .iter()
        .map(|(name, level)| format!("{name}={level}"))
        .collect();
    Ok(Some(entries.join(",")))
}

/// `logging.ini` while the format is json, else None.
///
/// oslo.log hands a `log_config_append` file to Python's `logging.config.fileConfig` and then
/// ignores `debug` and `default_log_levels`, so the file carries them itself: one stderr
/// `StreamHandler` formatted by `oslo_log.formatters.JSONFormatter` (one JSON document per
/// line), the root logger at DEBUG while spec.logging.debug is true and at spec.logging.level
/// otherwise, and one logger per perLoggerLevels entry (sorted by name, keyed `perlogger<N>`,
/// no handler of its own, propagating to the root). A `%` in a logger name is doubled,
/// because fileConfig reads the file with configparser's interpolation.
pub(crate) fn logging_ini(spec: &NovaSpec) -> Result<Option<String>, RenderError> {
    if !is_json(spec) {
        return Ok(None);
    }
    let logging = spec.logging.clone().unwrap_or_default();
    let root_level = if logging.debug.unwrap_or(false) {
        LogLevel::Debug
    } else {
        logging.level.unwrap_or_default()
    };
    let per_logger = per_logger_levels(spec)?;

    let mut doc = IniDocument::new();
    let mut keys = vec!["root".to_owned()];
    doc.set("logger_root", "level", level_name(root_level));
    doc.set("logger_root", "handlers", "stderr");
    for (index, (name, level)) in per_logger.iter().enumerate() {
        let key = format!("perlogger{index}");
        let section = format!("logger_{key}");
        doc.set(&section, "level", *level);
        doc.set(&section, "handlers", "");
        doc.set(&section, "propagate", "1");
        doc.set(&section, "qualname", name.replace('%', "%%"));
        keys.push(key);
    }
    doc.set("loggers", "keys", keys.join(","));
    doc.set("handlers", "keys", "stderr");
    doc.set("handler_stderr", "class", "StreamHandler");
    doc.set("handler_stderr", "args", "(sys.stderr,)");
    doc.set("handler_stderr", "formatter", "json");
    doc.set("formatters", "keys", "json");
    doc.set(
        "formatter_json",
        "class",
        "oslo_log.formatters.JSONFormatter",
    );
    doc.render().map(Some).map_err(|e| RenderError::Section {
        document: super::paths::LOGGING_INI,
        section: e.section,
    })
}
