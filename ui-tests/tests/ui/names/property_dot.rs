// R-N3: a property name must not contain `.` (it collides with embedded paths).
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    #[property(rename = "user.name")]
    user_name: String,
}

fn main() {}
