// A filter's operand has the property's type.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    age: i64,
}

fn main() {
    let _filter = Account::AGE.eq("forty");
}
