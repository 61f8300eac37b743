//! `impl Entity` (a struct with a `#[key]`) or `impl PropertyType` (an embedded entity), the
//! schema, and the conversion to and from the store's entity form.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::mode::{Mode, private};
use crate::ast::{Entity, Field, ident_text, key_target};
use crate::attr::DefaultAttr;

/// `impl Entity` for a struct with a `#[key]`.
pub(super) fn entity_impl(entity: &Entity, mode: Mode) -> TokenStream {
    let p = private(entity);
    let ident = &entity.ident;
    let kind = entity.kind.text();
    let schema = schema(entity);
    let parent_raw = match entity.parent() {
        Some(parent) => {
            let parent_ident = &parent.ident;
            quote!(#p::Option::Some(#p::Key::raw(&self.#parent_ident)))
        }
        None => quote!(#p::Option::None),
    };
    let entity_key = entity.key().map(|key| {
        let key_ident = &key.ident;
        let key_ty = &key.ty;
        quote! {
            (&#p::Probe::<#key_ty>::new()).entity_key::<Self>(#parent_raw, &self.#key_ident)
        }
    });
    let to_properties = to_properties(entity);
    let from_entity = entity.key().map(|key| {
        let key_ident = &key.ident;
        let key_ty = &key.ty;
        let parent_init = entity.parent().map(|parent| {
            let parent_ident = &parent.ident;
            let target = key_target(&parent.ty);
            quote! {
                #parent_ident: #p::parent_field::<#target>(__key)
                    .map_err(|__e| __e.into_entity_error(__key, "__key__"))?,
            }
        });
        // Read in name order, the stored form's (each property is then the first one left);
        // a mistake is reported for the first field in declaration order, as it reads.
        let mut reads: Vec<(String, syn::Ident, TokenStream)> = entity
            .properties()
            .enumerate()
            .map(|(i, field)| {
                let local = quote::format_ident!("__field{}", i);
                let read = read_property(entity, field);
                let name = field.name.text();
                let stmt = quote! {
                    let #local = #read.map_err(|__e| __e.into_entity_error(__key, #name));
                };
                (name, local, stmt)
            })
            .collect();
        let fields: Vec<TokenStream> = entity
            .properties()
            .zip(&reads)
            .map(|(field, (_, local, _))| {
                let field_ident = &field.ident;
                quote!(#field_ident: #local?,)
            })
            .collect();
        reads.sort_by(|a, b| a.0.cmp(&b.0));
        let reads = reads.into_iter().map(|(_, _, stmt)| stmt);
        let build = quote! {
            #p::Result::Ok(Self {
                #key_ident: (&#p::Probe::<#key_ty>::new()).key_field(__key)
                    .map_err(|__e| __e.into_entity_error(__key, "__key__"))?,
                #parent_init
                #(#fields)*
            })
        };
        let from_stored = reads_in_order(entity).map(|(in_order, slot)| {
            let body = quote! {
                #in_order
                #p::ReadInOrder::finish(__reader)?;
                #build
            };
            (body, slot)
        });
        // Every map is read by the one-pass read when there is one: the stored form, unread
        // (the embedded engine's answers), straight from its bytes; a map received from the
        // service, unread, placed by its names; any other through its own lookups, in the
        // fields' order. One read of the fields per type, not two: less code to compile.
        let count = entity.properties().count();
        let body = match from_stored.is_some() {
            true => quote! {
                if let #p::Option::Some(__bytes) = __properties.unread_stored() {
                    return <Self as #p::Entity>::from_stored(__key, __bytes);
                }
                if let #p::Option::Some(__read) = #p::foreign_in_order(
                    &mut __properties,
                    #count,
                    Self::__slot,
                    |__reader| Self::__from_in_order(__key, __reader),
                ) {
                    return __read;
                }
                Self::__from_in_order(__key, #p::map_in_order(&mut __properties))
            },
            false => quote!(#(#reads)* #build),
        };
        (body, from_stored)
    });
    let (from_entity, from_stored) = from_entity.unzip();
    // A stub, or an entity whose key is missing (a reported mistake), never converts.
    let mode = if entity.key().is_some() {
        mode
    } else {
        Mode::Stub
    };
    let entity_key = mode.body(&p, entity_key.unwrap_or_default());
    let properties_in = mode.body(&p, quote!(#p::Result::Ok(#to_properties)));
    let to_properties = mode.body(
        &p,
        quote!(<Self as #p::Entity>::properties_in(self, #p::Form::STORED)),
    );
    let from_entity = mode.body(&p, from_entity.unwrap_or_default());
    // The one-pass read, for the stored form and for a received map alike.
    let (from_stored, in_order) = from_stored
        .flatten()
        .map(|(body, slot)| {
            let body = mode.body(&p, body);
            let slot = mode.body(&p, slot);
            let from_stored = mode.body(
                &p,
                quote!(Self::__from_in_order(__key, #p::stored_in_order(__bytes))),
            );
            let from_stored = quote! {
                #[allow(unused_variables)]
                fn from_stored(
                    __key: &#p::RawKey,
                    __bytes: &[u8],
                ) -> #p::Result<Self, #p::Error> {
                    #from_stored
                }
            };
            let in_order = quote! {
                #[automatically_derived]
                impl #ident {
                    #[doc(hidden)]
                    #[allow(unused_variables, unused_mut)]
                    fn __from_in_order(
                        __key: &#p::RawKey,
                        mut __reader: #p::OnePass<'_>,
                    ) -> #p::Result<Self, #p::Error> {
                        #body
                    }

                    #[doc(hidden)]
                    #[allow(unused_variables)]
                    fn __slot(__name: &str) -> #p::Option<usize> {
                        #slot
                    }
                }
            };
            (from_stored, in_order)
        })
        .unzip();
    // What keys read from text must have above them: the `#[parent]` field's entity type
    // (its own parents checked in turn), any parent, or none.
    let parent_shape = match (mode, entity.parent()) {
        (Mode::Stub, _) => quote!(#p::ParentShape::Unknown),
        (Mode::Real, None) => quote!(#p::ParentShape::Root),
        (Mode::Real, Some(parent)) => match key_target(&parent.ty) {
            Some(target) => quote!(#p::ParentShape::Typed(#p::check_key_text::<#target>)),
            None => quote!(#p::ParentShape::Any),
        },
    };
    quote! {
        #[automatically_derived]
        impl #p::Entity for #ident {
            const KIND: &'static str = #kind;
            const PARENT: #p::ParentShape = #parent_shape;
            const SCHEMA: &'static #p::Schema = &#schema;

            fn entity_key(&self) -> #p::Result<#p::Key<Self>, #p::Error> {
                #entity_key
            }

            fn to_properties(&self) -> #p::Result<#p::PropertyMap, #p::Error> {
                #to_properties
            }

            #[allow(unused_variables)]
            fn properties_in(
                &self,
                __form: #p::Form<'_>,
            ) -> #p::Result<#p::PropertyMap, #p::Error> {
                #properties_in
            }

            #[allow(unused_variables)]
            fn from_entity(
                __key: &#p::RawKey,
                #[allow(unused_mut)] mut __properties: #p::PropertyMap,
            ) -> #p::Result<Self, #p::Error> {
                #from_entity
            }

            #from_stored
        }

        #in_order
    }
}

/// `impl PropertyType` for a struct without `#[key]`: an embedded entity value.
pub(super) fn embedded_impl(entity: &Entity, mode: Mode) -> TokenStream {
    let p = private(entity);
    let ident = &entity.ident;
    let schema = schema(entity);
    let to_properties = to_properties(entity);
    let to_value = mode.body(
        &p,
        quote!(#p::nested_entity(|| {
            let __form = #p::Form::STORED;
            #to_properties
        })),
    );
    let write_value = mode.body(
        &p,
        quote!(__w.entity(|__form| #p::nested(|| #to_properties))),
    );
    let fields = entity.properties().map(|field| {
        let field_ident = &field.ident;
        let read = read_property(entity, field);
        let step = format!(".{}", field.name.text());
        quote! {
            #field_ident: #read.map_err(|__e| __e.within(#step))?,
        }
    });
    let from_value = mode.body(
        &p,
        quote! {
            let __found = #p::Value::type_name(&__value);
            match #p::Value::into_entity(__value) {
                #p::Option::Some(__properties) => {
                    #[allow(unused_mut)]
                    let mut __properties = __properties;
                    #p::Result::Ok(Self {
                        #(#fields)*
                    })
                }
                #p::Option::None => #p::Result::Err(#p::DecodeError::new("embedded entity", __found)),
            }
        },
    );
    quote! {
        #[automatically_derived]
        impl #p::EmbeddedEntity for #ident {}

        #[automatically_derived]
        impl #p::Nested for #ident {
            type Path<I: #p::IndexMarker, J: #p::IndexMarker> = <I as #p::IndexMarker>::And<J>;
        }

        #[automatically_derived]
        impl #p::PropertyType for #ident {
            type Operand = Self;
            type Growth = #p::Steady;
            const EMBEDDED: #p::Option<&'static #p::Schema> = #p::Option::Some(&#schema);

            fn to_value(&self) -> #p::Value {
                #to_value
            }

            #[allow(unused_variables)]
            fn write_value(&self, __w: &mut #p::ValueWriter<'_>) {
                #write_value
            }

            #[allow(unused_variables)]
            fn from_value(__value: #p::Value) -> #p::Result<Self, #p::DecodeError> {
                #from_value
            }
        }

        #[automatically_derived]
        impl #p::Projectable for #ident {
            type Projected = Self;
            type Shape = #p::WholeEntity;
        }
    }
}

