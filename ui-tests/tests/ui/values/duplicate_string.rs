// Two variants cannot be stored as the same string.
use datastore_entity::prelude::*;

#[derive(PropertyValue)]
#[property(rename_all = "lowercase")]
enum Status {
    Open,
    #[property(rename = "open")]
    Reopened,
}

fn main() {}
