//! A configuration read on every request (R-S2): `#[replicated(5, unchecked)]` writes it with
//! 5 read replicas in one commit, and each `get` reads one replica chosen at random, so the
//! reads spread over 5 keys instead of hammering one (every writer of the kind is this
//! program, which writes the replicas: `unchecked` trusts that). A reader loop runs while the
//! configuration changes, and never sees an older version after a newer one.
//!
//! Run it with `cargo run -p datastore-entity-examples --example hot_config`.

use std::time::Duration;

use datastore_entity::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
#[replicated(5, unchecked)]
pub struct SiteConfig {
    #[key]
    pub name: KeyName,
    pub banner: String,
    pub version: i64,
}

fn config(version: i64) -> Result<SiteConfig, Error> {
    Ok(SiteConfig {
        name: KeyName::new("site")?,
        banner: format!("Welcome! (banner v{version})"),
        version,
    })
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let db = Db::in_memory();
    let key = db.put(&config(1)?).await?;
    println!("Wrote the configuration and its 5 replicas in one commit.");

    let reader = {
        let (db, key) = (db.clone(), key.clone());
        tokio::spawn(async move {
            let (mut reads, mut last) = (0, 0);
            while last < 10 {
                let current = db.get(&key).await?.expect("the configuration exists");
                assert!(current.version >= last, "read an older version");
                last = current.version;
                reads += 1;
                tokio::task::yield_now().await;
            }
            Ok::<_, Error>(reads)
        })
    };
    for version in 2..=10 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        db.put(&config(version)?).await?;
        let read = db.get(&key).await?.expect("the configuration exists");
        assert_eq!(
            read.version, version,
            "a read after the put saw an older version"
        );
    }
    let reads = reader.await.expect("the reader did not panic")?;
    let last = db.get(&key).await?.expect("the configuration exists");
    println!(
        "A reader loop made {reads} reads while 9 updates landed, never going back in time; \
         it ended on \"{}\".",
        last.banner
    );
    // Google's scale rules watched at run time (R-K4, R-E2, R-S4, R-S6) found nothing here.
    assert_eq!(db.diagnostics(), [], "{:?}", db.diagnostics());
    Ok(())
}
