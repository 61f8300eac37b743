// A filter on an enum property takes the enum, not its stored string.
use datastore_entity::prelude::*;

#[derive(PropertyValue, Clone, Copy)]
enum Status {
    Open,
    Closed,
}

#[derive(Entity)]
struct Task {
    #[key]
    id: Option<KeyId>,
    status: Status,
}

fn main() {
    let _ = Task::STATUS.eq(Status::Closed);
    let _ = Task::STATUS.eq("Open");
}
