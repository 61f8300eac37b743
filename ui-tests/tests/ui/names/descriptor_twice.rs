// Two fields whose descriptors would have the same name.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[allow(non_snake_case)]
struct Page {
    #[key]
    id: Option<KeyId>,
    page_title: String,
    pageTitle: String,
}

fn main() {}
