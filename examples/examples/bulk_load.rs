//! Loading a new kind without a hotspot (R-S4): a `BulkWriter` writes 2,500 readings at the
//! pace of Google's "500/50/5" ramp (500 writes per second to a new kind, +50 % every 5
//! minutes), in commits of at most 500, in an order scattered over the key range, with an
//! `indicatif` progress bar fed by its progress callback. The `Db` watches its own writes:
//! the load triggers none of the scale findings a naive loop of `put`s would.
//!
//! Run it with `cargo run -p datastore-entity-examples --example bulk_load` (about 4 s: the
//! ramp is the point).

use datastore_entity::prelude::*;
use datastore_entity::{BulkWriter, RampUp};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Reading {
    #[key]
    pub id: KeyName,
    pub sensor: String,
    #[exclude_from_index]
    pub celsius: f64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = Db::in_memory();
    let readings: Vec<Reading> = (0..2_500)
        .map(|i| {
            Ok(Reading {
                // Natural ids in sequence would be R-K4; the writer scatters its order, and
                // scattered names keep later writes apart too.
                id: KeyName::scattered(format!("reading-{i:05}"))?,
                sensor: format!("sensor-{}", i % 40),
                celsius: 18.0 + f64::from(i % 70) / 10.0,
            })
        })
        .collect::<Result<_, Error>>()?;

    let bar = ProgressBar::new(readings.len() as u64);
    bar.set_style(ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}",
    )?);
    let progress = bar.clone();
    let mut writer = BulkWriter::new(&db)
        .ramp(RampUp::new())
        .on_progress(move |p| {
            progress.set_position(p.done as u64);
            progress.set_message(format!("ramp at {:.0} writes/s", p.rate));
        });
    let keys = writer.put_all(&readings).await?;
    bar.finish_with_message("done");

    let stored = db.query::<Reading>().count().await?;
    assert_eq!(stored, keys.len() as u64);
    println!(
        "Wrote {stored} readings in commits of at most 500, paced at 500 writes/s, in \
         scattered key order."
    );
    // Google's scale rules watched at run time (R-K4, R-E2, R-S4, R-S6) found nothing here.
    assert_eq!(db.diagnostics(), [], "{:?}", db.diagnostics());
    Ok(())
}
