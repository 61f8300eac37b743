// Two fields stored under one property name would overwrite each other.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
    email: String,
    #[property(rename = "email")]
    work_email: String,
}

fn main() {}
