// IN values have the property's type.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Task {
    #[key]
    id: KeyId,
    owner: i64,
}

fn main() {
    let _wrong = Task::OWNER.is_in(["ann", "bob"]);
}
