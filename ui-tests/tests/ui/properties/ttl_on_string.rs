// `#[ttl]` holds the expiry time.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Session {
    #[key]
    name: KeyName,
    #[ttl]
    expires: String,
}

fn main() {}
