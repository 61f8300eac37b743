//! The attributes as written, read with darling into plain structs. No rule is checked here
//! beyond the syntax of each attribute.
//!
//! `#[entity(...)]` has one parser, [`EntityAttrs::parse`], item by item: an item that does
//! not parse is an error and the others are kept, so the derive can still emit the generated
//! API's stub next to the real error. When darling refuses a field's attributes, [`lenient`]
//! reads the struct's fields without them, for the same stub.

use darling::util::SpannedValue;
use darling::{FromDeriveInput, FromField, FromMeta};
use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;

/// The struct and its fields; `#[entity(...)]` and `#[replicated]` are forwarded as written
/// ([`EntityAttrs::parse`], `ast.rs`'s `replicated`).
#[derive(FromDeriveInput)]
#[darling(supports(struct_named), forward_attrs(entity, replicated))]
pub(crate) struct EntityInput {
    pub ident: syn::Ident,
    pub vis: syn::Visibility,
    pub generics: syn::Generics,
    pub data: darling::ast::Data<(), FieldInput>,
    pub attrs: Vec<syn::Attribute>,
}

/// The items of `#[entity(...)]` on the struct.
#[derive(Default)]
pub(crate) struct EntityAttrs {
    pub kind: Option<NameLit>,
    pub rename_all: Option<SpannedValue<String>>,
    pub krate: Option<syn::Path>,
    pub projection: Vec<ProjectionDecl>,
    pub index: Vec<IndexDecl>,
    pub ancestor_index: Vec<IndexDecl>,
    /// `global_cache = false`: the kind stays out of the global cache.
    pub global_cache: Option<SpannedValue<bool>>,
    /// `global_cache_timeout = seconds`: how long the global cache keeps an entity.
    pub global_cache_timeout: Option<SpannedValue<u32>>,
}

/// The items `#[entity(...)]` takes, for "did you mean" hints.
const ENTITY_ITEMS: [&str; 8] = [
    "crate",
    "kind",
    "rename_all",
    "projection",
    "index",
    "ancestor_index",
    "global_cache",
    "global_cache_timeout",
];

impl EntityAttrs {
    /// Every `#[entity(...)]` among `attrs`, item by item: an item that does not parse (or
    /// is unknown, or given twice when it is single) is an error in `errors`, the others
    /// are kept.
    pub(crate) fn parse(attrs: &[syn::Attribute], errors: &mut Vec<darling::Error>) -> Self {
        let mut parsed = EntityAttrs::default();
        for attr in attrs.iter().filter(|a| a.path().is_ident("entity")) {
            let items = match attr
                .parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
            {
                Ok(items) => items,
                Err(error) => {
                    errors.push(error.into());
                    continue;
                }
            };
            for item in items {
                if let Err(error) = parsed.item(&item) {
                    errors.push(error);
                }
            }
        }
        parsed
    }

    fn item(&mut self, item: &syn::Meta) -> darling::Result<()> {
        fn single<T>(slot: &mut Option<T>, item: &syn::Meta, value: T) -> darling::Result<()> {
            match slot.replace(value) {
                None => Ok(()),
                Some(_) => Err(darling::Error::duplicate_field_path(item.path()).with_span(item)),
            }
        }
        let path = item.path();
        let name = path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        let located = |error: darling::Error| error.with_span(item).at(&name);
        match name.as_str() {
            "crate" => single(
                &mut self.krate,
                item,
                syn::Path::from_meta(item).map_err(located)?,
            ),
            "kind" => single(
                &mut self.kind,
                item,
                NameLit::from_meta(item).map_err(located)?,
            ),
            "rename_all" => single(
                &mut self.rename_all,
                item,
                SpannedValue::from_meta(item).map_err(located)?,
            ),
            "global_cache" => single(
                &mut self.global_cache,
                item,
                SpannedValue::from_meta(item).map_err(located)?,
            ),
            "global_cache_timeout" => single(
                &mut self.global_cache_timeout,
                item,
                SpannedValue::from_meta(item).map_err(located)?,
            ),
            "projection" => {
                let decl = ProjectionDecl::from_meta(item).map_err(located)?;
                self.projection.push(decl);
                Ok(())
            }
            "index" | "ancestor_index" => {
                let decl = IndexDecl::from_meta(item).map_err(located)?;
                match name.as_str() {
                    "index" => self.index.push(decl),
                    _ => self.ancestor_index.push(decl),
                }
                Ok(())
            }
            _ => Err(
                darling::Error::unknown_field_path_with_alts(path, &ENTITY_ITEMS).with_span(path),
            ),
        }
    }
}

