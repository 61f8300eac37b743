// NOT_IN takes at most 10 values: an array literal of 11 does not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Task {
    #[key]
    id: KeyId,
    state: String,
}

fn main() {
    let _ok = Task::STATE.not_in(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]);
    let _too_many = Task::STATE.not_in(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]);
}
