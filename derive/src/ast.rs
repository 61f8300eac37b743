//! The typed model of one entity, built from the parsed attributes. Names are resolved
//! here (kind default, `rename`, `rename_all`); whether they are valid is `check.rs`'s job.

use heck::{ToKebabCase, ToLowerCamelCase, ToPascalCase, ToShoutySnakeCase, ToSnakeCase};
use proc_macro2::Span;

use crate::attr::{
    DefaultAttr, EntityAttrs, EntityInput, FieldFlags, IndexDecl, NameLit, ProjectionDecl,
    field_flags, replicated,
};

/// How a stored name was obtained, for error messages that say what to change.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Written as a literal (`kind = "..."`, `rename = "..."`).
    Literal,
    /// Taken from the Rust identifier.
    Ident,
    /// The Rust identifier converted by `rename_all`.
    RenameAll,
}

/// A kind or property name as it will be stored, with the token it came from.
#[derive(Clone)]
pub(crate) struct Name {
    pub bytes: Vec<u8>,
    pub span: Span,
    pub origin: Origin,
}

impl Name {
    /// The name as text; only called after `check` proved it is UTF-8.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    fn from_ident(ident: &syn::Ident, origin: Origin, case: Option<Case>) -> Name {
        let raw = ident_text(ident);
        let text = case.map_or_else(|| raw.clone(), |case| case.apply(&raw));
        Name {
            bytes: text.into_bytes(),
            span: ident.span(),
            origin,
        }
    }

    fn from_lit(lit: &NameLit) -> Name {
        Name {
            bytes: lit.bytes.clone(),
            span: lit.span,
            origin: Origin::Literal,
        }
    }
}

/// An identifier without its `r#` prefix.
pub(crate) fn ident_text(ident: &syn::Ident) -> String {
    let text = ident.to_string();
    text.strip_prefix("r#").map(str::to_owned).unwrap_or(text)
}

/// The `rename_all` conversions, spelled as serde spells them.
#[derive(Clone, Copy)]
pub(crate) enum Case {
    Lower,
    Upper,
    Camel,
    Pascal,
    Snake,
    ScreamingSnake,
    Kebab,
}

pub(crate) const CASES: &str = "\"lowercase\", \"UPPERCASE\", \"camelCase\", \"PascalCase\", \"snake_case\", \"SCREAMING_SNAKE_CASE\", \"kebab-case\"";

impl Case {
    /// The case of a `rename_all = "..."` attribute, or an error listing the known ones.
    pub(crate) fn from_attr(value: &darling::util::SpannedValue<String>) -> syn::Result<Case> {
        Case::parse(value).ok_or_else(|| {
            syn::Error::new(
                value.span(),
                format!(
                    "unknown `rename_all` value {:?}; use one of {CASES}",
                    value.as_str()
                ),
            )
        })
    }

    fn parse(text: &str) -> Option<Case> {
        Some(match text {
            "lowercase" => Case::Lower,
            "UPPERCASE" => Case::Upper,
            "camelCase" => Case::Camel,
            "PascalCase" => Case::Pascal,
            "snake_case" => Case::Snake,
            "SCREAMING_SNAKE_CASE" => Case::ScreamingSnake,
            "kebab-case" => Case::Kebab,
            _ => return None,
        })
    }

    pub(crate) fn apply(self, ident: &str) -> String {
        match self {
            Case::Lower => ident.to_lowercase(),
            Case::Upper => ident.to_uppercase(),
            Case::Camel => ident.to_lower_camel_case(),
            Case::Pascal => ident.to_pascal_case(),
            Case::Snake => ident.to_snake_case(),
            Case::ScreamingSnake => ident.to_shouty_snake_case(),
            Case::Kebab => ident.to_kebab_case(),
        }
    }
}

/// What a field is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Key,
    Parent,
    Property,
}

