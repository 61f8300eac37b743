// Issue #29: a numeric transform on a property that is not `i64` or `f64` does not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    id: KeyName,
    email: String,
    balance: i64,
}

async fn bump(db: &Db, key: &Key<Account>) -> Result<(), Error> {
    db.transform(key, [Account::BALANCE.increment(1), Account::EMAIL.increment(1)]).await?;
    Ok(())
}

fn main() {
    let _ = bump;
}
