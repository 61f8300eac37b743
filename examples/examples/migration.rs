//! Moving profiles to a new kind (R-S5), as Google's "Ramping up traffic" page describes:
//! a deterministic `rollout` lets a growing share of users write the new kind, reads go to
//! both kinds at once while the data moves (`read_new_then_old`), and a `CopyJob` copies
//! the rest in an order spread over the key range, paced by the 500/50/5 ramp, deleting each
//! old profile as it copies it — never overwriting a profile the application already moved.
//!
//! Run it with `cargo run -p datastore-entity-examples --example migration`.

use datastore_entity::migrate::{self, CopyJob};
use datastore_entity::prelude::*;
use datastore_entity::{BulkWriter, RampUp};

/// The old layout: one `name`.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Profile")]
pub struct Profile {
    #[key]
    pub user: KeyName,
    pub name: String,
}

/// The new layout, in a new kind.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "ProfileV2")]
pub struct ProfileV2 {
    #[key]
    pub user: KeyName,
    pub first: String,
    pub last: String,
}

fn upgrade(old: Profile) -> ProfileV2 {
    let (first, last) = old.name.split_once(' ').unwrap_or((&old.name, ""));
    ProfileV2 {
        first: first.to_owned(),
        last: last.to_owned(),
        user: old.user,
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let db = Db::in_memory();
    let users: Vec<String> = (0..600).map(|i| format!("user-{i}")).collect();
    let profiles: Vec<Profile> = users
        .iter()
        .map(|u| {
            Ok(Profile {
                user: KeyName::scattered(u)?,
                name: format!("Ann {u}"),
            })
        })
        .collect::<Result<_, Error>>()?;
    BulkWriter::new(&db).put_all(&profiles).await?;

    // Step 1: 10 % of users (chosen by a stable hash of their id) save to the new kind.
    let moved: Vec<&String> = users.iter().filter(|u| migrate::rollout(u, 10)).collect();
    for user in &moved {
        let name = KeyName::scattered(user)?;
        let found = migrate::read_new_then_old(
            &db,
            &ProfileV2::key(name.clone()),
            &Profile::key(name.clone()),
        )
        .await?
        .expect("every user has a profile");
        let mut profile = found.into_new(upgrade);
        profile.last = format!("{} (edited)", profile.last);
        db.put(&profile).await?;
    }
    println!("{} users of 600 now save to the new kind.", moved.len());

    // Step 2: copy the rest, spread over the key range and ramped, deleting as it goes.
    let report = CopyJob::new(&db, |old: Profile| Ok(Some(upgrade(old))))
        .delete_source(true)
        .ramp(RampUp::new())
        .on_progress(|p| {
            let (done, stripes) = p.state.stripes_done();
            if done == stripes {
                println!(
                    "copy: {:?} after {:.1} s",
                    p.state.report,
                    p.elapsed.as_secs_f64()
                );
            }
        })
        .run()
        .await?;
    assert_eq!(report.copied + report.present, 600);
    assert_eq!(
        report.present,
        moved.len() as u64,
        "moved profiles were left as they were"
    );

    // Step 3: the new kind only.
    assert_eq!(db.query::<Profile>().count().await?, 0);
    assert_eq!(db.query::<ProfileV2>().count().await?, 600);
    let first = KeyName::scattered(moved[0])?;
    let kept = db.get(&ProfileV2::key(first)).await?.expect("moved");
    assert!(kept.last.ends_with("(edited)"));
    println!(
        "Copied {} profiles, left {} already moved; the old kind is empty.",
        report.copied, report.present
    );
    // Google's scale rules watched at run time (R-K4, R-E2, R-S4, R-S6) found nothing here.
    assert_eq!(db.diagnostics(), [], "{:?}", db.diagnostics());
    Ok(())
}
