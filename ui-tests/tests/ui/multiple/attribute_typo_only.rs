// An attribute typo is reported once: the generated API still exists (as a stub), so code
// using the type shows only the real error.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(projection(PostCard: title))]
struct Post {
    #[parent]
    account: Key<Account>,
    #[key]
    id: Option<KeyId>,
    #[property(renam = "heading")]
    title: String,
    #[sharded(4)]
    likes: i64,
}

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
}

async fn uses(db: &Db, account: &Key<Account>) -> Result<(), Error> {
    let key = Post::key(account, datastore_entity::key_id!(1));
    let _ = Post::incomplete_key(account);
    let post: Option<Post> = db.get(&key).await?;
    let _ = post.map(|p| p.title);
    let _ = db.query::<Post>().filter(Post::TITLE.eq("x")).project::<PostCard>();
    Post::increment_likes(db, &key, 1).await?;
    let _: i64 = Post::likes_total(db, &key).await?;
    Ok(())
}

fn main() {
    let _ = uses;
}
