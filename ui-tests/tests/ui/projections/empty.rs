// R-Q2: a projection holds at least one property.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(projection(PostCard:))]
struct Post {
    #[key]
    id: Option<KeyId>,
    title: String,
}

fn main() {}