/// One field of the struct.
pub(crate) struct Field {
    pub ident: syn::Ident,
    pub ty: syn::Type,
    pub flags: FieldFlags,
    /// The stored property name (meaningful for properties only).
    pub name: Name,
    /// `#[property(default)]` / `#[property(default = "path")]`.
    pub default: Option<DefaultAttr>,
    /// `#[property(alias = "...")]`: former names, read when `name` is absent.
    pub aliases: Vec<Name>,
    /// `#[property(write_alias)]`: the first step of a rolling rename — the value is also
    /// written under its one alias, which is read first.
    pub write_alias: Option<Span>,
    /// `#[property(flatten)]`: an embedded entity stored as `name.sub` properties.
    pub flatten: Option<Span>,
    /// `#[property(json)]`: any serde type, stored as NDB's JsonProperty stores it.
    pub json: Option<Span>,
}

impl Field {
    pub(crate) fn role(&self) -> Role {
        if self.flags.key.is_some() {
            Role::Key
        } else if self.flags.parent.is_some() {
            Role::Parent
        } else {
            Role::Property
        }
    }

    /// Stored on the entity itself (a `#[sharded]` counter lives in its shards).
    pub(crate) fn stored(&self) -> bool {
        self.role() == Role::Property && self.flags.sharded.is_none()
    }

    /// Stored excluded from indexes: `#[exclude_from_index]`, implied by `#[ttl]` (R-I4), the
    /// plain value of a `#[sharded_index]` field (R-S3), and JSON text (as NDB stores it).
    pub(crate) fn excluded(&self) -> bool {
        self.flags.exclude_from_index.is_some()
            || self.flags.ttl.is_some()
            || self.flags.sharded_index.is_some()
            || self.json.is_some()
            || is_vector(&self.ty)
    }

    /// The first attribute that gives the field a stored form of its own (`#[blob]`, `#[ttl]`,
    /// `#[sharded_index]`), which `flatten` and `json` cannot be combined with.
    pub(crate) fn own_form(&self) -> Option<&'static str> {
        [
            (self.flags.blob.is_some(), "#[blob]"),
            (self.flags.ttl.is_some(), "#[ttl]"),
            (self.flags.sharded_index.is_some(), "#[sharded_index]"),
        ]
        .into_iter()
        .find_map(|(set, attr)| set.then_some(attr))
    }

    /// The field's descriptor constant, `TITLE` for `title`.
    pub(crate) fn descriptor(&self) -> syn::Ident {
        syn::Ident::new(
            &ident_text(&self.ident).to_shouty_snake_case(),
            self.ident.span(),
        )
    }

    /// Why the field cannot be projected or put in a composite index, if it cannot.
    pub(crate) fn not_indexed(&self) -> Option<&'static str> {
        match self.role() {
            Role::Key => Some("it is the key, which every index holds already"),
            Role::Parent => {
                Some("it is the parent, part of the key; use `ancestor_index` for ancestor queries")
            }
            Role::Property if self.flags.sharded.is_some() => {
                Some("it is a sharded counter, which lives in its own shard entities")
            }
            Role::Property if self.flags.sharded_index.is_some() => None,
            Role::Property if self.json.is_some() => {
                Some("it is JSON text, excluded from indexes as NDB's JsonProperty is [R-I1]")
            }
            Role::Property if is_vector(&self.ty) => Some(
                "it is a vector, always excluded from indexes (the service refuses an indexed \
                 one); search it with `find_nearest`",
            ),
            Role::Property if self.excluded() => {
                Some("it is excluded from indexes (`#[exclude_from_index]` or `#[ttl]`) [R-I1]")
            }
            Role::Property => None,
        }
    }

    /// The dimension of a `Vector` field's `#[vector_index(n)]`.
    pub(crate) fn vector_index(&self) -> Option<u64> {
        self.flags
            .vector_index
            .filter(|_| self.stored() && is_vector(&self.ty))
            .map(|c| c.value)
    }

    /// The stored name of a `#[sharded_index]` field's indexed companion property.
    pub(crate) fn companion(&self) -> String {
        format!("{}_sharded", self.name.text())
    }
}

