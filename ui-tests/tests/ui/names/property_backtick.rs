// R-N4: Firestore field names avoid backticks.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[property(rename = "`quoted`")]
    quoted: String,
}

fn main() {}
