// A missing `#[key]` beside `#[parent]` is reported once: the stub API keeps the code that
// uses the type compiling.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
}

#[derive(Entity)]
struct Comment {
    #[parent]
    account: Key<Account>,
    text: String,
}

async fn uses(db: &Db, account: &Key<Account>) -> Result<(), Error> {
    let key = Comment::key(account, datastore_entity::key_id!(7));
    let comment: Option<Comment> = db.get(&key).await?;
    db.put(&comment.unwrap()).await?;
    let _ = Comment::TEXT.eq("hello");
    Ok(())
}

fn main() {
    let _ = uses;
}
