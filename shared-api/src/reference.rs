//! The generated references: conditions (`docs/reference/conditions.md`, from the condition
//! types and their vocabularies in `crate::conditions`) and events (`docs/reference/events.md`,
//! from `crate::events`), written by `cargo run -p nova-api --bin refgen`, so they cannot
//! drift: a pure test fails when a committed file differs.

use crate::conditions::{NovaComputeConditionType, NovaConditionType, Reason, Vocabulary};
use crate::events::EventReason;

/// Where the conditions reference is committed, relative to the repository root.
pub const CONDITIONS_REFERENCE: &str = "docs/reference/conditions.md";

/// Where the events reference is committed, relative to the repository root.
pub const EVENTS_REFERENCE: &str = "docs/reference/events.md";

/// Every generated reference: its path and its Markdown.
pub fn all() -> [(&'static str, String); 2] {
    [
        (CONDITIONS_REFERENCE, conditions_markdown()),
        (EVENTS_REFERENCE, events_markdown()),
    ]
}

/// One kind's rows: (condition, whether Ready aggregates it, its vocabulary).
type Rows = Vec<(&'static str, bool, Vocabulary)>;

fn reasons(reasons: &[Reason]) -> String {
    match reasons {
        [] => "—".to_owned(),
        _ => reasons
            .iter()
            .map(|r| format!("`{r}`"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn table(out: &mut String, kind: &str, rows: Rows) {
    out.push_str(&format!(
        "\n## {kind}\n\n| Condition | In Ready | True reasons | False reasons |\n| --- | --- | --- | --- |\n"
    ));
    for (condition, aggregated, vocabulary) in rows {
        let in_ready = match (condition, aggregated) {
            ("Ready", _) => "is Ready",
            (_, true) => "yes",
            (_, false) => "no",
        };
        out.push_str(&format!(
            "| `{condition}` | {in_ready} | {} | {} |\n",
            reasons(vocabulary.true_reasons),
            reasons(vocabulary.false_reasons)
        ));
    }
}

/// The reference's Markdown.
pub fn conditions_markdown() -> String {
    let mut out = String::from(
        "# Conditions reference\n\n\
         Generated from `shared-api/src/conditions.rs` by `cargo run -p nova-api --bin refgen`;\n\
         do not edit (a test fails when this file is stale). Every condition a Nova or a\n\
         NovaCompute reports, whether the aggregate `Ready` is the conjunction of it, and every\n\
         reason it is written with, by status. `Ready` is True with `AllReady` when every\n\
         aggregated condition is True. `Paused` is there only while the pause annotation\n\
         `nova.openstack.c5c3.io/paused: \"true\"` holds the CR. What each reason means and\n\
         what to do: `docs/troubleshooting.md`.\n",
    );
    let novas: Rows = NovaConditionType::ALL
        .iter()
        .map(|c| {
            (
                c.as_str(),
                NovaConditionType::AGGREGATED.contains(c),
                c.vocabulary(),
            )
        })
        .collect();
    table(&mut out, "Nova", novas);
    let pools: Rows = NovaComputeConditionType::ALL
        .iter()
        .map(|c| {
            (
                c.as_str(),
                NovaComputeConditionType::AGGREGATED.contains(c),
                c.vocabulary(),
            )
        })
        .collect();
    table(&mut out, "NovaCompute", pools);
    out
}

/// The events reference's Markdown.
pub fn events_markdown() -> String {
    let mut out = String::from(
        "# Events reference\n\n\
         Generated from `shared-api/src/events.rs` by `cargo run -p nova-api --bin refgen`;\n\
         do not edit (a test fails when this file is stale). Every event the controller\n\
         publishes, on the Nova or NovaCompute it concerns (`kubectl -n <ns> events --for\n\
         nova/<name>`). The action is the events.k8s.io `action` field; a repeat of one note\n\
         within six minutes is counted in that event's series, distinct notes of one reason are\n\
         distinct events. What to do about a Warning: `docs/troubleshooting.md`.\n\n\
         | Reason | Type | Action | On | Published when |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for reason in EventReason::ALL {
        let type_ = if reason.warning() {
            "Warning"
        } else {
            "Normal"
        };
        out.push_str(&format!(
            "| `{reason}` | {type_} | `{}` | {} | {} |\n",
            reason.action(),
            reason.regarding().as_str(),
            reason.when()
        ));
    }
    out
}
