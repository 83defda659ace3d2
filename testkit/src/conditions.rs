//! Condition readers for both kinds, typed by nova-api's condition enums: one place that knows
//! where a Nova's and a pool's conditions live.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use nova_api::conditions::{NovaComputeConditionType, NovaConditionType};
use nova_api::v1alpha1::{Nova, NovaCompute};

/// A kind whose status carries conditions, typed by its own condition enum.
pub trait Conditioned {
    /// The kind's condition types.
    type Type: Copy + AsRef<str>;

    fn conditions(&self) -> &[Condition];

    /// The condition type spelled `name` (the suites name them as the spec writes them);
    /// panics on a name the kind does not have, so a typo cannot make a wait pass.
    fn type_named(name: &str) -> Self::Type;

    /// The condition `type_`, when the status has it.
    fn condition(&self, type_: Self::Type) -> Option<&Condition> {
        self.conditions().iter().find(|c| c.type_ == type_.as_ref())
    }

    /// The condition's reason, when present.
    fn reason(&self, type_: Self::Type) -> Option<&str> {
        self.condition(type_).map(|c| c.reason.as_str())
    }

    /// Whether the condition is present with `status` ("True", "False", "Unknown").
    fn holds(&self, type_: Self::Type, status: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == status)
    }

    /// Whether the condition is True.
    fn is_true(&self, type_: Self::Type) -> bool {
        self.holds(type_, "True")
    }

    /// The condition as (status, reason, message).
    fn triple(&self, type_: Self::Type) -> Option<(String, String, String)> {
        self.condition(type_)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    }

    /// The types of `wanted` that are not True, each with what it says instead.
    fn pending(&self, wanted: &[Self::Type]) -> Vec<String> {
        wanted
            .iter()
            .filter_map(|t| match self.condition(*t) {
                Some(c) if c.status == "True" => None,
                Some(c) => Some(format!(
                    "{}={} {}: {}",
                    t.as_ref(),
                    c.status,
                    c.reason,
                    c.message
                )),
                None => Some(format!("{} absent", t.as_ref())),
            })
            .collect()
    }
}

impl Conditioned for Nova {
    type Type = NovaConditionType;

    fn type_named(name: &str) -> NovaConditionType {
        NovaConditionType::parse(name).unwrap_or_else(|| panic!("{name} is no Nova condition"))
    }

    fn conditions(&self) -> &[Condition] {
        self.status.as_ref().map_or(&[], |s| &s.conditions)
    }
}

impl Conditioned for NovaCompute {
    type Type = NovaComputeConditionType;

    fn type_named(name: &str) -> NovaComputeConditionType {
        NovaComputeConditionType::parse(name)
            .unwrap_or_else(|| panic!("{name} is no NovaCompute condition"))
    }

    fn conditions(&self) -> &[Condition] {
        self.status.as_ref().map_or(&[], |s| &s.conditions)
    }
}

/// The condition spelled `type_` of a Nova or a pool, as (status, reason, message).
pub fn condition_of<'a, K: Conditioned>(
    object: &'a K,
    type_: &str,
) -> Option<(&'a str, &'a str, &'a str)> {
    object
        .condition(K::type_named(type_))
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

/// Whether the condition spelled `type_` of a Nova or a pool has `status`.
pub fn holds<K: Conditioned>(object: &K, type_: &str, status: &str) -> bool {
    object.holds(K::type_named(type_), status)
}

/// The reason of the condition spelled `type_` of a Nova or a pool.
pub fn reason<'a, K: Conditioned>(object: &'a K, type_: &str) -> Option<&'a str> {
    object.reason(K::type_named(type_))
}
