// R-I1, R-P2: a property inside an excluded embedded entity is excluded too.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Address {
    city: String,
}

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[exclude_from_index]
    home: Option<Address>,
}

fn main() {
    let _filter = Account::HOME.dot(Address::CITY).eq("Paris");
}
