// `rename_all` takes serde's case names.
use datastore_entity::prelude::*;

#[derive(PropertyValue)]
#[property(rename_all = "kebab")]
enum Status {
    Open,
}

fn main() {}
