// Issue #31: a global cache timeout is a number of seconds; zero keeps nothing.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(global_cache_timeout = 0)]
struct Session {
    #[key]
    id: KeyName,
    user: String,
}

fn main() {}
