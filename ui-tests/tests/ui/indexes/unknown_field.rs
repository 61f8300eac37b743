// R-I2: an index names fields of the struct.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(index(author, -publshed))]
struct Post {
    #[key]
    id: Option<KeyId>,
    author: String,
    #[index(monotonic)]
    published: Timestamp,
}

fn main() {}