/// Descriptor names the `Entity` trait already uses: a field with one of these names would
/// shadow the trait's item.
pub(crate) const RESERVED_DESCRIPTORS: [&str; 2] = ["KIND", "SCHEMA"];

/// A composite index declaration: `index(...)` or `ancestor_index(...)`.
pub(crate) struct Index {
    pub ancestor: bool,
    pub decl: IndexDecl,
}

/// One `#[derive(Entity)]` input.
pub(crate) struct Entity {
    pub ident: syn::Ident,
    pub vis: syn::Visibility,
    pub generics: syn::Generics,
    pub krate: syn::Path,
    pub kind: Name,
    /// Whether `kind = "..."` was written (a struct without a key cannot have a kind).
    pub kind_given: bool,
    pub fields: Vec<Field>,
    pub projections: Vec<ProjectionDecl>,
    pub indexes: Vec<Index>,
    /// `#[replicated(n)]`, `#[replicated(n, unchecked)]`.
    pub replicated: Option<crate::attr::Replicated>,
    /// `#[entity(global_cache = ...)]`.
    pub global_cache: Option<darling::util::SpannedValue<bool>>,
    /// `#[entity(global_cache_timeout = ...)]`, in seconds.
    pub global_cache_timeout: Option<darling::util::SpannedValue<u32>>,
}

