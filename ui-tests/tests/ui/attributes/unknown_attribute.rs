// Unknown `#[entity(...)]` keys are errors, with a suggestion.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(knd = "Account")]
struct Account {
    #[key]
    name: KeyName,
}

fn main() {}