/// One field: `#[property(rename = "...")]` parsed by darling, the other attributes forwarded.
#[derive(FromField)]
#[darling(
    attributes(property),
    forward_attrs(
        key,
        parent,
        exclude_from_index,
        ttl,
        blob,
        sharded,
        sharded_index,
        vector_index,
        index
    )
)]
pub(crate) struct FieldInput {
    pub ident: Option<syn::Ident>,
    pub ty: syn::Type,
    pub attrs: Vec<syn::Attribute>,
    pub rename: Option<NameLit>,
    pub default: Option<DefaultAttr>,
    #[darling(multiple)]
    pub alias: Vec<NameLit>,
    pub write_alias: darling::util::Flag,
    pub flatten: darling::util::Flag,
    pub json: darling::util::Flag,
}

/// `#[property(default)]` (the field type's `Default`) or `#[property(default = "path")]` (a
/// function), for entities stored without the property.
#[derive(Clone)]
pub(crate) enum DefaultAttr {
    /// `default`: the span of the word.
    Trait(Span),
    /// `default = "path::to_fn"`: the path, spanned at the literal.
    Function(syn::Path),
}

impl DefaultAttr {
    pub(crate) fn span(&self) -> Span {
        match self {
            DefaultAttr::Trait(span) => *span,
            DefaultAttr::Function(path) => path.span(),
        }
    }
}

impl FromMeta for DefaultAttr {
    fn from_meta(item: &syn::Meta) -> darling::Result<Self> {
        match item {
            syn::Meta::Path(path) => Ok(DefaultAttr::Trait(path.span())),
            syn::Meta::NameValue(syn::MetaNameValue {
                value:
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(lit),
                        ..
                    }),
                ..
            }) => lit
                .parse::<syn::Path>()
                .map(DefaultAttr::Function)
                .map_err(|e| {
                    darling::Error::custom(format!(
                        "{e}; write the function's path, such as `default = \"path::to_fn\"`"
                    ))
                    .with_span(lit)
                }),
            other => Err(darling::Error::custom(
                "write `default` (the type's `Default`) or `default = \"path::to_fn\"`",
            )
            .with_span(other)),
        }
    }
}

/// A name given as a literal: a string, or a byte string that must be UTF-8 (R-N1).
#[derive(Clone)]
pub(crate) struct NameLit {
    pub bytes: Vec<u8>,
    pub span: Span,
}

impl FromMeta for NameLit {
    fn from_value(value: &syn::Lit) -> darling::Result<Self> {
        match value {
            syn::Lit::Str(s) => Ok(NameLit {
                bytes: s.value().into_bytes(),
                span: s.span(),
            }),
            syn::Lit::ByteStr(b) => Ok(NameLit {
                bytes: b.value(),
                span: b.span(),
            }),
            // R-N1: names are strings; a number, char or bool is not a name.
            other => Err(darling::Error::custom(
                "a name must be a string literal, such as \"Account\" [R-N1]",
            )
            .with_span(&other.span())),
        }
    }
}

/// `projection(Name: a, b, ...)`: a projection struct and the fields it holds (R-Q2).
#[derive(Clone)]
pub(crate) struct ProjectionDecl {
    pub name: syn::Ident,
    pub fields: Vec<syn::Ident>,
}

impl Parse for ProjectionDecl {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name: syn::Ident = input.parse()?;
        input.parse::<syn::Token![:]>()?;
        let fields = Punctuated::<syn::Ident, syn::Token![,]>::parse_terminated(input)?;
        Ok(ProjectionDecl {
            name,
            fields: fields.into_iter().collect(),
        })
    }
}

impl FromMeta for ProjectionDecl {
    fn from_meta(item: &syn::Meta) -> darling::Result<Self> {
        let list = item.require_list().map_err(|_| {
            darling::Error::custom(
                "write `projection(Name: field, field, ...)`: the projection struct's name, then the fields it holds",
            )
            .with_span(item)
        })?;
        syn::parse2(list.tokens.clone()).map_err(|e| {
            darling::Error::custom(format!("{e}; write `projection(Name: field, field, ...)`"))
                .with_span(&e.span())
        })
    }
}

/// One property of an index declaration: `name` or `-name` (descending).
#[derive(Clone)]
pub(crate) struct IndexItem {
    pub field: syn::Ident,
    pub descending: bool,
    pub span: Span,
}

