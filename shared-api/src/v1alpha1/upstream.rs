//! The schema of an upstream Kubernetes type embedded in a spec, without its descriptions.
//!
//! The affinity, tolerations, resources and other upstream types of the five workloads carry
//! about 300 KB of descriptions, repeated per workload, which `kubectl explain` has for those
//! types anyway; without them the Nova CRD fits the 256 KiB annotation client-side apply
//! writes (`crate::crd`). The structure stays whole, and the field of ours that holds the type
//! keeps its own description: `#[schemars(with = "Upstream<Option<Affinity>>")]`.

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value};

/// `T`'s schema, inlined, with every description below it dropped.
pub struct Upstream<T>(PhantomData<T>);

impl<T: JsonSchema> JsonSchema for Upstream<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("Upstream_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = T::json_schema(generator);
        if let Some(object) = schema.as_object_mut() {
            strip_descriptions(object);
        }
        schema
    }
}

/// Drops the description of a schema and of every schema below it. Only schema keywords are
/// followed, so a property named `description` or a default holding one is never touched.
fn strip_descriptions(schema: &mut Map<String, Value>) {
    schema.remove("description");
    for (keyword, value) in schema.iter_mut() {
        match (keyword.as_str(), value) {
            ("properties" | "patternProperties", Value::Object(named)) => named
                .values_mut()
                .filter_map(Value::as_object_mut)
                .for_each(strip_descriptions),
            ("items" | "additionalProperties" | "not", Value::Object(sub)) => {
                strip_descriptions(sub)
            }
            ("anyOf" | "allOf" | "oneOf", Value::Array(subs)) => subs
                .iter_mut()
                .filter_map(Value::as_object_mut)
                .for_each(strip_descriptions),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn descriptions_go_everywhere_below_and_nothing_else_does() {
        let mut schema = json!({
            "description": "the type",
            "properties": {
                "description": {"type": "string", "description": "a field named description"},
                "items": {"type": "array", "items": {"description": "an item", "type": "string"}},
                "choice": {"anyOf": [{"description": "one"}, {"type": "null"}]},
                "map": {"additionalProperties": {"description": "a value"}},
                "defaulted": {"default": {"description": "data, not a keyword"}}
            }
        });
        strip_descriptions(schema.as_object_mut().unwrap());
        assert_eq!(
            schema,
            json!({
                "properties": {
                    "description": {"type": "string"},
                    "items": {"type": "array", "items": {"type": "string"}},
                    "choice": {"anyOf": [{}, {"type": "null"}]},
                    "map": {"additionalProperties": {}},
                    "defaulted": {"default": {"description": "data, not a keyword"}}
                }
            })
        );
    }
}