impl Entity {
    pub(crate) fn from_input(
        input: EntityInput,
        attrs: EntityAttrs,
        errors: &mut crate::errors::Errors,
    ) -> Entity {
        let case = attrs
            .rename_all
            .as_ref()
            .and_then(|r| Case::from_attr(r).map_err(|e| errors.push(e)).ok());
        let fields = input
            .data
            .take_struct()
            .map(|fields| fields.fields)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|field| {
                let flags = field_flags(&field.attrs, errors);
                // `supports(struct_named)` guarantees an identifier.
                let ident = field.ident?;
                let name = match &field.rename {
                    Some(lit) => Name::from_lit(lit),
                    None if case.is_some() => Name::from_ident(&ident, Origin::RenameAll, case),
                    None => Name::from_ident(&ident, Origin::Ident, None),
                };
                Some(Field {
                    ident,
                    ty: field.ty,
                    flags,
                    name,
                    default: field.default,
                    aliases: field.alias.iter().map(Name::from_lit).collect(),
                    write_alias: field
                        .write_alias
                        .is_present()
                        .then(|| field.write_alias.span()),
                    flatten: field.flatten.is_present().then(|| field.flatten.span()),
                    json: field.json.is_present().then(|| field.json.span()),
                })
            })
            .collect();
        let indexes = attrs
            .index
            .into_iter()
            .map(|decl| Index {
                ancestor: false,
                decl,
            })
            .chain(attrs.ancestor_index.into_iter().map(|decl| Index {
                ancestor: true,
                decl,
            }))
            .collect();
        Entity {
            kind: attrs.kind.as_ref().map_or_else(
                || Name::from_ident(&input.ident, Origin::Ident, None),
                Name::from_lit,
            ),
            kind_given: attrs.kind.is_some(),
            krate: attrs
                .krate
                .unwrap_or_else(|| syn::parse_quote!(::datastore_entity)),
            replicated: replicated(&input.attrs, errors),
            ident: input.ident,
            vis: input.vis,
            generics: input.generics,
            fields,
            projections: attrs.projection,
            indexes,
            global_cache: attrs.global_cache,
            global_cache_timeout: attrs.global_cache_timeout,
        }
    }

    pub(crate) fn with_role(&self, role: Role) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(move |f| f.role() == role)
    }

    pub(crate) fn key(&self) -> Option<&Field> {
        self.with_role(Role::Key).next()
    }

    pub(crate) fn parent(&self) -> Option<&Field> {
        self.with_role(Role::Parent).next()
    }

    /// Every property field, stored or not (counters included).
    pub(crate) fn properties(&self) -> impl Iterator<Item = &Field> {
        self.with_role(Role::Property)
    }

    /// The fields stored on the entity itself.
    pub(crate) fn stored(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(|f| f.stored())
    }

    /// The `#[sharded(n)]` counters.
    pub(crate) fn counters(&self) -> impl Iterator<Item = &Field> {
        self.properties().filter(|f| f.flags.sharded.is_some())
    }

    /// The `#[sharded_index(n)]` fields.
    pub(crate) fn sharded_indexes(&self) -> impl Iterator<Item = &Field> {
        self.stored().filter(|f| f.flags.sharded_index.is_some())
    }

    /// Whether the struct is meant to be an entity of its own (not an embedded one): it has a
    /// key, a parent, or a kind.
    pub(crate) fn is_entity(&self) -> bool {
        self.key().is_some() || self.parent().is_some() || self.kind_given
    }

    /// The stored fields with the descriptor each gets: a descriptor that would collide
    /// with the trait's items or with an earlier field's is left out (`check` reports it).
    pub(crate) fn descriptors(&self) -> Vec<(&Field, syn::Ident)> {
        let mut taken: Vec<String> = RESERVED_DESCRIPTORS
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        self.stored()
            .filter_map(|field| {
                let ident = field.descriptor();
                let text = ident.to_string();
                if taken.contains(&text) {
                    return None;
                }
                taken.push(text);
                Some((field, ident))
            })
            .collect()
    }

    /// The field a projection or index declaration names, by its Rust identifier.
    pub(crate) fn field(&self, ident: &syn::Ident) -> Option<&Field> {
        let wanted = ident_text(ident);
        self.fields.iter().find(|f| ident_text(&f.ident) == wanted)
    }

    /// The properties of an index declaration that can be indexed, each once, as stored
    /// names (a `#[sharded_index]` field by its companion) with their direction.
    pub(crate) fn index_properties(&self, index: &Index) -> Vec<(String, bool)> {
        let mut properties: Vec<(String, bool)> = Vec::new();
        for item in &index.decl.items {
            let Some(field) = self.field(&item.field) else {
                continue;
            };
            if field.not_indexed().is_some() {
                continue;
            }
            let name = match field.flags.sharded_index {
                Some(_) => field.companion(),
                None => field.name.text(),
            };
            if !properties.iter().any(|(n, _)| *n == name) {
                properties.push((name, item.descending));
            }
        }
        properties
    }

    /// The vector field an `index(...)` ends with, when that field declares
    /// `#[vector_index(n)]`: the index is then a vector index pre-filtered on the others.
    pub(crate) fn vector_tail(&self, index: &Index) -> Option<&Field> {
        let last = index.decl.items.last()?;
        self.field(&last.field)
            .filter(|f| !index.ancestor && f.vector_index().is_some())
    }

    /// The known fields a projection lists, each once, with the name that lists it.
    pub(crate) fn projection_fields<'a>(
        &'a self,
        projection: &'a ProjectionDecl,
    ) -> Vec<(&'a syn::Ident, &'a Field)> {
        let mut fields: Vec<(&syn::Ident, &Field)> = Vec::new();
        for ident in &projection.fields {
            if let Some(field) = self.field(ident).filter(|f| f.stored())
                && !fields.iter().any(|(_, f)| f.ident == field.ident)
            {
                fields.push((ident, field));
            }
        }
        fields
    }

    /// The projections that can be generated: each name once, not the entity's own.
    pub(crate) fn distinct_projections(&self) -> Vec<&ProjectionDecl> {
        let mut seen: Vec<String> = vec![ident_text(&self.ident)];
        self.projections
            .iter()
            .filter(|p| {
                let name = ident_text(&p.name);
                let new = !seen.contains(&name);
                seen.push(name);
                new
            })
            .collect()
    }

    /// The kind of a counter's shards.
    pub(crate) fn shard_kind(&self, field: &Field) -> String {
        format!("{}.{}.shard", self.kind.text(), field.name.text())
    }

    /// The kind of the replicas.
    pub(crate) fn replica_kind(&self) -> String {
        format!("{}.replica", self.kind.text())
    }
}

