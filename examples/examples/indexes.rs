//! Declared composite indexes (R-I2), rendered as the files that deploy them: `index.yaml`
//! for `gcloud datastore indexes create`, and `firestore.indexes.json` for the Firebase CLI,
//! whose field overrides also carry every exclusion (R-I1) and TTL policy.
//!
//! Run it with `cargo run -p datastore-entity-examples --example indexes -- [directory]`;
//! the files are written to `directory` (default: `target/indexes`).

use std::path::PathBuf;

use datastore_entity::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(
    index(author, -published),       // an author's posts, newest first
    index(tags, -published),         // a tag's posts, newest first
    ancestor_index(-published),      // an account's posts (an ancestor query), newest first
)]
pub struct Post {
    #[parent]
    pub account: Key<Account>,
    #[key]
    pub id: Option<KeyId>,
    pub author: String,
    pub tags: Vec<String>,
    #[index(monotonic)] // a blog's write rate keeps this index cool (R-I3)
    pub published: Timestamp,
    #[exclude_from_index]
    pub body: String,
}

#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Account {
    #[key]
    pub name: KeyName,
    #[exclude_from_index]
    pub bio: String,
}

#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Session {
    #[key]
    pub id: Option<KeyId>,
    pub account: Key<Account>,
    #[ttl] // the service deletes the session after this time
    pub expires: Timestamp,
}

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map_or_else(|| PathBuf::from("target/indexes"), PathBuf::from);
    std::fs::create_dir_all(&dir)?;
    let schemas = [Post::SCHEMA, Account::SCHEMA, Session::SCHEMA];

    let yaml = datastore_entity::index_yaml(&schemas);
    let yaml_path = dir.join("index.yaml");
    std::fs::write(&yaml_path, &yaml)?;
    let json = datastore_entity::firestore_indexes_json(&schemas);
    let json_path = dir.join("firestore.indexes.json");
    std::fs::write(&json_path, &json)?;

    println!("{}:\n{yaml}", yaml_path.display());
    println!("{}:\n{json}", json_path.display());
    println!("Deploy them with:");
    println!("  gcloud datastore indexes create {}", yaml_path.display());
    println!(
        "  firebase deploy --only firestore:indexes   (with firestore.indexes.json in firebase.json)"
    );
    Ok(())
}
