// R-Q2, R-I1: a projection reads the index, so an excluded property cannot be projected.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(projection(PostCard: title, body))]
struct Post {
    #[key]
    id: Option<KeyId>,
    title: String,
    #[exclude_from_index]
    body: String,
}

fn main() {}
