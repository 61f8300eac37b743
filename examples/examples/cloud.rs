//! The quickstart's blog on Google Cloud: Firestore in Datastore mode in a real project, or
//! Google's emulator, chosen by the environment.
//!
//! - Emulator: start one and point `DATASTORE_EMULATOR_HOST` at it (plain HTTP/2, no
//!   credentials):
//!   ```sh
//!   $(dpkg -L google-cloud-cli-firestore-emulator | grep 'cloud_firestore_emulator$') \
//!       --host=127.0.0.1 --port=8081 --database-mode=datastore-mode &
//!   DATASTORE_EMULATOR_HOST=127.0.0.1:8081 cargo run -p datastore-entity-examples --example cloud
//!   ```
//! - Google Cloud: `gcloud auth application-default login`, then
//!   `GOOGLE_CLOUD_PROJECT=my-project cargo run -p datastore-entity-examples --example cloud`
//!   (optionally `DATASTORE_DATABASE=my-db` for a named database).
//!
//! Everything is written in its own namespace, `datastore-entity-example`, and deleted at the end.

use datastore_entity::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Account")]
pub struct Account {
    #[key]
    pub name: KeyName,
    pub email: String,
    #[exclude_from_index]
    pub bio: String,
    pub credits: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(
    projection(PostTitle: title),
    // What the queries below need on the service: deploy them with `index.yaml` (R-I2).
    ancestor_index(-published),
    ancestor_index(title)
)]
pub struct Post {
    #[parent]
    pub account: Key<Account>,
    #[key]
    pub id: Option<KeyId>,
    pub title: String,
    pub tags: Vec<String>,
    #[index(monotonic)]
    pub published: Timestamp,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let emulator = std::env::var("DATASTORE_EMULATOR_HOST").ok();
    let project = std::env::var("GOOGLE_CLOUD_PROJECT").ok();
    let (project, target) = match (&emulator, project) {
        (Some(host), project) => (
            project.unwrap_or_else(|| "datastore-entity-example".into()),
            format!("the emulator at {host}"),
        ),
        (None, Some(project)) => (project.clone(), format!("Google Cloud project {project}")),
        (None, None) => {
            eprintln!(
                "Set DATASTORE_EMULATOR_HOST to use an emulator, or GOOGLE_CLOUD_PROJECT (with \
                 Application Default Credentials) to use Google Cloud; see the README's \
                 \"Running against Google Cloud\"."
            );
            std::process::exit(2);
        }
    };
    let database = std::env::var("DATASTORE_DATABASE").unwrap_or_default();
    let db = Db::cloud_builder(&project)
        .database(&database)
        .build()
        .await?
        .namespace("datastore-entity-example")?;
    println!("Connected to {target}.");

    let ann = Account {
        name: KeyName::new("ann")?,
        email: "ann@example.com".into(),
        bio: "Writes about Rust.".into(),
        credits: 10,
    };
    let ann_key = db.put(&ann).await?;
    let posts: Vec<Post> = (1..=5)
        .map(|i| Post {
            account: ann_key.clone(),
            id: None,
            title: format!("Post number {i}"),
            tags: vec!["rust".into()],
            published: Timestamp::from_micros(1_700_000_000_000_000 + i * 86_400_000_000),
        })
        .collect();
    let post_keys = db.put_many(&posts).await?;
    println!(
        "Saved ann and {} posts (ids allocated by the service, e.g. {}).",
        post_keys.len(),
        post_keys[0].id().map_or(0, KeyId::get)
    );

    let newest = db
        .query::<Post>()
        .ancestor(&ann_key)
        .order(Post::PUBLISHED.desc())
        .limit(2)
        .fetch()
        .await?;
    let titles: Vec<&str> = newest.items.iter().map(|p| p.title.as_str()).collect();
    println!("Her two newest posts: {}.", titles.join(", "));
    let cards = db
        .query::<Post>()
        .ancestor(&ann_key)
        .project::<PostTitle>()
        .fetch()
        .await?;
    println!(
        "A projection read {} titles from the index.",
        cards.items.len()
    );

    let credits = db
        .transaction(async |tx| {
            let mut account = tx.get(&ann_key).await?.expect("saved above");
            account.credits += 5;
            tx.put(&account).await?;
            Ok(account.credits)
        })
        .await?;
    println!("A transaction raised her credits to {credits}.");
    assert_eq!(credits, 15);

    db.delete_many(&post_keys).await?;
    db.delete(&ann_key).await?;
    println!("Deleted everything again.");
    // Google's scale rules watched at run time (R-K4, R-E2, R-S4, R-S6) found nothing here.
    assert_eq!(db.diagnostics(), [], "{:?}", db.diagnostics());
    Ok(())
}