/// `index(a, -b, ...)` or `ancestor_index(...)`: a composite index (R-I2).
#[derive(Clone)]
pub(crate) struct IndexDecl {
    pub items: Vec<IndexItem>,
    pub span: Span,
}

impl Parse for IndexItem {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let minus: Option<syn::Token![-]> = input.parse()?;
        let field: syn::Ident = input.parse()?;
        let span = match &minus {
            Some(minus) => minus
                .span
                .join(field.span())
                .unwrap_or_else(|| field.span()),
            None => field.span(),
        };
        Ok(IndexItem {
            field,
            descending: minus.is_some(),
            span,
        })
    }
}

impl FromMeta for IndexDecl {
    fn from_meta(item: &syn::Meta) -> darling::Result<Self> {
        let list = item.require_list().map_err(|_| {
            darling::Error::custom(
                "write `index(field, -field, ...)`: the indexed fields in order, `-` for descending",
            )
            .with_span(item)
        })?;
        let items = list
            .parse_args_with(Punctuated::<IndexItem, syn::Token![,]>::parse_terminated)
            .map_err(|e| {
                darling::Error::custom(format!(
                    "{e}; write `index(field, -field, ...)`, `-` for descending"
                ))
                .with_span(&e.span())
            })?;
        Ok(IndexDecl {
            items: items.into_iter().collect(),
            span: list.path.span(),
        })
    }
}

/// A count given to an attribute (`#[sharded(20)]`), with its span for range errors.
#[derive(Clone, Copy)]
pub(crate) struct Count {
    pub value: u64,
    pub span: Span,
}

/// The word and count attributes of one field, each with the span of its path.
#[derive(Default)]
pub(crate) struct FieldFlags {
    pub key: Option<Span>,
    pub parent: Option<Span>,
    pub exclude_from_index: Option<Span>,
    pub ttl: Option<Span>,
    pub blob: Option<Span>,
    /// `#[index(monotonic)]` (R-I3).
    pub monotonic: Option<Span>,
    /// `#[sharded(n)]` (R-S1).
    pub sharded: Option<Count>,
    /// `#[sharded_index(n)]` (R-S3).
    pub sharded_index: Option<Count>,
    /// `#[vector_index(n)]`: a vector index of `n` dimensions.
    pub vector_index: Option<Count>,
}

/// Reads the forwarded attributes of a field. Word attributes take no arguments; each
/// attribute may appear once.
pub(crate) fn field_flags(
    attrs: &[syn::Attribute],
    errors: &mut crate::errors::Errors,
) -> FieldFlags {
    let mut flags = FieldFlags::default();
    for attr in attrs {
        let path = attr.path();
        let name = path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        let span = path.span();
        let seen = match name.as_str() {
            "key" => word(attr, &name, &mut flags.key, errors),
            "parent" => word(attr, &name, &mut flags.parent, errors),
            "exclude_from_index" => word(attr, &name, &mut flags.exclude_from_index, errors),
            "ttl" => word(attr, &name, &mut flags.ttl, errors),
            "blob" => word(attr, &name, &mut flags.blob, errors),
            "sharded" => count(attr, &name, &mut flags.sharded, errors),
            "sharded_index" => count(attr, &name, &mut flags.sharded_index, errors),
            "vector_index" => count(attr, &name, &mut flags.vector_index, errors),
            "index" => {
                let given = flags.monotonic.replace(span).is_some();
                let monotonic = attr
                    .parse_args::<syn::Ident>()
                    .is_ok_and(|arg| arg == "monotonic");
                if !monotonic {
                    errors.push(
                        darling::Error::custom(
                            "write `#[index(monotonic)]` to index a value that grows with time \
                             despite the write hotspot [R-I3]",
                        )
                        .with_span(&attr.meta),
                    );
                }
                given
            }
            _ => continue,
        };
        if seen {
            errors.push(
                darling::Error::custom(format!("`#[{name}]` is given twice; remove one"))
                    .with_span(&attr.meta),
            );
        }
    }
    flags
}

/// A word attribute (`#[key]`); returns whether it was already given.
fn word(
    attr: &syn::Attribute,
    name: &str,
    slot: &mut Option<Span>,
    errors: &mut crate::errors::Errors,
) -> bool {
    if !matches!(attr.meta, syn::Meta::Path(_)) {
        errors.push(
            darling::Error::custom(format!("`#[{name}]` takes no arguments; write `#[{name}]`"))
                .with_span(&attr.meta),
        );
    }
    slot.replace(attr.path().span()).is_some()
}

