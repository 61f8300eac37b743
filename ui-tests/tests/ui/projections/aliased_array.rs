// A projection row holds one element of an array: behind a type alias the derive cannot see
// the array, and says so on the field's name in the list.
use datastore_entity::prelude::*;

type Tags = Vec<String>;

#[derive(Entity)]
#[entity(projection(Card: tags))]
struct Post {
    #[key]
    id: KeyId,
    tags: Tags,
}

fn main() {}
