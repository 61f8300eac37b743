//! R-I3: the four ways to keep a timestamp, each of which compiles.
#![deny(warnings)]

use datastore_entity::prelude::*;

#[derive(Entity)]
struct Session {
    #[key]
    id: Option<KeyId>,
    /// Never queried: excluded.
    #[exclude_from_index]
    created: Timestamp,
    /// An expiry time: the TTL policy deletes the entity.
    #[ttl]
    expires: Option<Timestamp>,
    /// Queried in order: through 16 shard prefixes.
    #[sharded_index(16)]
    last_seen: Timestamp,
    /// Queried, at a low write rate: the hotspot is accepted.
    #[index(monotonic)]
    renewed: Vec<Timestamp>,
}

fn main() {
    let s = Session {
        id: None,
        created: Timestamp::now(),
        expires: None,
        last_seen: Timestamp::now(),
        renewed: Vec::new(),
    };
    let properties = s.to_properties().unwrap();
    assert!(properties["created"].excluded && properties["expires"].excluded);
    assert!(properties["last_seen"].excluded && !properties["last_seen_sharded"].excluded);
    assert!(!properties["renewed"].excluded);
    let _ = Session::RENEWED.gt(Timestamp::from_micros(0));
    let _ = (s.id, s.created, s.expires, s.last_seen, s.renewed);
}
