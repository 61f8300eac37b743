use datastore_entity::prelude::*;

#[derive(Entity)]
struct Wrapper<T> {
    #[key]
    name: KeyName,
    value: T,
}

fn main() {}
