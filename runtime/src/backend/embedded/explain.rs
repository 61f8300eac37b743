//! Query Explain on the engine: a query's plan in words, with the indexes each branch reads,
//! as the service states its own.

use super::index::Composite;
use super::plan::{Access, equality_properties, needed};
use super::scan::Prepared;
use datastore_entity_core::model::schema::Direction;
use datastore_entity_core::query::explain::Explanation;

/// The plan of a query whose branches (one, without OR, IN, `!=` or NOT IN) are answered by
/// `plans`, in words, with the indexes each reads.
pub(crate) fn explain(prepared: &Prepared<'_>, plans: &[(Prepared<'_>, Access)]) -> Explanation {
    let kind = &prepared.query.kind;
    let key = |direction: Direction| format!("__key__ {}", direction_name(direction));
    let index = |columns: Vec<String>| format!("{kind} ({})", columns.join(", "));
    let by_key = || index(vec![key(Direction::Ascending)]);
    let mut indexes: Vec<String> = Vec::new();
    let mut push = |name: String| {
        if !indexes.contains(&name) {
            indexes.push(name);
        }
    };
    let scanned = plans.iter().any(|(_, access)| *access == Access::Scan);
    let mut described = Vec::new();
    for (branch, access) in plans.iter().filter(|_| !scanned) {
        described.push(match access {
            Access::Kind => {
                push(by_key());
                "the kind's keys in key order".to_owned()
            }
            Access::Zigzag => {
                let properties = equality_properties(branch);
                for p in &properties {
                    push(index(vec![format!("{p} ASC"), key(Direction::Ascending)]));
                }
                match properties.len() {
                    0 => {
                        push(by_key());
                        "the kind's keys under the ancestor".to_owned()
                    }
                    1 => "one property's built-in index, equal values in key order".to_owned(),
                    n => format!("a zigzag merge join of {n} built-in indexes"),
                }
            }
            Access::Property { name, reverse } => {
                push(index(vec![
                    format!("{name} ASC"),
                    key(Direction::Ascending),
                ]));
                match reverse {
                    false => format!("the built-in index of `{name}`, forwards"),
                    true => format!("the built-in index of `{name}`, backwards"),
                }
            }
            Access::Composite {
                index: composite,
                reverse,
            } => {
                push(composite_name(composite));
                match reverse {
                    false => "a declared composite index, forwards".to_owned(),
                    true => "a declared composite index, backwards".to_owned(),
                }
            }
            // A scan answers the whole query: described below.
            Access::Scan => continue,
        });
    }
    let plan = if scanned {
        // What the service reads instead: the composite index each branch needs (the kind's
        // keys where it needs none).
        for (branch, _) in plans {
            let needed = needed(branch);
            match needed.columns.is_empty() && !needed.ancestor {
                true => push(by_key()),
                false => push(composite_name(&needed)),
            }
        }
        "every entity of the kind evaluated: no declared index serves the query (strict index \
         mode is off); the service reads the indexes named"
            .to_owned()
    } else if described.len() > 1 {
        format!(
            "{} branches, each by its own plan, merged in the query's order: {}",
            described.len(),
            described.join("; ")
        )
    } else {
        described.pop().unwrap_or_default()
    };
    Explanation {
        plan,
        indexes_used: indexes,
        stats: None,
    }
}

/// A composite index as the engine names the indexes it reads: its kind, its columns and the
/// key in the last column's direction, and whether it holds ancestors.
fn composite_name(composite: &Composite) -> String {
    let mut columns: Vec<String> = composite
        .columns
        .iter()
        .map(|(name, direction)| format!("{name} {}", direction_name(*direction)))
        .collect();
    let last = composite
        .columns
        .last()
        .map_or(Direction::Ascending, |c| c.1);
    columns.push(format!("__key__ {}", direction_name(last)));
    let name = format!("{} ({})", composite.kind, columns.join(", "));
    match composite.ancestor {
        true => format!("{name} with ancestor"),
        false => name,
    }
}

fn direction_name(direction: Direction) -> &'static str {
    match direction {
        Direction::Ascending => "ASC",
        Direction::Descending => "DESC",
    }
}
