//! The conditions reference (`docs/reference/conditions.md`), generated from the condition
//! types and their vocabularies (`crate::conditions`) by `cargo run -p nova-api --bin refgen`,
//! so it cannot drift: a pure test fails when the committed file differs.

use crate::conditions::{NovaComputeConditionType, NovaConditionType, Reason, Vocabulary};

/// Where the reference is committed, relative to the repository root.
pub const CONDITIONS_REFERENCE: &str = "docs/reference/conditions.md";

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
