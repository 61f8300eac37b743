//! The rules, one small function each, run on the typed model before any code is generated.
//! Every broken rule is recorded; all of them are reported together.
//!
//! Rules about names and property types leave the model well-formed (`soft`): the code is
//! still generated next to their errors, so the user's code that uses the type compiles and
//! only the real mistakes are shown. Structural mistakes (`hard`) stop generation.

use std::collections::HashMap;

use darling::error::Accumulator;
use datastore_entity_names::{NameRole, NameViolation};
use proc_macro2::Span;

use crate::ast::{Entity, Name, Origin, Role, is_vec_u8, key_target, type_span};

pub(crate) fn check(entity: &Entity, hard: &mut Accumulator, soft: &mut Accumulator) {
    no_generics(entity, hard);
    kind_name(entity, soft);
    property_names(entity, soft);
    unique_property_names(entity, soft);
    at_most_one(entity, Role::Key, "#[key]", hard);
    at_most_one(entity, Role::Parent, "#[parent]", hard);
    embedded_needs_no_kind_or_parent(entity, hard);
    key_and_parent_are_not_properties(entity, hard);
    parent_is_a_key(entity, hard);
    bytes_need_blob(entity, soft);
}

fn error(span: Span, message: String) -> darling::Error {
    darling::Error::custom(message).with_span(&span)
}

/// Entities are concrete types: a kind has one schema.
fn no_generics(entity: &Entity, errors: &mut Accumulator) {
    if let Some(param) = entity.generics.params.first() {
        errors.push(error(
            syn::spanned::Spanned::span(param),
            "`#[derive(Entity)]` does not support generic structs: a kind has one fixed schema; \
             declare one struct per kind"
                .into(),
        ));
    }
}

/// R-N1, R-N2, R-N5, R-N7 for the kind.
fn kind_name(entity: &Entity, errors: &mut Accumulator) {
    name(NameRole::Kind, &entity.kind, errors);
}

/// R-N1, R-N3, R-N4, R-N5, R-N7 for every property name.
fn property_names(entity: &Entity, errors: &mut Accumulator) {
    for field in entity.properties() {
        name(NameRole::Property, &field.name, errors);
    }
}

fn name(role: NameRole, name: &Name, errors: &mut Accumulator) {
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

/// The name in quotes, shortened when it is too long to read in a message.
fn shown(text: &str) -> String {
    const SHOWN: usize = 40;
    if text.chars().count() <= SHOWN {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(SHOWN).collect();
    format!("{head:?}… ({} bytes)", text.len())
}

/// Two fields stored under one name would overwrite each other.
fn unique_property_names(entity: &Entity, errors: &mut Accumulator) {
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

/// One `#[key]` (or none, for an embedded entity) and at most one `#[parent]`.
fn at_most_one(entity: &Entity, role: Role, attr: &str, errors: &mut Accumulator) {
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
fn embedded_needs_no_kind_or_parent(entity: &Entity, errors: &mut Accumulator) {
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
fn key_and_parent_are_not_properties(entity: &Entity, errors: &mut Accumulator) {
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
fn parent_is_a_key(entity: &Entity, errors: &mut Accumulator) {
    for field in entity.with_role(Role::Parent) {
        if key_target(&field.ty).is_none() {
            errors.push(error(
                type_span(&field.ty),
                "a `#[parent]` field must be a typed key, `Key<ParentEntity>`\n\
                 help: change the field's type to `Key<...>` of the parent's entity type"
                    .into(),
            ));
        }
    }
}

/// R-P1: bytes are a byte string, not an array of small integers.
fn bytes_need_blob(entity: &Entity, errors: &mut Accumulator) {
    for field in entity.properties() {
        if field.flags.blob.is_none() && is_vec_u8(&field.ty) {
            errors.push(error(
                type_span(&field.ty),
                "a `Vec<u8>` would be stored as an array of integers, one index entry per byte [R-P1]\n\
                 help: mark the field `#[blob]` or use `Blob` to store the bytes as a byte string"
                    .into(),
            ));
        }
    }
}
