// Issue #29: an array transform on a property that is not a `Vec` of the given elements does
// not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Post {
    #[key]
    id: KeyName,
    title: String,
    tags: Vec<String>,
}

async fn tag(db: &Db, key: &Key<Post>) -> Result<(), Error> {
    db.transform(key, [Post::TAGS.append_missing(vec!["a".to_owned()]), Post::TITLE.append_missing(vec!["b".to_owned()])]).await?;
    Ok(())
}

fn main() {
    let _ = tag;
}
