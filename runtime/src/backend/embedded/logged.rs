//! A file's commits, logged before they reach its tables. Each commit is one record appended
//! to the file's `log` table, in one durable redb transaction as before — but a sequential
//! append of the commit's bytes, where writing it to the tables would copy every B-tree page
//! it touches (a batch of 500 entities with two indexes of random order touched about a
//! thousand 4 KiB pages: 4 MiB written and synced for 0.4 MiB of data). The commit is also
//! held in memory, where reads find it before the tables.
//!
//! Once the records add up to [`CHECKPOINT_BYTES`], they are applied to the tables and removed
//! from the log in one transaction (a checkpoint): each page is then written once for many
//! commits. A handle that is dropped checkpoints first; records left by a process that
//! stopped are applied when the file is next opened. A record that fails its checksum is an
//! error naming the file, never skipped.
//!
//! A record: its writes in order, each a tag (1: put, 0: delete), then the table, the key and
//! (for a put) the value, each as a length-prefixed byte string (`model/stored.rs`'s
//! `Writer::bytes`).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use super::ranges::overlay;
use super::store::{Batch, Key, Op, Range, Redb, Store, is_empty};
use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::LOG;
use datastore_entity_core::model::codec::{Malformed, Reader};
use datastore_entity_core::model::stored::Writer;

/// How many bytes of logged commits are held before a checkpoint applies them to the tables.
pub(crate) const CHECKPOINT_BYTES: usize = 16 << 20;

/// A redb file whose commits are logged (see the module docs).
pub(crate) struct Logged {
    redb: Redb,
    /// Each table's writes since the last checkpoint: a value, or `None` where one was deleted.
    pending: HashMap<String, BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    /// The sequence numbers of the records since the last checkpoint: `first..next`.
    first: u64,
    next: u64,
    /// The bytes of those records.
    bytes: usize,
    checkpoint_bytes: usize,
    /// Why the logged writes are not in memory: a checkpoint failed, and reading them back
    /// from the log failed too. The next commit tries to read them back first; until one can,
    /// every call fails: a read without them would miss acknowledged commits.
    unread: Option<String>,
}

impl Logged {
    /// Logs the commits of `redb` from now on, after applying the records a process that
    /// stopped left in its log; checkpoints once `checkpoint_bytes` are logged.
    pub(crate) fn with_checkpoint(
        mut redb: Redb,
        checkpoint_bytes: usize,
    ) -> Result<Logged, Error> {
        let (records, ops) = logged(&redb, 0)?;
        let mut left = Batch { ops };
        if !records.is_empty() {
            tracing::info!(
                file = %redb.path(),
                commits = records.len(),
                "applying the commits logged before the file was last closed"
            );
            for record in records {
                left.delete(LOG, record);
            }
            redb.apply(left)?;
        }
        Ok(Logged {
            redb,
            pending: HashMap::new(),
            first: 0,
            next: 0,
            bytes: 0,
            checkpoint_bytes,
            unread: None,
        })
    }

    /// Applies the logged commits to the tables and removes them from the log, in one
    /// transaction. The writes move into it (a copy would double what a checkpoint holds in
    /// memory); if it fails, they are read back from the log, where they still are.
    fn checkpoint(&mut self) -> Result<(), Error> {
        if self.first == self.next {
            return Ok(());
        }
        let mut tables: Vec<_> = std::mem::take(&mut self.pending).into_iter().collect();
        tables.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut batch = Batch::default();
        for (table, entries) in tables {
            let table: Cow<'static, str> = Cow::Owned(table);
            for (key, value) in entries {
                match value {
                    Some(value) => batch.put(table.clone(), key, value),
                    None => batch.delete(table.clone(), key),
                }
            }
        }
        for record in self.first..self.next {
            batch.delete(LOG, record.to_be_bytes().to_vec());
        }
        match self.redb.apply(batch) {
            Ok(()) => {
                self.first = self.next;
                self.bytes = 0;
                Ok(())
            }
            Err(e) => {
                self.read_back();
                Err(e)
            }
        }
    }

