// R-I1: an excluded property has no index; filtering on it does not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[exclude_from_index]
    bio: String,
}

fn main() {
    let _filter = Account::BIO.eq("hello");
}