/// What to store instead of a std type the store cannot hold, for the types people reach
/// for first: the message of a targeted error at the field's type.
pub(crate) fn unsupported_hint(ty: &syn::Type) -> Option<(String, &'static str, &'static str)> {
    let ident = innermost(ty)?;
    let name = ident.to_string();
    let (why, fix) = match name.as_str() {
        "SystemTime" | "Instant" => (
            "the store keeps points in time as `Timestamp` (microseconds, UTC)",
            "declare the field as `Timestamp` and convert with `Timestamp::from(system_time)`",
        ),
        "Duration" => (
            "the store has no duration type",
            "store the duration as an `i64` of microseconds (`duration.as_micros()`)",
        ),
        "u64" | "usize" | "u128" | "i128" | "isize" => (
            "the store's integers are 64-bit signed",
            "use `i64` (or a smaller integer type)",
        ),
        "char" | "str" => ("the store keeps text as strings", "use `String`"),
        "HashMap" | "BTreeMap" => (
            "the store has no map type",
            "declare a struct deriving `Entity` without `#[key]` and store it as an embedded \
             entity, or store the map as JSON text with `#[property(json)]` (feature `serde`)",
        ),
        "HashSet" | "BTreeSet" => (
            "the store has no set type",
            "use a `Vec`: an array property matches filters on any element",
        ),
        _ => return None,
    };
    Some((name, why, fix))
}

/// The last path segment's identifier under `Option`, `Vec` and `Box` (and `&`), as written.
fn innermost(ty: &syn::Type) -> Option<&syn::Ident> {
    match ty {
        syn::Type::Reference(r) => innermost(&r.elem),
        syn::Type::Path(path) if path.qself.is_none() => {
            let last = path.path.segments.last()?;
            let wrapper = ["Option", "Vec", "Box"].iter().any(|w| last.ident == w);
            match (&last.arguments, wrapper) {
                (syn::PathArguments::AngleBracketed(args), true) => match args.args.first() {
                    Some(syn::GenericArgument::Type(inner)) => innermost(inner),
                    _ => None,
                },
                _ => Some(&last.ident),
            }
        }
        _ => None,
    }
}

/// The `P` of a `Key<P>` type (any path ending in `Key` with one type argument).
pub(crate) fn key_target(ty: &syn::Type) -> Option<&syn::Type> {
    let syn::Type::Path(path) = ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    if last.ident != "Key" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.iter().collect::<Vec<_>>().as_slice() {
        [syn::GenericArgument::Type(target)] => Some(target),
        _ => None,
    }
}

/// Whether the type is written `Vector` or `Option<Vector>`: a vector embedding, which the
/// service stores only excluded from indexes (a type the derive cannot see through, an alias,
/// is checked when written instead).
pub(crate) fn is_vector(ty: &syn::Type) -> bool {
    let Some(last) = last_segment(ty) else {
        return false;
    };
    match (&last.arguments, last.ident == "Option") {
        (syn::PathArguments::None, false) => last.ident == "Vector",
        (syn::PathArguments::AngleBracketed(args), true) => {
            matches!(args.args.first(), Some(syn::GenericArgument::Type(inner)) if is_vector(inner))
        }
        _ => false,
    }
}

/// Whether the type is written `Option<...>` (then the key builder also has `incomplete_key`).
pub(crate) fn is_option(ty: &syn::Type) -> bool {
    last_segment(ty).is_some_and(|s| s.ident == "Option")
}

/// Whether the type is written `Vec<u8>` (which would be stored as an array of integers).
pub(crate) fn is_vec_u8(ty: &syn::Type) -> bool {
    let Some(last) = last_segment(ty) else {
        return false;
    };
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return false;
    };
    last.ident == "Vec"
        && matches!(args.args.first(), Some(syn::GenericArgument::Type(syn::Type::Path(p))) if p.path.is_ident("u8"))
}

fn last_segment(ty: &syn::Type) -> Option<&syn::PathSegment> {
    match ty {
        syn::Type::Path(path) if path.qself.is_none() => path.path.segments.last(),
        _ => None,
    }
}