    /// Reads the writes logged since the last checkpoint back into memory, from the log.
    fn read_back(&mut self) {
        self.unread = match logged(&self.redb, self.first) {
            Ok((_, ops)) => {
                let mut pending = HashMap::new();
                hold(&mut pending, ops);
                self.pending = pending;
                None
            }
            Err(e) => Some(e.to_string()),
        };
    }

    /// Fails while the logged writes are not in memory (see [`Logged::unread`]).
    fn readable(&self) -> Result<(), Error> {
        match &self.unread {
            None => Ok(()),
            Some(why) => Err(Error::storage(format!(
                "{}: the commits logged since the last checkpoint cannot be read back \
                     ({why}); open the file again",
                self.redb.path()
            ))),
        }
    }
}

/// The log's records from number `first` on: their keys, and their writes in order. A
/// record that is malformed (or fails its checksum) is an error naming the file.
fn logged(redb: &Redb, first: u64) -> Result<(Vec<Vec<u8>>, Vec<Op>), Error> {
    let (mut records, mut ops) = (Vec::new(), Vec::new());
    let mut malformed = false;
    let first = first.to_be_bytes();
    redb.scan(
        LOG,
        (Bound::Included(&first), Bound::Unbounded),
        false,
        &mut |k, v| {
            records.push(k.to_vec());
            match decode(v) {
                Ok(record) => ops.extend(record),
                Err(Malformed) => malformed = true,
            }
            !malformed
        },
    )?;
    match malformed {
        true => Err(Error::storage(format!(
            "{} is damaged: a logged commit is malformed; restore the file from a backup",
            redb.path()
        ))),
        false => Ok((records, ops)),
    }
}

/// Takes in the writes `ops`, in order: each key's last write is the one held.
fn hold(pending: &mut HashMap<String, BTreeMap<Vec<u8>, Option<Vec<u8>>>>, ops: Vec<Op>) {
    for op in ops {
        let (table, key, value) = match op {
            Op::Put(table, key, value) => (table, key, Some(value)),
            Op::Delete(table, key) => (table, key, None),
        };
        let entries = match pending.get_mut(table.as_ref()) {
            Some(entries) => entries,
            None => pending.entry(table.into_owned()).or_default(),
        };
        entries.insert(key.into_vec(), value);
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        // Nothing is lost if this fails: the records stay in the log for the next open.
        if let Err(e) = self.checkpoint() {
            tracing::warn!(file = %self.redb.path(), error = %e, "the last checkpoint failed; the next open applies the log");
        }
    }
}

impl Store for Logged {
    fn get(&self, table: &str, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        self.readable()?;
        match self.pending.get(table).and_then(|t| t.get(key)) {
            Some(Some(value)) => {
                visit(value);
                Ok(true)
            }
            Some(None) => Ok(false),
            None => self.redb.get(table, key, visit),
        }
    }

    /// The tables' entries and the logged ones, merged in order: a logged write replaces the
    /// table's entry under its key (a deletion hides it).
    fn scan(
        &self,
        table: &str,
        range: Range<'_>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        self.readable()?;
        let Some(pending) = self.pending.get(table).filter(|_| !is_empty(&range)) else {
            return self.redb.scan(table, range, reverse, visit);
        };
        let logged = pending.range::<[u8], _>(range);
        let logged = logged.map(|(k, v)| (k.as_slice(), v.as_deref()));
        overlay(logged, reverse, visit, |visit| {
            self.redb.scan(table, range, reverse, visit)
        })
    }

    fn count(&self, table: &str, range: Range<'_>, limit: usize) -> Result<usize, Error> {
        self.readable()?;
        let writes = self.pending.get(table).filter(|_| !is_empty(&range));
        let writes = writes.into_iter().flat_map(|pending| {
            let logged = pending.range::<[u8], _>(range);
            logged.map(|(k, v)| (k.as_slice(), v.is_some()))
        });
        self.redb.count_under(table, range, limit, writes)
    }

