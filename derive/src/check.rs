//! The rules, one small function each, run on the typed model before any code is generated.
//! Every broken rule is recorded; all of them are reported together.
//!
//! Most mistakes leave the model well-formed (`soft`): the code is still generated next to
//! their errors, so the user's code that uses the type compiles and only the real mistakes
//! are shown. Structural mistakes (`hard`) make the derive emit a stub of the generated API
//! instead (`expand::mode::Mode::Stub`), for the same reason.

use std::collections::HashMap;

use datastore_entity_names::{NameRole, NameViolation};

use crate::ast::{
    Entity, Field, Name, Origin, RESERVED_DESCRIPTORS, Role, is_vec_u8, key_target,
    unsupported_hint,
};
use crate::errors::{self, Errors};

mod indexes;
mod report;
use self::indexes::{
    index_declarations, monotonic_is_indexed, projections, replicated, sharded_counters,
    sharded_indexes, vector_indexes,
};
use self::report::{error, shown};

pub(crate) fn check(entity: &Entity, hard: &mut Errors, soft: &mut Errors) {
    no_generics(entity, hard);
    kind_name(entity, soft);
    property_names(entity, soft);
    unique_property_names(entity, soft);
    at_most_one(entity, Role::Key, "#[key]", hard);
    at_most_one(entity, Role::Parent, "#[parent]", hard);
    embedded_needs_no_kind_or_parent(entity, hard);
    key_and_parent_are_not_properties(entity, soft);
    aliases_and_defaults(entity, soft);
    parent_is_a_key(entity, hard);
    bytes_need_blob(entity, soft);
    known_unsupported_types(entity, soft);
    descriptors_do_not_collide(entity, soft);
    entity_only_attributes(entity, soft);
    sharded_counters(entity, soft);
    sharded_indexes(entity, soft);
    replicated(entity, soft);
    vector_indexes(entity, soft);
    cache_policy(entity, soft);
    monotonic_is_indexed(entity, soft);
    projections(entity, soft);
    index_declarations(entity, soft);
}

/// A global cache timeout is a number of seconds; none is "until a write replaces it".
fn cache_policy(entity: &Entity, errors: &mut Errors) {
    if let Some(timeout) = &entity.global_cache_timeout
        && **timeout == 0
    {
        errors.push(error(
            timeout.span(),
            "`global_cache_timeout = 0` keeps nothing: give the seconds an entity stays in the \
             global cache\nhelp: leave `global_cache_timeout` out to keep entities until a write \
             replaces them, or write `global_cache = false` to cache nothing",
        ));
    }
    if let (Some(global), Some(timeout)) = (&entity.global_cache, &entity.global_cache_timeout)
        && !**global
    {
        errors.push(error(
            timeout.span(),
            "`global_cache_timeout` is for a cached kind, but `global_cache = false` caches \
             nothing\nhelp: remove one of them",
        ));
    }
}

/// Entities are concrete types: a kind has one schema.
fn no_generics(entity: &Entity, errors: &mut Errors) {
    if let Some(param) = entity.generics.params.first() {
        errors.push(error(
            syn::spanned::Spanned::span(param),
            "`#[derive(Entity)]` does not support generic structs: a kind has one fixed schema; \
             declare one struct per kind",
        ));
    }
}

/// R-N1, R-N2, R-N5, R-N7 for the kind.
fn kind_name(entity: &Entity, errors: &mut Errors) {
    name(NameRole::Kind, &entity.kind, errors);
}

/// R-N1, R-N3, R-N4, R-N5, R-N7 for every property name.
fn property_names(entity: &Entity, errors: &mut Errors) {
    for field in entity.properties() {
        name(NameRole::Property, &field.name, errors);
    }
}

fn name(role: NameRole, name: &Name, errors: &mut Errors) {
    if let Err(violation) = datastore_entity_names::check_bytes(role, &name.bytes) {
        errors.push(error(name.span, name_message(role, name, violation)));
    }
}

/// "what is wrong" plus a help line saying what to write instead.
fn name_message(role: NameRole, name: &Name, violation: NameViolation) -> String {
    let text = name.text();
    let noun = role.noun();
    let fixed = datastore_entity_names::suggest(role, &text);
    let example = fixed.as_deref().unwrap_or("a_valid_name");
    let attribute = match role {
        NameRole::Kind => format!("#[entity(kind = \"{example}\")]"),
        _ => format!("#[property(rename = \"{example}\")]"),
    };
    let help = match (name.origin, &fixed, violation) {
        (_, _, NameViolation::InvalidUtf8 { .. }) => {
            "write the name as a string literal, which is always UTF-8".to_owned()
        }
        (_, _, NameViolation::Empty) => "give it a non-empty name".to_owned(),
        (_, _, NameViolation::TooLong { max, .. }) => format!("shorten it to at most {max} bytes"),
        (Origin::Literal, Some(fixed), _) => format!("write \"{fixed}\" instead"),
        (Origin::Literal, None, _) => "choose a name that follows the rule".to_owned(),
        (Origin::Ident, _, _) => format!("store it under another name with `{attribute}`"),
        (Origin::RenameAll, _, _) => {
            format!("`rename_all` made this name; override it with `{attribute}`")
        }
    };
    format!("{noun} {} {violation}\nhelp: {help}", shown(&text))
}

