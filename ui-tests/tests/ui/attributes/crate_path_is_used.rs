// `#[entity(crate = path)]` is where the generated code looks for the runtime: a path that
// does not lead there fails (so the pass case `pass/crate_path.rs` proves the path is used).
use datastore_entity::prelude::*;

mod nowhere {}

#[derive(Entity)]
#[entity(crate = crate::nowhere)]
struct Account {
    #[key]
    name: KeyName,
}

fn main() {}
