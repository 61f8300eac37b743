//! The rules of what scales (R-S*) and of indexes (R-I*): sharded counters and their
//! indexes, replicas, vector indexes, monotonic values, projections, composite index
//! declarations.

use std::collections::HashMap;

use datastore_entity_names::{NameRole, check_bytes};
use syn::spanned::Spanned;

use super::report::{conflict, error, shown};
use crate::ast::{Entity, Field, Index, ident_text, is_vector};
use crate::attr::IndexItem;
use crate::errors::Errors;

/// R-S1: `#[sharded(n)]` takes 1 to 1,000 shards; the counter lives in its shards, so the
/// attributes about the stored property do not apply.
pub(super) fn sharded_counters(entity: &Entity, errors: &mut Errors) {
    for field in entity.counters() {
        let Some(count) = field.flags.sharded else {
            continue;
        };
        if !(1..=1000).contains(&count.value) {
            errors.push(error(
                count.span,
                format!(
                    "`#[sharded({})]`: a counter has 1 to 1,000 shards [R-S1]\nhelp: each shard takes \
                     about one write per second (R-E2): choose n from the increments per second you expect",
                    count.value
                ),
            ));
        }
        let why = "a sharded counter is not stored on the entity (it lives in its shards)";
        let others = [
            (field.flags.exclude_from_index, "#[exclude_from_index]"),
            (field.flags.ttl, "#[ttl]"),
            (field.flags.blob, "#[blob]"),
            (field.flags.monotonic, "#[index(monotonic)]"),
            (
                field.flags.sharded_index.map(|c| c.span),
                "#[sharded_index]",
            ),
        ];
        errors.extend(
            others
                .into_iter()
                .filter_map(|o| conflict(field, "#[sharded]", o, why)),
        );
        companion_kind(entity, field, &entity.shard_kind(field), errors);
    }
}

/// A generated kind follows the kind rules too (R-N7: at most 1,500 bytes).
fn companion_kind(entity: &Entity, field: &Field, kind: &str, errors: &mut Errors) {
    if let Err(violation) = check_bytes(NameRole::Kind, kind.as_bytes()) {
        errors.push(error(
            field.ident.span(),
            format!(
                "the kind `{}` that `{}` needs is not a valid kind: it {violation}\nhelp: choose a \
                 shorter kind or property name",
                shown(kind),
                entity.ident
            ),
        ));
    }
}

/// R-S3: `#[sharded_index(n)]` takes 2 to 100 shards (one query each); its companion property
/// must not collide with another property.
pub(super) fn sharded_indexes(entity: &Entity, errors: &mut Errors) {
    for field in entity.sharded_indexes() {
        let Some(count) = field.flags.sharded_index else {
            continue;
        };
        if !(2..=100).contains(&count.value) {
            errors.push(error(
                count.span,
                format!(
                    "`#[sharded_index({})]`: a sharded index has 2 to 100 shards [R-S3]: each \
                     query of it runs one query per shard",
                    count.value
                ),
            ));
        }
        let why = "the field's plain value is already excluded, and its companion property is \
                   the indexed one";
        let others = [
            (field.flags.exclude_from_index, "#[exclude_from_index]"),
            (field.flags.ttl, "#[ttl]"),
            (field.flags.blob, "#[blob]"),
            (field.flags.monotonic, "#[index(monotonic)]"),
        ];
        errors.extend(
            others
                .into_iter()
                .filter_map(|o| conflict(field, "#[sharded_index]", o, why)),
        );
        let companion = field.companion();
        if let Some(other) = entity.stored().find(|f| f.name.text() == companion) {
            errors.push(error(
                count.span,
                format!(
                    "the sharded index of `{}` is stored as property `{companion}`, which field \
                     `{}` already uses\nhelp: rename one of them with `#[property(rename = \"...\")]`",
                    field.ident, other.ident
                ),
            ));
        }
        if let Err(violation) = check_bytes(NameRole::Property, companion.as_bytes()) {
            errors.push(error(
                field.name.span,
                format!("the companion property {} {violation}", shown(&companion)),
            ));
        }
    }
}