/// Two fields stored under one name would overwrite each other.
fn unique_property_names(entity: &Entity, errors: &mut Errors) {
    let mut seen: HashMap<&[u8], &syn::Ident> = HashMap::new();
    for field in entity.properties() {
        if let Some(first) = seen.insert(&field.name.bytes, &field.ident) {
            errors.push(error(
                field.name.span,
                format!(
                    "property name {} is already used by field `{first}`; two fields cannot share \
                     one stored name\nhelp: give one of them another name with `#[property(rename = \"...\")]`",
                    shown(&field.name.text())
                ),
            ));
        }
    }
}

/// `#[property(json)]` is one stored form (JSON text as bytes): not with another form, and
/// only on an entity's own properties (an embedded entity's conversion cannot fail, and
/// serializing can).
fn json(entity: &Entity, errors: &mut Errors) {
    for field in entity.stored() {
        let Some(span) = field.json else { continue };
        if let Some(other) = field.own_form() {
            errors.push(error(
                span,
                format!(
                    "`#[property(json)]` cannot be combined with `{other}`: a JSON property is \
                     stored as its JSON text, excluded from indexes\nhelp: remove one of them"
                ),
            ));
        } else if !entity.is_entity() {
            errors.push(error(
                span,
                "`#[property(json)]` is for properties of an entity with a `#[key]`, not of an \
                 embedded entity: writing JSON can fail, and an embedded entity's conversion \
                 cannot report it\nhelp: move the JSON property to the entity that holds this \
                 one",
            ));
        }
    }
}

/// `#[property(alias)]` and `#[property(default)]` apply to stored properties; an alias is a
/// valid property name (R-N1…R-N7) that no property or other alias of the entity uses.
fn aliases_and_defaults(entity: &Entity, errors: &mut Errors) {
    for field in entity.fields.iter().filter(|f| !f.stored()) {
        let what = match field.role() {
            Role::Key => "the `#[key]` field",
            Role::Parent => "the `#[parent]` field",
            Role::Property => "a `#[sharded]` counter, which lives in its shards",
        };
        let aliases = field.aliases.iter().map(|a| (a.span, "alias"));
        let aliases = aliases.chain(field.write_alias.map(|span| (span, "write_alias")));
        let default = field.default.as_ref().map(|d| (d.span(), "default"));
        let flatten = field.flatten.map(|span| (span, "flatten"));
        let json = field.json.map(|span| (span, "json"));
        for (span, attr) in aliases.chain(default).chain(flatten).chain(json) {
            errors.push(error(
                span,
                format!(
                    "`#[property({attr})]` cannot be used on {what}: it applies to stored \
                     properties\nhelp: remove it"
                ),
            ));
        }
    }
    // A flattened field is read from its `name.sub` properties, as one layout.
    for field in entity.stored() {
        let Some(span) = field.flatten else { continue };
        let others = [
            (field.json.is_some(), "json"),
            (!field.aliases.is_empty(), "alias"),
            (field.default.is_some(), "default"),
        ];
        let other = others
            .into_iter()
            .find_map(|(set, attr)| set.then_some(attr));
        if let Some(other) = other.or_else(|| field.own_form()) {
            errors.push(error(
                span,
                format!(
                    "`#[property(flatten)]` cannot be combined with `{other}`: a flattened \
                     field is stored as its embedded entity's `name.sub` properties\nhelp: \
                     remove one of them"
                ),
            ));
        }
    }
    // `write_alias` writes the value under the former name too: there must be exactly one.
    for field in entity.stored() {
        let Some(span) = field.write_alias else {
            continue;
        };
        if field.aliases.len() != 1 || field.flatten.is_some() {
            let found = match field.aliases.len() {
                0 => "none".to_owned(),
                n => n.to_string(),
            };
            errors.push(error(
                span,
                format!(
                    "`#[property(write_alias)]` writes the value under the field's former name \
                     too (and reads that first), so the field needs exactly one `alias`; it has \
                     {found}\nhelp: name the one former name older binaries read: \
                     `#[property(alias = \"old_name\", write_alias)]`"
                ),
            ));
        }
    }
    json(entity, errors);
    let mut taken: HashMap<Vec<u8>, String> = HashMap::new();
    for field in entity.stored() {
        taken.insert(
            field.name.bytes.clone(),
            format!("the property of field `{}`", field.ident),
        );
        if field.flags.sharded_index.is_some() {
            let owner = format!("the companion property of field `{}`", field.ident);
            taken.insert(field.companion().into_bytes(), owner);
        }
    }
    for field in entity.stored() {
        for alias in &field.aliases {
            if datastore_entity_names::check_bytes(NameRole::Property, &alias.bytes).is_err() {
                name(NameRole::Property, alias, errors);
                continue;
            }
            let owner = format!("an alias of field `{}`", field.ident);
            if let Some(user) = taken.insert(alias.bytes.clone(), owner) {
                errors.push(error(
                    alias.span,
                    format!(
                        "the alias {} is already {user}: an alias is a former name that no \
                         other property of `{}` uses, or a write would remove it\nhelp: remove \
                         this alias",
                        shown(&alias.text()),
                        entity.ident
                    ),
                ));
            }
        }
    }
}

