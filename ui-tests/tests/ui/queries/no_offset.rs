// R-Q3: there is no offset anywhere; pages continue from a cursor.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
}

fn main() {
    let db = Db::in_memory();
    let _query = db.query::<Account>().offset(20);
}
