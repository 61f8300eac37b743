// R-S2: an entity has 2 to 100 read replicas, all written in the entity's commit.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[replicated(101)]
struct Config {
    #[key]
    name: KeyName,
    banner: String,
}

fn main() {}
