// R-N5: kinds matching `__.*__` are reserved.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(kind = "__Stat_Kind__")]
struct Stats {
    #[key]
    name: KeyName,
}

fn main() {}
