// SUM and AVG take a numeric property.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Task {
    #[key]
    id: KeyId,
    title: String,
}

async fn total(db: &Db) -> Result<Option<f64>, Error> {
    db.query::<Task>().avg(Task::TITLE).await
}

fn main() {
    let _ = total;
}
