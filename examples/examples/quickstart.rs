//! A small blog on the embedded engine: accounts, posts under them, a filtered query paged
//! by cursor, a keys-only query, and a transaction.
//!
//! Run it with `cargo run -p datastore-entity-examples --example quickstart`.

use datastore_entity::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Account")]
pub struct Account {
    #[key]
    pub name: KeyName,
    pub email: String,
    #[exclude_from_index] // never queried: no index entries to pay for (R-I1)
    pub bio: String,
    pub credits: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
// The one composite index the query below needs: an ancestor, an equality filter and an
// order (R-I2). Without it, the embedded engine refuses the query, as the service would.
#[entity(ancestor_index(tags, -published))]
pub struct Post {
    #[parent] // posts live in their account's entity group (R-E1)
    pub account: Key<Account>,
    #[key] // None: the store allocates a scattered id on put (R-K1)
    pub id: Option<KeyId>,
    pub title: String,
    pub tags: Vec<String>,
    #[index(monotonic)] // indexed despite growing with time: a blog writes rarely (R-I3)
    pub published: Timestamp,
    #[exclude_from_index]
    pub body: String,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let db = Db::in_memory();
    println!("Opened an in-memory store: nothing to install or configure.");

    // Accounts: one commit for both (R-A1).
    let ann = Account {
        name: KeyName::new("ann")?,
        email: "ann@example.com".into(),
        bio: "Writes about databases.".into(),
        credits: 10,
    };
    let bob = Account {
        name: KeyName::new("bob")?,
        email: "bob@example.com".into(),
        bio: String::new(),
        credits: 0,
    };
    let keys = db.put_many(&[ann.clone(), bob]).await?;
    println!("Saved {} accounts in one commit.", keys.len());
    let ann_key = Account::key(KeyName::new("ann")?);

    // Posts under ann, with ids allocated by the store.
    let posts: Vec<Post> = (1..=7)
        .map(|i| Post {
            account: ann_key.clone(),
            id: None,
            title: format!("Post number {i}"),
            tags: if i % 2 == 0 {
                vec!["rust".into()]
            } else {
                vec!["rust".into(), "datastore".into()]
            },
            published: Timestamp::from_micros(1_700_000_000_000_000 + i * 86_400_000_000),
            body: "…".into(),
        })
        .collect();
    let post_keys = db.put_many(&posts).await?;
    println!(
        "Saved {} posts under ann; the store gave them ids such as {}.",
        post_keys.len(),
        post_keys[0].id().map_or(0, KeyId::get)
    );

    // Look an entity up by its key rather than querying for it (R-K5).
    let loaded = db.get(&ann_key).await?.expect("ann was saved");
    println!("Looked ann up by key: {} <{}>.", loaded.name, loaded.email);

    // A filtered, ordered query, three results at a time, following the cursor (R-Q3).
    println!("Ann's posts tagged \"datastore\", newest first, three per page:");
    let mut cursor: Option<Cursor> = None;
    let mut page_number = 1;
    loop {
        let page = db
            .query::<Post>()
            .ancestor(&ann_key)
            .filter(Post::TAGS.eq("datastore"))
            .order(Post::PUBLISHED.desc())
            .limit(3)
            .start_after(cursor)
            .fetch()
            .await?;
        let titles: Vec<&str> = page.items.iter().map(|p| p.title.as_str()).collect();
        println!("  page {page_number}: {}", titles.join(", "));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
        page_number += 1;
    }

    // Only the keys, when that is all you need (R-Q1).
    let keys = db
        .query::<Post>()
        .ancestor(&ann_key)
        .keys_only()
        .fetch()
        .await?;
    println!(
        "A keys-only query found {} posts without loading them.",
        keys.items.len()
    );

    // A transaction: move 3 credits from ann to bob, atomically, retried on contention (R-A2).
    let bob_key = Account::key(KeyName::new("bob")?);
    let (ann_credits, bob_credits) = db
        .transaction(async |tx| {
            let mut accounts = tx.get_many(&[ann_key.clone(), bob_key.clone()]).await?;
            let (Some(mut from), Some(mut to)) = (accounts.remove(0), accounts.remove(0)) else {
                return Ok((0, 0));
            };
            from.credits -= 3;
            to.credits += 3;
            tx.put(&from).await?;
            tx.put(&to).await?;
            Ok((from.credits, to.credits))
        })
        .await?;
    println!("Moved 3 credits in a transaction: ann now has {ann_credits}, bob has {bob_credits}.");

    // Delete a post and check it is gone.
    db.delete(&post_keys[0]).await?;
    println!(
        "Deleted \"{}\"; looking it up again finds {}.",
        posts[0].title,
        if db.get(&post_keys[0]).await?.is_none() {
            "nothing"
        } else {
            "it still"
        }
    );
    // Google's scale rules watched at run time (R-K4, R-E2, R-S4, R-S6) found nothing here.
    assert_eq!(db.diagnostics(), [], "{:?}", db.diagnostics());
    Ok(())
}
