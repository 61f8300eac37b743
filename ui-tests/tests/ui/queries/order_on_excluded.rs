// R-I1: ordering on an excluded property does not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[exclude_from_index]
    bio: String,
}

fn main() {
    let _order = Account::BIO.desc();
}
