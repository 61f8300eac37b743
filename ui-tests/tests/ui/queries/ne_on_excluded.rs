// R-I1: not-equal, IN and NOT_IN filters on an excluded property do not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Task {
    #[key]
    id: KeyId,
    #[exclude_from_index]
    notes: String,
}

fn main() {
    let _filter = Task::NOTES.ne("x");
}