/// The `Schema` literal.
fn schema(entity: &Entity) -> TokenStream {
    let p = private(entity);
    let kind = entity.kind.text();
    let embedded = !entity.is_entity();
    let mut properties: Vec<TokenStream> = entity
        .stored()
        .map(|field| {
            let name = field.name.text();
            let rust_name = ident_text(&field.ident);
            let excluded = field.excluded();
            let ttl = field.flags.ttl.is_some();
            let ty = &field.ty;
            let nested = match field.flags.blob.or(field.json) {
                Some(_) => quote!(|| (#p::Option::None, false)),
                None => quote_spanned!(ty.span()=> || {
                    let __probe = &#p::Probe::<#ty>::new();
                    (__probe.embedded(), __probe.repeated())
                }),
            };
            let aliases = field.aliases.iter().map(|a| a.text());
            let flatten = field.flatten.is_some();
            quote!(#p::PropertySchema::new(
                #name, #rust_name, #excluded, #ttl, &[#(#aliases),*], #flatten, #nested
            ))
        })
        .collect();
    let mut counters = Vec::new();
    let mut sharded = Vec::new();
    let mut indexes = Vec::new();
    let mut vectors = Vec::new();
    let global = entity.global_cache.as_ref().is_none_or(|g| **g);
    let global_timeout = match entity.global_cache_timeout.as_ref().map(|t| **t) {
        Some(seconds) => quote!(#p::Option::Some(#seconds)),
        None => quote!(#p::Option::None),
    };
    let cache = quote!(#p::CachePolicy {
        global: #global,
        global_timeout: #global_timeout,
    });
    let mut replicas = quote!(#p::Option::None);
    if entity.is_entity() {
        for field in entity.sharded_indexes() {
            let (rust_name, name, companion) = (
                ident_text(&field.ident),
                field.name.text(),
                field.companion(),
            );
            let shards = field.flags.sharded_index.map_or(0, |c| count(c.value));
            properties.push(quote!(
                #p::PropertySchema::new(
                    #companion, #rust_name, false, false, &[], false, || (#p::Option::None, false)
                )
            ));
            sharded.push(quote! {
                #p::ShardedIndexSchema {
                    field: #rust_name, name: #name, companion: #companion, shards: #shards,
                }
            });
        }
        for field in entity.counters() {
            let (rust_name, name, kind) = (
                ident_text(&field.ident),
                field.name.text(),
                entity.shard_kind(field),
            );
            let shards = field.flags.sharded.map_or(0, |c| count(c.value));
            counters.push(quote! {
                #p::CounterSchema { field: #rust_name, name: #name, shards: #shards, kind: #kind }
            });
        }
        let columns = |index| {
            let items = entity
                .index_properties(index)
                .into_iter()
                .map(|(name, descending)| {
                    let direction = if descending {
                        quote!(#p::Direction::Descending)
                    } else {
                        quote!(#p::Direction::Ascending)
                    };
                    quote!(#p::IndexedProperty { name: #name, direction: #direction })
                });
            quote!(&[#(#items),*])
        };
        for index in &entity.indexes {
            let properties = columns(index);
            match entity.vector_tail(index) {
                Some(field) => {
                    let (name, dimension) =
                        (field.name.text(), field.vector_index().map_or(0, count));
                    vectors.push(quote! {
                        #p::VectorIndexSchema { property: #name, dimension: #dimension, filters: #properties }
                    });
                }
                None => {
                    let ancestor = index.ancestor;
                    indexes.push(
                        quote!(#p::IndexSchema { ancestor: #ancestor, properties: #properties }),
                    );
                }
            }
        }
        for field in entity.stored() {
            if let Some(dimension) = field.vector_index().map(count) {
                let name = field.name.text();
                vectors.push(quote! {
                    #p::VectorIndexSchema { property: #name, dimension: #dimension, filters: &[] }
                });
            }
        }
        if let Some(replicated) = &entity.replicated {
            let copies = count(replicated.count.value);
            let kind = entity.replica_kind();
            let unchecked = replicated.unchecked;
            replicas = quote!(#p::Option::Some(#p::ReplicaSchema {
                copies: #copies,
                kind: #kind,
                unchecked: #unchecked,
            }));
        }
    }
    quote! {
        #p::Schema {
            kind: #kind,
            embedded: #embedded,
            properties: &[#(#properties),*],
            indexes: &[#(#indexes),*],
            counters: &[#(#counters),*],
            sharded_indexes: &[#(#sharded),*],
            replicas: #replicas,
            vector_indexes: &[#(#vectors),*],
            cache: #cache,
        }
    }
}

/// A count from an attribute, as the `u32` the schema holds (range errors are `check`'s).
fn count(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// The block that builds the `PropertyMap` from `self` in `__form`: each field written
/// straight into the stored form or the wire form, in name order (the order the stored form
/// keeps), with no `Value` built.
fn to_properties(entity: &Entity) -> TokenStream {
    let p = private(entity);
    let in_order = entity.stored().all(|field| field.flatten.is_none());
    let mut puts: Vec<(String, TokenStream)> = entity
        .stored()
        .flat_map(|field| -> Vec<(String, TokenStream)> {
            let ident = &field.ident;
            let ty = &field.ty;
            let name = field.name.text();
            let excluded = field.excluded();
            // `write_alias`: under the former name too, in its place in name order.
            let names = std::iter::once(name.to_owned()).chain(
                field
                    .write_alias
                    .and(field.aliases.first())
                    .map(|alias| alias.text()),
            );
            if field.json.is_some() {
                // Serializing can fail: only an entity's `to_properties` can say so (`check`
                // refuses JSON in an embedded entity).
                let put = quote_spanned!(ty.span()=> (&#p::Probe::<#ty>::new()).put_json);
                let kind = quote!(<Self as #p::Entity>::KIND);
                if !entity.is_entity() {
                    return Vec::new();
                }
                return names
                    .map(|name| {
                        let put = quote! { #put(&mut __properties, #kind, #name, &self.#ident)?; };
                        (name, put)
                    })
                    .collect();
            }
            let put = match (field.flags.blob, field.flatten) {
                (_, Some(_)) => quote_spanned!(ty.span()=> (&#p::Probe::<#ty>::new()).put_flat),
                (Some(_), None) => quote_spanned!(ty.span()=> (&#p::Probe::<#ty>::new()).put_blob),
                // Names settled here, in order, with no flattened `name.sub` among them: the
                // map need not compare each with the last.
                (None, None) if in_order => {
                    quote_spanned!(ty.span()=> (&#p::Probe::<#ty>::new()).put_next)
                }
                (None, None) => quote_spanned!(ty.span()=> (&#p::Probe::<#ty>::new()).put),
            };
            names
                .map(|name| {
                    let put = quote! { #put(&mut __properties, #name, &self.#ident, #excluded); };
                    (name, put)
                })
                .collect()
        })
        .collect();
    if entity.is_entity() {
        puts.extend(entity.sharded_indexes().enumerate().map(|(i, field)| {
            let ident = &field.ident;
            let ty = &field.ty;
            let companion = field.companion();
            let put = quote! {
                if let #p::Option::Some(__sort) = (&#p::Probe::<#ty>::new()).sort_value(&self.#ident) {
                    let __key = <Self as #p::Entity>::entity_key(self).ok();
                    let __value = #p::companion_value(
                        &<Self as #p::Entity>::SCHEMA.sharded_indexes[#i],
                        __key.as_ref().map(#p::Key::raw),
                        __sort,
                    );
                    __properties.put_with(#companion, false, |__w| __w.value(&__value));
                }
            };
            (companion, put)
        }));
    }
    // Stored names compare as bytes, as `str`s do.
    puts.sort_by(|a, b| a.0.cmp(&b.0));
    let count = puts.len();
    let puts = puts.into_iter().map(|(_, put)| put);
    // A vector of another dimension than its index's is refused before anything is written.
    let dimensions = entity
        .stored()
        .filter(|_| entity.is_entity())
        .filter_map(|field| {
            let dimension = usize::try_from(field.vector_index()?).ok()?;
            let (ident, name) = (&field.ident, field.name.text());
            let kind = quote!(<Self as #p::Entity>::KIND);
            Some(quote! { #p::check_dimension(#kind, #name, &self.#ident, #dimension)?; })
        });
    quote! {{
        #(#dimensions)*
        #[allow(unused_mut)]
        let mut __properties = #p::PropertyMap::in_form(__form, #count, 16 + 48 * #count);
        #(#puts)*
        __properties
    }}
}

/// A field's `default` as the `Option<fn() -> T>` the readers take. Spanned at the attribute:
/// a type without `Default`, or an unknown function, is reported there.
fn missing(entity: &Entity, field: &Field) -> TokenStream {
    let p = private(entity);
    match &field.default {
        Some(DefaultAttr::Trait(span)) => {
            let default = quote_spanned!(*span=> ::core::default::Default::default);
            quote!(#p::Option::Some(#default))
        }
        Some(DefaultAttr::Function(path)) => {
            quote_spanned!(path.span()=> #p::Option::Some(#path))
        }
        None => quote!(#p::Option::None),
    }
}

/// The fields' reads from `__reader` (a `ReadInOrder`: the stored form or a received map), in
/// name order, each into its `__field{i}` local as `from_entity` reads it, and the match that
/// gives a property's place in that order from its `__name` (what a received map's reader
/// sorts its properties by); `None` when a field reads in a way one pass in name order cannot
/// (flattened, JSON, `#[blob]`, former names, counters), and the entity then reads through
/// its map.
fn reads_in_order(entity: &Entity) -> Option<(TokenStream, TokenStream)> {
    let p = private(entity);
    let plain = |field: &Field| {
        field.flatten.is_none()
            && field.json.is_none()
            && field.aliases.is_empty()
            && field.flags.blob.is_none()
            && field.flags.sharded.is_none()
    };
    if !entity.properties().all(plain) {
        return None;
    }
    let mut reads: Vec<(String, TokenStream)> = entity
        .properties()
        .enumerate()
        .map(|(i, field)| {
            let local = quote::format_ident!("__field{}", i);
            let ty = &field.ty;
            let name = field.name.text();
            let missing = missing(entity, field);
            // The error names the entity and the property inside `read`: no closure per
            // field for the compiler to check and build.
            let read = quote_spanned!(ty.span()=>
                (&#p::Probe::<#ty>::new()).read(&mut __reader, __key, #name, #missing)
            );
            let stmt = quote! {
                let #local = #read;
            };
            (name, stmt)
        })
        .collect();
    reads.sort_by(|a, b| a.0.cmp(&b.0));
    let slots = reads
        .iter()
        .enumerate()
        .map(|(i, (name, _))| quote!(#name => #p::Option::Some(#i),));
    let slot = quote! {
        match __name {
            #(#slots)*
            _ => #p::Option::None,
        }
    };
    let reads = reads.into_iter().map(|(_, stmt)| stmt);
    Some((quote!(#(#reads)*), slot))
}

/// The expression reading one property out of `__properties`: under its name, else under a
/// former name (`alias`), else the field's `default`.
fn read_property(entity: &Entity, field: &Field) -> TokenStream {
    let p = private(entity);
    let ty = &field.ty;
    let name = field.name.text();
    if field.flatten.is_some() {
        return quote_spanned!(ty.span()=>
            (&#p::Probe::<#ty>::new()).take_flat(&mut __properties, #name)
        );
    }
    // Former names after the name; with `write_alias`, the one former name first (binaries
    // that know only it may have written it since).
    let (name, aliases): (String, Vec<String>) = match (field.write_alias, &field.aliases[..]) {
        (Some(_), [alias]) => (alias.text(), vec![name.to_owned()]),
        _ => (
            name.to_owned(),
            field.aliases.iter().map(|a| a.text()).collect(),
        ),
    };
    let name = name.as_str();
    if field.json.is_some() {
        let take = quote_spanned!(ty.span()=> (&#p::Probe::<#ty>::new()).take_json_with);
        let missing = missing(entity, field);
        return quote! { #take(&mut __properties, #name, &[#(#aliases),*], #missing) };
    }
    if field.aliases.is_empty() && field.default.is_none() {
        return match field.flags.blob {
            Some(_) => quote_spanned!(ty.span()=>
                (&#p::Probe::<#ty>::new()).take_blob(&mut __properties, #name)
            ),
            None => quote_spanned!(ty.span()=>
                (&#p::Probe::<#ty>::new()).take(&mut __properties, #name)
            ),
        };
    }
    let missing = missing(entity, field);
    let take = match field.flags.blob {
        Some(_) => quote_spanned!(ty.span()=> (&#p::Probe::<#ty>::new()).take_blob_with),
        None => quote_spanned!(ty.span()=> (&#p::Probe::<#ty>::new()).take_with),
    };
    quote! { #take(&mut __properties, #name, &[#(#aliases),*], #missing) }
}