/// A count attribute (`#[sharded(20)]`); returns whether it was already given.
fn count(
    attr: &syn::Attribute,
    name: &str,
    slot: &mut Option<Count>,
    errors: &mut crate::errors::Errors,
) -> bool {
    match attr_count(attr, name) {
        Ok(count) => slot.replace(count).is_some(),
        Err(error) => {
            errors.push(error);
            false
        }
    }
}

/// The integer of `#[name(n)]`.
pub(crate) fn attr_count(attr: &syn::Attribute, name: &str) -> darling::Result<Count> {
    let usage = || {
        darling::Error::custom(match name {
            "vector_index" => "write `#[vector_index(n)]` with the vectors' number of dimensions, \
                               e.g. `#[vector_index(768)]`"
                .to_owned(),
            _ => format!(
                "write `#[{name}(n)]` with the number of shards or copies, e.g. `#[{name}(20)]`"
            ),
        })
    };
    let lit: syn::LitInt = attr
        .parse_args()
        .map_err(|_| usage().with_span(&attr.meta))?;
    let value = lit
        .base10_parse::<u64>()
        .map_err(|_| usage().with_span(&lit.span()))?;
    Ok(Count {
        value,
        span: lit.span(),
    })
}

/// `#[replicated(n)]` or `#[replicated(n, unchecked)]` (R-S2).
pub(crate) struct Replicated {
    pub count: Count,
    /// `unchecked`: reads go to a random replica alone.
    pub unchecked: bool,
}

/// The `#[replicated(n)]` attribute of the struct, if any (R-S2).
pub(crate) fn replicated(
    attrs: &[syn::Attribute],
    errors: &mut crate::errors::Errors,
) -> Option<Replicated> {
    let mut found: Option<Replicated> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("replicated")) {
        let usage = || {
            darling::Error::custom(
                "write `#[replicated(n)]` with the number of copies, e.g. `#[replicated(5)]`, \
                 or `#[replicated(n, unchecked)]` to read the replicas alone",
            )
        };
        let parsed = attr.parse_args_with(|input: syn::parse::ParseStream<'_>| {
            let lit: syn::LitInt = input.parse()?;
            let flag = match input.is_empty() {
                true => None,
                false => {
                    input.parse::<syn::Token![,]>()?;
                    Some(input.parse::<syn::Ident>()?)
                }
            };
            Ok((lit, flag))
        });
        let (lit, flag) = match parsed {
            Ok(parsed) => parsed,
            Err(_) => {
                errors.push(usage().with_span(&attr.meta));
                continue;
            }
        };
        let Ok(value) = lit.base10_parse::<u64>() else {
            errors.push(usage().with_span(&lit.span()));
            continue;
        };
        if let Some(flag) = flag.as_ref().filter(|f| *f != "unchecked") {
            errors.push(
                darling::Error::custom(format!(
                    "unknown `#[replicated]` option `{flag}`: the one option is `unchecked` \
                     (reads go to a random replica alone)"
                ))
                .with_span(flag),
            );
            continue;
        }
        let replicated = Replicated {
            count: Count {
                value,
                span: lit.span(),
            },
            unchecked: flag.is_some(),
        };
        if found.replace(replicated).is_some() {
            errors.push(
                darling::Error::custom("`#[replicated]` is given twice; remove one")
                    .with_span(&attr.meta),
            );
        }
    }
    found
}

/// What can be read of an input darling refused: the struct and its fields (names from
/// their identifiers, the forwarded attributes as written, `#[property(...)]` left out). Only
/// used to emit the generated API's stub next to the real errors.
pub(crate) fn lenient(input: &syn::DeriveInput) -> EntityInput {
    let fields = match &input.data {
        syn::Data::Struct(data) => data
            .fields
            .iter()
            .map(|field| FieldInput {
                ident: field.ident.clone(),
                ty: field.ty.clone(),
                attrs: field.attrs.clone(),
                rename: None,
                default: None,
                alias: Vec::new(),
                write_alias: darling::util::Flag::default(),
                flatten: darling::util::Flag::default(),
                json: darling::util::Flag::default(),
            })
            .collect(),
        _ => Vec::new(),
    };
    EntityInput {
        ident: input.ident.clone(),
        vis: input.vis.clone(),
        generics: input.generics.clone(),
        data: darling::ast::Data::Struct(darling::ast::Fields::new(
            darling::ast::Style::Struct,
            fields,
        )),
        attrs: input.attrs.clone(),
    }
}
