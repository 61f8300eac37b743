// R-I3 applies to chrono's date-times (feature `chrono`) exactly as to `Timestamp`: an
// indexed one must be acknowledged.
use chrono::{DateTime, Utc};
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Event {
    #[key]
    id: KeyId,
    at: DateTime<Utc>,
}

fn main() {
    let _ = Event::AT.asc();
}