/// One `#[key]` (or none, for an embedded entity) and at most one `#[parent]`.
fn at_most_one(entity: &Entity, role: Role, attr: &str, errors: &mut Errors) {
    let mut fields = entity.with_role(role);
    let Some(first) = fields.next() else { return };
    for extra in fields {
        let span = match role {
            Role::Key => extra.flags.key,
            _ => extra.flags.parent,
        };
        errors.push(error(
            span.unwrap_or_else(|| extra.ident.span()),
            format!(
                "several fields are marked `{attr}`; an entity has exactly one (the first is `{}`)\n\
                 help: remove `{attr}` from this field",
                first.ident
            ),
        ));
    }
}

/// Without `#[key]` a struct is an embedded entity: it has no kind of its own and no ancestor.
fn embedded_needs_no_kind_or_parent(entity: &Entity, errors: &mut Errors) {
    if entity.key().is_some() {
        return;
    }
    let reason =
        "a struct without a `#[key]` field is an embedded entity, stored inside another entity";
    if entity.kind_given {
        errors.push(error(
            entity.kind.span,
            format!(
                "`kind` is set but the struct has no `#[key]` field; {reason}, so it has no kind\n\
                 help: add a `#[key]` field (KeyName, String, KeyId, u64 or Option<KeyId>) to store it on its own"
            ),
        ));
    }
    if let Some(parent) = entity.parent() {
        errors.push(error(
            parent.flags.parent.unwrap_or_else(|| parent.ident.span()),
            format!(
                "`#[parent]` needs a `#[key]` field beside it; {reason}, so it has no key\n\
                 help: add a `#[key]` field (KeyName, String, KeyId, u64 or Option<KeyId>)"
            ),
        ));
    }
}

/// The key and the parent live in the entity's key, not in its properties: property
/// attributes on them mean nothing.
fn key_and_parent_are_not_properties(entity: &Entity, errors: &mut Errors) {
    for field in entity.fields.iter().filter(|f| f.role() != Role::Property) {
        let role = if field.role() == Role::Key {
            "#[key]"
        } else {
            "#[parent]"
        };
        let misplaced = [
            (field.flags.exclude_from_index, "#[exclude_from_index]"),
            (field.flags.ttl, "#[ttl]"),
            (field.flags.blob, "#[blob]"),
            (field.flags.monotonic, "#[index(monotonic)]"),
            (field.flags.sharded.map(|c| c.span), "#[sharded]"),
            (
                field.flags.sharded_index.map(|c| c.span),
                "#[sharded_index]",
            ),
            (
                field.flags.parent.filter(|_| field.role() == Role::Key),
                "#[parent]",
            ),
        ];
        for (span, attr) in misplaced {
            if let Some(span) = span {
                errors.push(error(
                    span,
                    format!(
                        "`{attr}` cannot be used on the `{role}` field: it is part of the entity's key, \
                         which is not a property and is always indexed\nhelp: remove `{attr}`"
                    ),
                ));
            }
        }
        if field.name.origin == Origin::Literal {
            errors.push(error(
                field.name.span,
                format!(
                    "`#[property(rename)]` cannot be used on the `{role}` field: it is part of the \
                     entity's key, not a property\nhelp: remove the `#[property(...)]` attribute"
                ),
            ));
        }
    }
}