/// R-S2: `#[replicated(n)]` takes 2 to 100 copies.
pub(super) fn replicated(entity: &Entity, errors: &mut Errors) {
    let Some(count) = entity.replicated.as_ref().map(|r| &r.count) else {
        return;
    };
    if !(2..=100).contains(&count.value) {
        errors.push(error(
            count.span,
            format!(
                "`#[replicated({})]`: an entity has 2 to 100 read replicas [R-S2], all written in \
                 the entity's commit",
                count.value
            ),
        ));
    }
    if entity.is_entity()
        && let Err(violation) = check_bytes(NameRole::Kind, entity.replica_kind().as_bytes())
    {
        errors.push(error(
            count.span,
            format!(
                "the replicas' kind {} {violation}",
                shown(&entity.replica_kind())
            ),
        ));
    }
}

/// The service's bound on a vector index's dimension.
const MAX_DIMENSION: u64 = 2048;

/// A vector index is declared on a `Vector` field, of 1 to 2,048 dimensions (the service's
/// bound).
pub(super) fn vector_indexes(entity: &Entity, errors: &mut Errors) {
    for field in entity.fields.iter() {
        let Some(count) = field.flags.vector_index else {
            continue;
        };
        if field.vector_index().is_none() {
            errors.push(error(
                field.ty.span(),
                format!(
                    "`#[vector_index]` declares the index of a vector, but `{}` is not a \
                     `Vector` or an `Option<Vector>`",
                    field.ident
                ),
            ));
        } else if !(1..=MAX_DIMENSION).contains(&count.value) {
            errors.push(error(
                count.span,
                format!(
                    "`#[vector_index({})]`: a vector index has 1 to 2,048 dimensions",
                    count.value
                ),
            ));
        }
    }
}

/// R-I3: `#[index(monotonic)]` acknowledges the hotspot of an indexed value; an excluded
/// field has no index to acknowledge.
pub(super) fn monotonic_is_indexed(entity: &Entity, errors: &mut Errors) {
    let why = "an excluded field has no index entries, so there is no hotspot to accept";
    for field in entity.properties().filter(|f| f.flags.monotonic.is_some()) {
        let others = [
            (field.flags.exclude_from_index, "#[exclude_from_index]"),
            (field.flags.ttl, "#[ttl]"),
        ];
        errors.extend(
            others
                .into_iter()
                .filter_map(|o| conflict(field, "#[index(monotonic)]", o, why)),
        );
    }
}

/// R-Q2: a projection names indexed properties of the struct, each once, at least one.
pub(super) fn projections(entity: &Entity, errors: &mut Errors) {
    let mut names: HashMap<String, &syn::Ident> = HashMap::new();
    for projection in entity.projections.iter().filter(|_| entity.is_entity()) {
        let name = ident_text(&projection.name);
        if name == ident_text(&entity.ident) {
            errors.push(error(
                projection.name.span(),
                format!("the projection cannot be called `{name}`: that is the entity's own name"),
            ));
        } else if let Some(first) = names.insert(name.clone(), &projection.name) {
            errors.push(error(
                projection.name.span(),
                format!(
                    "the projection `{first}` is declared twice; give each projection its own name"
                ),
            ));
        }
        if projection.fields.is_empty() {
            errors.push(error(
                projection.name.span(),
                format!(
                    "the projection `{name}` has no properties\nhelp: list the fields it holds: \
                     `projection({name}: field, field)`"
                ),
            ));
        }
        let mut seen: Vec<String> = Vec::new();
        for ident in &projection.fields {
            let text = ident_text(ident);
            if seen.contains(&text) {
                errors.push(error(
                    ident.span(),
                    format!("`{text}` is listed twice in the projection `{name}`"),
                ));
                continue;
            }
            seen.push(text.clone());
            match entity.field(ident) {
                None => errors.push(error(ident.span(), unknown_field(entity, &text))),
                Some(field) => {
                    let why = field.not_indexed().or_else(|| {
                        field.flags.sharded_index.map(|_| {
                            "its plain value is excluded from indexes (`#[sharded_index]`) [R-S3]"
                        })
                    });
                    if let Some(why) = why {
                        errors.push(error(
                            ident.span(),
                            format!(
                                "`{text}` cannot be projected: {why}; a projection reads its \
                                 properties from the index [R-Q2]"
                            ),
                        ));
                    }
                }
            }
        }
    }
}

