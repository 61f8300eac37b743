// Every mistake of one struct is reported in one build.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(kind = "billing/Account")]
struct Account {
    #[key]
    name: KeyName,
    #[property(rename = "user.name")]
    user_name: String,
    #[property(rename = "__secret__")]
    secret: String,
    #[parent]
    owner: String,
}

fn main() {}
