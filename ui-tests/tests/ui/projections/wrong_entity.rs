// A projection belongs to its entity: `project` on another kind does not compile.
use datastore_entity::prelude::*;

#[derive(Entity)]
#[entity(projection(PostCard: title))]
struct Post {
    #[key]
    id: Option<KeyId>,
    title: String,
}

#[derive(Entity)]
struct Page {
    #[key]
    id: Option<KeyId>,
    title: String,
}

fn main() {
    let db = Db::in_memory();
    let _ = db.query::<Page>().project::<PostCard>();
}