    /// Writes `batch` to the tables, not logged and not waiting for the disk: on disk with
    /// the next commit. A logged write to the same key, held for reads, still hides it until
    /// the checkpoint applies that write after it, in the order they were made.
    fn apply_derived(&mut self, batch: Batch) -> Result<(), Error> {
        if self.unread.is_some() {
            self.read_back();
        }
        self.readable()?;
        self.redb.apply_derived(batch)
    }

    /// The file's: a failed checkpoint counts, though the commit that made it succeeded.
    fn failed_writes(&self) -> u64 {
        self.redb.failed_writes()
    }

    /// Logs `batch` (on disk when this returns), then holds it for reads; a checkpoint
    /// follows once enough is logged.
    fn apply(&mut self, batch: Batch) -> Result<(), Error> {
        if self.unread.is_some() {
            self.read_back();
        }
        self.readable()?;
        if batch.is_empty() {
            return Ok(());
        }
        let record = encode(&batch.ops);
        let size = record.len();
        let mut log = Batch::default();
        log.put(LOG, self.next.to_be_bytes().to_vec(), record);
        self.redb.apply(log)?;
        self.next += 1;
        self.bytes += size;
        hold(&mut self.pending, batch.ops);
        if self.bytes >= self.checkpoint_bytes
            && let Err(e) = self.checkpoint()
        {
            // The commit is logged, hence done; the checkpoint is tried again at the next one.
            tracing::warn!(file = %self.redb.path(), error = %e, "a checkpoint failed; the commits stay logged");
        }
        Ok(())
    }
}

/// A commit's writes as a log record.
fn encode(ops: &[Op]) -> Vec<u8> {
    let mut w = Writer::default();
    for op in ops {
        let (table, key, value) = match op {
            Op::Put(table, key, value) => (table, key, Some(value)),
            Op::Delete(table, key) => (table, key, None),
        };
        w.u8(u8::from(value.is_some()));
        w.bytes(table.as_bytes());
        w.bytes(key);
        if let Some(value) = value {
            w.bytes(value);
        }
    }
    w.bytes
}

