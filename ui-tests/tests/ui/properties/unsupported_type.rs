// Only property types the store knows can be fields.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Job {
    #[key]
    name: KeyName,
    timeout: std::time::Duration,
}

fn main() {}
