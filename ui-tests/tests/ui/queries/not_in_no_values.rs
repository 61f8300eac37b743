// NOT IN needs at least one value: an empty array literal does not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Task {
    #[key]
    id: KeyId,
    owner: i64,
}

fn main() {
    let none: [i64; 0] = [];
    let _nothing = Task::OWNER.not_in(none);
}
