// IN takes at most 30 values: an array literal of 31 does not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Task {
    #[key]
    id: KeyId,
    owner: i64,
}

fn main() {
    let _ok = Task::OWNER.is_in([1; 30]);
    let _too_many = Task::OWNER.is_in([1; 31]);
}
