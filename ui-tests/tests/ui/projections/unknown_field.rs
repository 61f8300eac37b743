// R-Q2: a projection lists fields of the struct; a misspelt one is an error on its name.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(projection(PostCard: title, autor))]
struct Post {
    #[key]
    id: Option<KeyId>,
    title: String,
    author: String,
}

fn main() {}