fn unknown_field(entity: &Entity, name: &str) -> String {
    let known: Vec<String> = entity
        .stored()
        .map(|f| format!("`{}`", ident_text(&f.ident)))
        .collect();
    format!(
        "`{}` has no field `{name}`\nhelp: the stored fields are {}",
        entity.ident,
        known.join(", ")
    )
}

/// R-I2: an index declaration names indexed properties of the struct, each once; a
/// composite index has at least two (or one with `ancestor_index`); no index is declared twice.
pub(super) fn index_declarations(entity: &Entity, errors: &mut Errors) {
    let mut declared: Vec<(bool, Vec<(String, bool)>)> = Vec::new();
    for index in entity.indexes.iter().filter(|_| entity.is_entity()) {
        let attr = if index.ancestor {
            "ancestor_index"
        } else {
            "index"
        };
        let mut names: Vec<(String, bool)> = Vec::new();
        for item in &index.decl.items {
            let text = ident_text(&item.field);
            if names.iter().any(|(n, _)| *n == text) {
                errors.push(error(
                    item.span,
                    format!("`{text}` is listed twice in one `{attr}`"),
                ));
                continue;
            }
            names.push((text.clone(), item.descending));
            match entity.field(&item.field) {
                None => errors.push(error(item.field.span(), unknown_field(entity, &text))),
                Some(field) if is_vector(&field.ty) && field.stored() => {
                    if let Some(why) = vector_column(index, item, field) {
                        errors.push(error(item.span, why));
                    }
                }
                Some(field) => {
                    if let Some(why) = field.not_indexed() {
                        errors.push(error(
                            item.field.span(),
                            format!("`{text}` cannot be in a composite index: {why}"),
                        ));
                    }
                }
            }
        }
        let needed = if index.ancestor { 1 } else { 2 };
        if index.decl.items.len() < needed {
            errors.push(error(
                index.decl.span,
                if entity.vector_tail(index).is_some() {
                    "`#[vector_index(n)]` on the field is already the vector index without \
                     filters\nhelp: an `index(...)` ending with a vector lists the properties a \
                     search filters on first, then the vector"
                        .to_owned()
                } else if index.ancestor {
                    "`ancestor_index` needs at least one property".to_owned()
                } else {
                    "a composite index has at least two properties: one property is already \
                     indexed by the built-in index\nhelp: list two or more fields, or use \
                     `ancestor_index(field)` for ancestor queries ordered by one property"
                        .to_owned()
                },
            ));
        }
        let signature = (index.ancestor, names);
        if declared.contains(&signature) {
            errors.push(error(
                index.decl.span,
                format!("this `{attr}` is declared twice; remove one"),
            ));
        } else {
            declared.push(signature);
        }
    }
}

/// Why a vector cannot be this column of an index, if it cannot: only as the last column of an
/// `index(...)` (not an ancestor one), ascending, of a field that declares its dimension.
fn vector_column(index: &Index, item: &IndexItem, field: &Field) -> Option<String> {
    let text = ident_text(&item.field);
    let last = index
        .decl
        .items
        .last()
        .is_some_and(|l| l.field == item.field);
    if index.ancestor {
        Some(format!(
            "`{text}` is a vector: an `ancestor_index` cannot hold one\nhelp: search it with \
             `find_nearest` through `#[vector_index(n)]` or `index(..., {text})`"
        ))
    } else if !last {
        Some(format!(
            "`{text}` is a vector: it can only be the last property of an index, after the \
             properties a search filters on first"
        ))
    } else if item.descending {
        Some(format!(
            "a vector index has no direction: write `{text}`, not `-{text}`"
        ))
    } else if field.vector_index().is_none() {
        Some(format!(
            "`{text}` is a vector: declare its dimension with `#[vector_index(n)]` on the field \
             to search it pre-filtered through this index"
        ))
    } else {
        None
    }
}
