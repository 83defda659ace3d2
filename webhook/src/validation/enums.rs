//! Enum fields checked on the raw object, before it is decoded into the typed spec: a value
//! outside an enum would otherwise fail decoding as a whole, and the API server's style is one
//! `Unsupported value` error per field.

use serde_json::Value;

use crate::field::{BadValue, FieldError};

/// One enum field: a path of object keys under `spec`, and the supported values.
struct EnumField {
    path: &'static [&'static str],
    supported: &'static [&'static str],
}

const UPDATE_MODES: &[&str] = &["Off", "Initial", "Recreate", "Auto"];
const CREDENTIALS_MODES: &[&str] = &["Static", "Dynamic"];
const TLS_MODES: &[&str] = &["disabled", "prefer", "require", "verify-ca", "verify-full"];

const NOVA_ENUMS: &[EnumField] = &[
    EnumField {
        path: &["secretStoreRef", "kind"],
        supported: &["ClusterSecretStore", "SecretStore"],
    },
    EnumField {
        path: &["logging", "format"],
        supported: &["text", "json"],
    },
    EnumField {
        path: &["logging", "level"],
        supported: &["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
    },
    EnumField {
        path: &["apiDatabase", "credentialsMode"],
        supported: CREDENTIALS_MODES,
    },
    EnumField {
        path: &["database", "credentialsMode"],
        supported: CREDENTIALS_MODES,
    },
    EnumField {
        path: &["apiDatabase", "tls", "mode"],
        supported: TLS_MODES,
    },
    EnumField {
        path: &["database", "tls", "mode"],
        supported: TLS_MODES,
    },
    EnumField {
        path: &["api", "deployment", "verticalAutoscaling", "updateMode"],
        supported: UPDATE_MODES,
    },
    EnumField {
        path: &[
            "metadata",
            "deployment",
            "verticalAutoscaling",
            "updateMode",
        ],
        supported: UPDATE_MODES,
    },
    EnumField {
        path: &[
            "scheduler",
            "deployment",
            "verticalAutoscaling",
            "updateMode",
        ],
        supported: UPDATE_MODES,
    },
    EnumField {
        path: &[
            "conductor",
            "deployment",
            "verticalAutoscaling",
            "updateMode",
        ],
        supported: UPDATE_MODES,
    },
    EnumField {
        path: &[
            "consoleProxy",
            "deployment",
            "verticalAutoscaling",
            "updateMode",
        ],
        supported: UPDATE_MODES,
    },
];

const NOVACOMPUTE_ENUMS: &[EnumField] = &[
    EnumField {
        path: &["verticalAutoscaling", "updateMode"],
        supported: UPDATE_MODES,
    },
    EnumField {
        path: &["libvirt", "virtType"],
        supported: &["kvm", "qemu"],
    },
    EnumField {
        path: &["libvirt", "cpuMode"],
        supported: &["host-model", "host-passthrough", "custom", "none"],
    },
    EnumField {
        path: &["libvirt", "imagesType"],
        supported: &["default", "qcow2", "raw", "flat"],
    },
    EnumField {
        path: &["updateStrategy", "type"],
        supported: &["RollingUpdate", "OnDelete"],
    },
];

fn check(spec: &Value, fields: &[EnumField]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in fields {
        let mut node = spec;
        let mut found = true;
        for key in field.path {
            match node.get(*key) {
                Some(next) => node = next,
                None => {
                    found = false;
                    break;
                }
            }
        }
        if !found || node.is_null() {
            continue;
        }
        let ok = node.as_str().is_some_and(|s| field.supported.contains(&s));
        if !ok {
            let path = format!("spec.{}", field.path.join("."));
            let value = match node {
                Value::String(s) => BadValue::Str(s.clone()),
                other => BadValue::Json(other.clone()),
            };
            errors.push(FieldError::not_supported(path, value, field.supported));
        }
    }
    errors
}

/// The Nova enum fields outside their enum.
pub fn nova(spec: &Value) -> Vec<FieldError> {
    check(spec, NOVA_ENUMS)
}

/// The NovaCompute enum fields outside their enum (rule 16 among them).
pub fn novacompute(spec: &Value) -> Vec<FieldError> {
    check(spec, NOVACOMPUTE_ENUMS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_outside_an_enum_are_not_supported() {
        let errs =
            novacompute(&json!({"verticalAutoscaling": {"updateMode": "InPlaceOrRecreate"}}));
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            vec![
                r#"spec.verticalAutoscaling.updateMode: Unsupported value: "InPlaceOrRecreate": supported values: "Off", "Initial", "Recreate", "Auto""#
            ]
        );
        assert!(novacompute(&json!({"verticalAutoscaling": {"updateMode": "Auto"}})).is_empty());
        let errs = nova(&json!({"logging": {"level": "TRACE", "format": 3}}));
        assert_eq!(errs.len(), 2);
        assert_eq!(
            errs[0].to_string(),
            r#"spec.logging.format: Unsupported value: 3: supported values: "text", "json""#
        );
    }
}
