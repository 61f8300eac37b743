//! The typed model of one entity, built from the parsed attributes. Names are resolved
//! here (kind default, `rename`, `rename_all`); whether they are valid is `check.rs`'s job.

use heck::{ToKebabCase, ToLowerCamelCase, ToPascalCase, ToShoutySnakeCase, ToSnakeCase};
use proc_macro2::Span;
use syn::spanned::Spanned;

use crate::attr::{EntityInput, FieldFlags, NameLit, field_flags};

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

    fn apply(self, ident: &str) -> String {
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

    /// `#[exclude_from_index]`, implied by `#[ttl]` (R-I4).
    pub(crate) fn excluded(&self) -> bool {
        self.flags.exclude_from_index.is_some() || self.flags.ttl.is_some()
    }
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
}

impl Entity {
    pub(crate) fn from_input(
        input: EntityInput,
        errors: &mut darling::error::Accumulator,
    ) -> Entity {
        let case = input.rename_all.as_ref().and_then(|rename_all| {
            let case = Case::parse(rename_all);
            if case.is_none() {
                errors.push(
                    darling::Error::custom(format!(
                        "unknown `rename_all` value {:?}; use one of {CASES}",
                        rename_all.as_str()
                    ))
                    .with_span(&rename_all.span()),
                );
            }
            case
        });
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
                })
            })
            .collect();
        Entity {
            kind: input.kind.as_ref().map_or_else(
                || Name::from_ident(&input.ident, Origin::Ident, None),
                Name::from_lit,
            ),
            kind_given: input.kind.is_some(),
            krate: input
                .krate
                .unwrap_or_else(|| syn::parse_quote!(::datastore_entity)),
            ident: input.ident,
            vis: input.vis,
            generics: input.generics,
            fields,
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

    pub(crate) fn properties(&self) -> impl Iterator<Item = &Field> {
        self.with_role(Role::Property)
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

/// The span of a whole type, for errors about it.
pub(crate) fn type_span(ty: &syn::Type) -> Span {
    ty.span()
}
