// R-I4: `#[ttl]` implies exclusion, so a TTL property cannot be filtered on.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Session {
    #[key]
    name: KeyName,
    #[ttl]
    expires: Option<Timestamp>,
}

fn main() {
    let _filter = Session::EXPIRES.lt(Timestamp::now());
}