/// The writes of a log record.
fn decode(record: &[u8]) -> Result<Vec<Op>, Malformed> {
    let mut r = Reader::new(record);
    let mut ops = Vec::new();
    while !r.is_empty() {
        let put = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(Malformed),
        };
        let table = std::str::from_utf8(r.bytes()?).map_err(|_| Malformed)?;
        let table = Cow::Owned(table.to_owned());
        let key = Key::from_slice(r.bytes()?);
        ops.push(match put {
            true => Op::Put(table, key, r.bytes()?.to_vec()),
            false => Op::Delete(table, key),
        });
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use redb::{ReadableDatabase as _, ReadableTableMetadata as _};

    use super::*;
    use crate::backend::embedded::memory::tests::{reads_as_the_memory_store, scanned};
    use datastore_entity_core::format::file::seal;

    fn file(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "datastore-entity-logged-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        path
    }

    /// A record's layout, pinned: a log written by one version is applied by the next.
    #[test]
    fn a_record_is_laid_out_as_its_writes_in_order() {
        let ops = [
            Op::Put("entities".into(), Key::from_slice(&[1, 2]), vec![3]),
            Op::Delete("kinds".into(), Key::from_slice(&[4])),
        ];
        let record = encode(&ops);
        let hex: String = record.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            [
                "01",
                "08000000656e746974696573",
                "020000000102",
                "0100000003"
            ]
            .into_iter()
            .chain(["00", "050000006b696e6473", "0100000004"])
            .collect::<String>()
        );
        let decoded = decode(&record).unwrap();
        let decoded: Vec<_> = decoded.iter().map(Op::at).collect();
        assert_eq!(decoded, [("entities", &[1, 2][..]), ("kinds", &[4][..])]);
        assert!(decode(&record[..record.len() - 1]).is_err());
    }

    /// Random puts and deletes, some of them over keys already checkpointed, read as the
    /// memory store reads the same commits, with a checkpoint every few commits.
    #[test]
    fn reads_merge_the_logged_commits_with_the_tables_as_one_store() {
        let path = file("merge");
        let mut logged = Logged::with_checkpoint(Redb::open(&path, None).unwrap(), 600).unwrap();
        reads_as_the_memory_store(&mut logged, 400);
        assert!(logged.first > 0, "checkpoints were made");
        assert!(
            logged.first < logged.next,
            "and commits are logged since the last one"
        );
        drop(logged);
        let _ = std::fs::remove_file(&path);
    }

    /// A process that stops after its commits were logged, before a checkpoint: its commits
    /// are in the file, applied to the tables when the file is next opened.
    #[test]
    fn commits_logged_by_a_process_that_stopped_are_applied_at_the_next_open() {
        let path = file("stopped");
        {
            let mut logged =
                Logged::with_checkpoint(Redb::open(&path, None).unwrap(), usize::MAX).unwrap();
            for n in 0..10_u8 {
                let mut batch = Batch::default();
                batch.put("entities", vec![n], vec![n; 3]);
                if n > 0 {
                    batch.delete("entities", vec![n - 1]);
                }
                logged.apply(batch).unwrap();
            }
            // The process stops: no checkpoint.
            logged.pending.clear();
            logged.first = logged.next;
        }
        let redb = Redb::open(&path, None).unwrap();
        assert_eq!(
            scanned(&redb, LOG, (Bound::Unbounded, Bound::Unbounded), false, 99).len(),
            10
        );
        assert!(
            scanned(
                &redb,
                "entities",
                (Bound::Unbounded, Bound::Unbounded),
                false,
                99
            )
            .is_empty()
        );
        let logged = Logged::with_checkpoint(redb, CHECKPOINT_BYTES).unwrap();
        let all = (Bound::Unbounded, Bound::Unbounded);
        assert_eq!(
            scanned(&logged, "entities", all, false, 99),
            [(vec![9], vec![9; 3])]
        );
        assert_eq!(
            scanned(&logged.redb, "entities", all, false, 99),
            [(vec![9], vec![9; 3])]
        );
        assert!(scanned(&logged.redb, LOG, all, false, 99).is_empty());
        drop(logged);
        let _ = std::fs::remove_file(&path);
    }

    /// A checkpoint that fails (here on a full disk) loses nothing: the commits stay logged,
    /// are read back into memory, and reach the tables at the next checkpoint that succeeds.
    #[test]
    fn a_failed_checkpoint_leaves_the_commits_logged_and_readable() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};

        let path = file("full");
        let full = Arc::new(AtomicBool::new(false));
        let opener = crate::backend::embedded::full_disk::disk(path.clone(), full.clone());
        let redb = Redb::with_opener("test file".into(), opener).unwrap();
        let mut logged = Logged::with_checkpoint(redb, usize::MAX).unwrap();
        for n in 0..5_u8 {
            let mut batch = Batch::default();
            batch.put("entities", vec![n], vec![n; 2]);
            logged.apply(batch).unwrap();
        }
        let all = (Bound::Unbounded, Bound::Unbounded);
        let expected: Vec<_> = (0..5_u8).map(|n| (vec![n], vec![n; 2])).collect();
        full.store(true, Ordering::SeqCst);
        assert!(matches!(logged.checkpoint(), Err(Error::Storage { .. })));
        assert_eq!(scanned(&logged, "entities", all, false, 99), expected);
        assert!(scanned(&logged.redb, "entities", all, false, 99).is_empty());
        full.store(false, Ordering::SeqCst);
        logged.checkpoint().unwrap();
        assert_eq!(scanned(&logged.redb, "entities", all, false, 99), expected);
        assert!(scanned(&logged.redb, LOG, all, false, 99).is_empty());
        assert_eq!(scanned(&logged, "entities", all, false, 99), expected);
        drop(logged);
        let _ = std::fs::remove_file(&path);
    }

    /// A count checks every entry of the file it passes, as a scan does, those the log
    /// replaces too: a damaged one is an error, not a number; one it stops before is not read.
    #[test]
    fn a_count_checks_the_entries_of_the_file_it_passes() {
        let path = file("count");
        let mut redb = Redb::open(&path, None).unwrap();
        let mut batch = Batch::default();
        (0..10_u8).for_each(|n| batch.put("properties", vec![b'p', n], vec![]));
        redb.apply(batch).unwrap();
        drop(redb);
        {
            let db = redb::Database::create(&path).unwrap();
            let write = db.begin_write().unwrap();
            let mut sealed = seal("properties", &[b'p', 5], &[]);
            sealed[0] ^= 1;
            write
                .open_table(redb::TableDefinition::<&[u8], &[u8]>::new("properties"))
                .unwrap()
                .insert(&[b'p', 5][..], sealed.as_slice())
                .unwrap();
            write.commit().unwrap();
        }
        let redb = Redb::open(&path, None).unwrap();
        let mut logged = Logged::with_checkpoint(redb, usize::MAX).unwrap();
        let mut batch = Batch::default();
        batch.put("properties", vec![b'p', 5], vec![]);
        batch.delete("properties", vec![b'p', 7]);
        batch.put("properties", vec![b'p', 3, 1], vec![]);
        logged.apply(batch).unwrap();
        let (low, high) = ([b'p', 0], [b'p', 4]);
        let before = (Bound::Included(&low[..]), Bound::Excluded(&high[..]));
        assert_eq!(logged.count("properties", before, usize::MAX).unwrap(), 5);
        let all = (Bound::Unbounded, Bound::Unbounded);
        assert_eq!(logged.count("properties", all, 3).unwrap(), 3);
        for counted in [
            logged.count("properties", all, 99),
            logged.redb.count("properties", all, 99),
        ] {
            let Err(Error::Storage { reason, .. }) = counted else {
                panic!("a damaged entry is counted: {counted:?}");
            };
            assert!(reason.contains("damaged"), "{reason}");
        }
        drop(logged);
        let _ = std::fs::remove_file(&path);
    }

    /// A damaged record is an error at open, and the file is left as it was: a record whose
    /// checksum fails, and one whose checksum holds but whose bytes are not a record.
    #[test]
    fn a_damaged_log_record_is_an_error_at_open() {
        for (name, record) in [
            ("checksum", {
                let mut sealed = seal(
                    LOG,
                    &[0; 8],
                    &encode(&[Op::Delete("kinds".into(), Key::from_slice(&[1]))]),
                );
                sealed[0] ^= 1;
                sealed
            }),
            ("layout", seal(LOG, &[0; 8], &[7, 0, 0])),
        ] {
            let path = file(name);
            drop(
                Logged::with_checkpoint(Redb::open(&path, None).unwrap(), CHECKPOINT_BYTES)
                    .unwrap(),
            );
            {
                let db = redb::Database::create(&path).unwrap();
                let write = db.begin_write().unwrap();
                write
                    .open_table(redb::TableDefinition::<&[u8], &[u8]>::new(LOG))
                    .unwrap()
                    .insert(&[0_u8; 8][..], record.as_slice())
                    .unwrap();
                write.commit().unwrap();
            }
            let refused =
                Logged::with_checkpoint(Redb::open(&path, None).unwrap(), CHECKPOINT_BYTES);
            let Err(Error::Storage { reason, .. }) = refused else {
                panic!("{name}: a damaged record is refused");
            };
            assert!(reason.contains("damaged"), "{name}: {reason}");
            // The refused handle closed the file.
            let db = redb::Database::create(&path).unwrap();
            let read = db.begin_read().unwrap();
            let log = read
                .open_table(redb::TableDefinition::<&[u8], &[u8]>::new(LOG))
                .unwrap();
            assert_eq!(log.len().unwrap(), 1, "{name}: the record is still there");
            drop((log, read, db));
            let _ = std::fs::remove_file(&path);
        }
    }
}
