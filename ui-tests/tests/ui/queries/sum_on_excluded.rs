// R-I1: an aggregation over an excluded property does not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Task {
    #[key]
    id: KeyId,
    #[exclude_from_index]
    cost: i64,
}

async fn total(db: &Db) -> Result<i64, Error> {
    db.query::<Task>().sum(Task::COST).await
}

fn main() {
    let _ = total;
}
