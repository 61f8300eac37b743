// R-S3: the companion holds the value as fixed-width sortable text: timestamps and integers.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: Option<KeyId>,
    #[sharded_index(8)]
    done: bool,
}

fn main() {}
