// R-Q2: each property is projected once.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(projection(PostCard: title, author, title))]
struct Post {
    #[key]
    id: Option<KeyId>,
    title: String,
    author: String,
}

fn main() {}
