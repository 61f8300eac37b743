// Issue #31: a timeout says how long a cached kind stays cached; `global_cache = false` caches
// nothing.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(global_cache = false, global_cache_timeout = 60)]
struct Session {
    #[key]
    id: KeyName,
    user: String,
}

fn main() {}