/// `#[parent]` holds the parent's typed key.
fn parent_is_a_key(entity: &Entity, errors: &mut Errors) {
    for field in entity.with_role(Role::Parent) {
        if key_target(&field.ty).is_none() {
            errors.push(errors::on(
                &field.ty,
                "a `#[parent]` field must be a typed key, `Key<ParentEntity>`\n\
                 help: change the field's type to `Key<...>` of the parent's entity type",
            ));
        }
    }
}

/// R-P1: bytes are a byte string, not an array of small integers.
fn bytes_need_blob(entity: &Entity, errors: &mut Errors) {
    for field in entity.properties().filter(|f| f.json.is_none()) {
        if field.flags.blob.is_none() && is_vec_u8(&field.ty) {
            errors.push(errors::on(
                &field.ty,
                "a `Vec<u8>` would be stored as an array of integers, one index entry per byte [R-P1]\n\
                 help: mark the field `#[blob]` or use `Blob` to store the bytes as a byte string",
            ));
        }
    }
}

/// The std types people reach for first get an error that says what to store instead; the
/// derive then leaves out the field's type assertion, so the mistake is reported once.
fn known_unsupported_types(entity: &Entity, errors: &mut Errors) {
    let plain = |f: &&Field| f.flags.blob.is_none() && f.json.is_none();
    for field in entity.properties().filter(plain) {
        if let Some((name, why, fix)) = unsupported_hint(&field.ty) {
            errors.push(errors::on(
                &field.ty,
                format!("`{name}` cannot be stored as a property value: {why}\nhelp: {fix}"),
            ));
        }
    }
}

/// Each property gets a descriptor constant (`title` → `Post::TITLE`); it must not shadow the
/// trait's `KIND` or `SCHEMA`, nor another field's descriptor.
fn descriptors_do_not_collide(entity: &Entity, errors: &mut Errors) {
    let mut seen: HashMap<String, &syn::Ident> = HashMap::new();
    for field in entity.stored() {
        let descriptor = field.descriptor().to_string();
        let clash = if RESERVED_DESCRIPTORS.contains(&descriptor.as_str()) {
            format!(
                "`{}::{descriptor}` already names the kind's {}",
                entity.ident,
                descriptor.to_lowercase()
            )
        } else if let Some(first) = seen.get(&descriptor) {
            format!(
                "field `{first}` already has the descriptor `{}::{descriptor}`",
                entity.ident
            )
        } else {
            seen.insert(descriptor, &field.ident);
            continue;
        };
        errors.push(error(
            field.ident.span(),
            format!(
                "field `{}` would get the property descriptor `{}::{descriptor}`, but {clash}\n\
                 help: rename the field, keeping its stored name with \
                 `#[property(rename = \"{}\")]`",
                field.ident,
                entity.ident,
                field.name.text()
            ),
        ));
    }
}

/// Counters, sharded indexes, replicas, projections and indexes belong to a kind: an embedded
/// struct (no `#[key]`) has none.
fn entity_only_attributes(entity: &Entity, errors: &mut Errors) {
    if entity.is_entity() {
        return;
    }
    let why = "a struct without a `#[key]` field is an embedded entity, stored inside another \
               entity, and has no kind of its own\nhelp: add a `#[key]` field, or remove the attribute";
    for field in entity.properties() {
        if let Some(count) = field.flags.sharded {
            errors.push(error(
                count.span,
                format!("`#[sharded]` needs an entity with a key: {why}"),
            ));
        }
        if let Some(count) = field.flags.sharded_index {
            errors.push(error(
                count.span,
                format!("`#[sharded_index]` needs an entity with a key: {why}"),
            ));
        }
        if let Some(count) = field.flags.vector_index {
            errors.push(error(
                count.span,
                format!("`#[vector_index]` needs an entity with a key: {why}"),
            ));
        }
    }
    if let Some(global) = &entity.global_cache {
        errors.push(error(
            global.span(),
            format!("`global_cache` needs an entity with a key: {why}"),
        ));
    }
    if let Some(timeout) = &entity.global_cache_timeout {
        errors.push(error(
            timeout.span(),
            format!("`global_cache_timeout` needs an entity with a key: {why}"),
        ));
    }
    if let Some(count) = entity.replicated.as_ref().map(|r| &r.count) {
        errors.push(error(
            count.span,
            format!("`#[replicated]` needs an entity with a key: {why}"),
        ));
    }
    for projection in &entity.projections {
        errors.push(error(
            projection.name.span(),
            format!("a projection is a query of the kind: {why}"),
        ));
    }
    for index in &entity.indexes {
        errors.push(error(
            index.decl.span,
            format!("an index is an index of the kind: {why}"),
        ));
    }
}
