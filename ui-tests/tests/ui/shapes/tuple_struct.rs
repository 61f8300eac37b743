use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account(KeyName, String);

fn main() {}
