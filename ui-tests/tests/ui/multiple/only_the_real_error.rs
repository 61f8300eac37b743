// A name mistake does not hide the generated API: code using the type reports only the
// mistake itself, not a cascade of "no function `key`" errors.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[property(rename = "e.mail")]
    email: String,
}

fn main() {
    let key = Account::key(datastore_entity::key_name!("ann"));
    let _filter = Account::EMAIL.eq("ann@example.com");
    let _ = key;
}
