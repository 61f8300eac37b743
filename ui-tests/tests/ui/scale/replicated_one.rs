// R-S2: an entity has 2 to 100 read replicas; the error points at the count.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[replicated(1)]
struct Config {
    #[key]
    name: KeyName,
    banner: String,
}

fn main() {}
