// R-S3: the companion holds the value as sortable text: timestamps, integers, strings.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: Option<KeyId>,
    #[sharded_index(8)]
    done: bool,
}

fn main() {}
