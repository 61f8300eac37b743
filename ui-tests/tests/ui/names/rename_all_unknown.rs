// `rename_all` takes one of the known conventions.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(rename_all = "camelcase")]
struct Account {
    #[key]
    name: KeyName,
    display_name: String,
}

fn main() {}
