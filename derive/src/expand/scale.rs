//! The helpers of the scale patterns: `increment_<field>` / `<field>_total` for `#[sharded]`
//! counters (R-S1) and `query_by_<field>` for `#[sharded_index]` fields (R-S3).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::mode::private;
use crate::ast::{Entity, ident_text};

pub(super) fn helpers(entity: &Entity) -> TokenStream {
    let p = private(entity);
    let vis = &entity.vis;
    let ident = &entity.ident;
    let counters = entity.counters().enumerate().map(|(i, field)| {
        let name = ident_text(&field.ident);
        let increment = format_ident!("increment_{}", name, span = field.ident.span());
        let total = format_ident!("{}_total", name, span = field.ident.span());
        let shards = field.flags.sharded.map_or(0, |c| c.value);
        let increment_doc = format!(
            "Adds `delta` to the sharded counter `{name}` of the entity `key`: one of its {shards} \
             shards, chosen at random, in a transaction; contention is retried, each attempt on a \
             fresh shard (R-S1)."
        );
        let total_doc = format!(
            "The total of the sharded counter `{name}` of the entity `key`: all {shards} shards, \
             read in one lookup (R-S1). `db.get` fills `{ident}::{name}` with it too."
        );
        quote! {
            #[doc = #increment_doc]
            #vis async fn #increment(
                db: &#p::Db,
                key: &#p::Key<Self>,
                delta: i64,
            ) -> #p::Result<(), #p::Error> {
                #p::increment(db, #p::Key::raw(key), &<Self as #p::Entity>::SCHEMA.counters[#i], delta).await
            }

            #[doc = #total_doc]
            #vis async fn #total(db: &#p::Db, key: &#p::Key<Self>) -> #p::Result<i64, #p::Error> {
                #p::total(db, #p::Key::raw(key), &<Self as #p::Entity>::SCHEMA.counters[#i]).await
            }
        }
    });
    let queries = entity.sharded_indexes().enumerate().map(|(i, field)| {
        let name = ident_text(&field.ident);
        let query = format_ident!("query_by_{}", name, span = field.ident.span());
        let ty = &field.ty;
        let shards = field.flags.sharded_index.map_or(0, |c| c.value);
        let doc = format!(
            "A query of `{ident}` ordered by `{name}` through its sharded index: {shards} shard \
             queries run concurrently and merged in order, with one cursor (R-S3). Add \
             `.desc()` for largest (newest) first."
        );
        quote! {
            #[doc = #doc]
            #vis fn #query(db: &#p::Db) -> #p::ShardedQuery<Self, #ty> {
                #p::ShardedQuery::new(
                    db.query::<Self>(),
                    &<Self as #p::Entity>::SCHEMA.sharded_indexes[#i],
                )
            }
        }
    });
    quote! {
        #(#counters)*
        #(#queries)*
    }
}
