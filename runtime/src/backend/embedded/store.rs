//! The ordered key–value store under the engine: named tables of byte keys and values, read
//! by key or by range (both directions), written in atomic batches. Three implementations:
//! in memory (`BTreeMap`s, `memory.rs`), in memory compressed (`packed.rs`), and a `redb`
//! file here (ACID; every acknowledged batch is on disk).
//!
//! The engine serialises every call (one lock), so a store needs no locking of its own. A
//! visitor may read the store again (a nested `get` while scanning).

use std::borrow::Cow;
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use redb::{ReadableDatabase as _, ReadableTable as _, TableHandle as _};
use smallvec::SmallVec;

use datastore_entity_core::error::Error;
use datastore_entity_core::format::file::{
    ENTITIES, FORMAT, FORMAT_1, FORMAT_2, FORMAT_3, FORMAT_4, FORMAT_KEY, META, Unsealer, seal,
    unseal, with_times,
};
use datastore_entity_core::format::keycode;
use datastore_entity_core::hash::Map;

pub(crate) use super::ranges::{Range, is_empty};
use super::ranges::{shared_prefix, within};

/// One change of a batch.
pub(crate) enum Op {
    Put(Cow<'static, str>, Key, Vec<u8>),
    Delete(Cow<'static, str>, Key),
}

/// A key written: up to 56 bytes (most: an entity key, an index entry of a short value) held
/// in place, so a commit builds its index entries without an allocation each, and the memory
/// store keeps them as they come.
pub(crate) type Key = SmallVec<[u8; 56]>;

impl Op {
    /// The table and key written.
    pub(crate) fn at(&self) -> (&str, &[u8]) {
        match self {
            Op::Put(table, key, _) | Op::Delete(table, key) => (table, key),
        }
    }
}

/// Writes applied together, in order: all or none.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) ops: Vec<Op>,
}

impl Batch {
    pub(crate) fn put(
        &mut self,
        table: impl Into<Cow<'static, str>>,
        key: impl Into<Key>,
        value: Vec<u8>,
    ) {
        self.ops.push(Op::Put(table.into(), key.into(), value));
    }

    pub(crate) fn delete(&mut self, table: impl Into<Cow<'static, str>>, key: impl Into<Key>) {
        self.ops.push(Op::Delete(table.into(), key.into()));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// What the engine needs of a store.
pub(crate) trait Store {
    /// Calls `visit` with the value under `key`, if there is one; returns whether there was.
    fn get(&self, table: &str, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool, Error>;

    /// Calls `visit` with each entry of `range`, in key order (descending if `reverse`),
    /// until it returns `false`.
    fn scan(
        &self,
        table: &str,
        range: Range<'_>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error>;

    /// How many entries `range` holds, up to `limit`: the entries a [`Store::scan`] would
    /// visit, checked as it checks them. A store may count without a call per entry.
    fn count(&self, table: &str, range: Range<'_>, limit: usize) -> Result<usize, Error> {
        let mut counted = 0;
        if limit > 0 {
            self.scan(table, range, false, &mut |_, _| {
                counted += 1;
                counted < limit
            })?;
        }
        Ok(counted)
    }

    /// Applies `batch` atomically.
    fn apply(&mut self, batch: Batch) -> Result<(), Error>;

    /// Applies `batch`, which holds only what a composite index's build derives from the
    /// stored entities (`building.rs`): a file need not wait for its disk, since a build a
    /// crash interrupts is made again from its start, clearing what it finds. On disk once a
    /// later [`Store::apply`] returns. By default, as [`Store::apply`].
    fn apply_derived(&mut self, batch: Batch) -> Result<(), Error> {
        self.apply(batch)
    }

    /// How many writes have failed since the store was opened. After one, a file is opened
    /// again at its last [`Store::apply`]: what [`Store::apply_derived`] wrote since is gone.
    /// By default none (the memory stores' writes do not fail).
    fn failed_writes(&self) -> u64 {
        0
    }

    /// Whether every entity this store holds was written by this process's stored-form
    /// writer, which writes nothing it could not read back: reading one back needs no check
    /// (the memory store). A file's entities are checked on every read.
    fn written_here(&self) -> bool {
        false
    }
}

/// The tables in a redb file: one file, ACID, each batch one durable transaction. Every value
/// is sealed with a checksum (`format::file::seal`) and checked on read: damage is
/// [`Error::Storage`] naming the file (and the entity), never altered data; a panic inside
/// redb (which a damaged file can cause) is contained and reported the same way.
///
/// After a write fails (a full disk, an I/O error), redb refuses every later write until the
/// database is opened again: reads go on, and the next write opens the file again first
/// (redb then rolls it back to its last commit), so the handle writes again as soon as the
/// cause is gone.
pub(crate) struct Redb {
    /// `None` while opening the file again fails (each call tries again).
    db: RefCell<Option<redb::Database>>,
    /// A write failed: the next one opens the file again first.
    failed: bool,
    /// How many writes have failed ([`Store::failed_writes`]).
    failures: u64,
    open: Opener,
    path: String,
    /// The snapshot reads use, kept until the next write: opening a read transaction and its
    /// tables per call would cost more than most reads.
    snapshot: RefCell<Option<Snapshot>>,
}

struct Snapshot {
    read: redb::ReadTransaction,
    /// Opened tables (`None`: the table does not exist in this snapshot).
    tables: Map<String, Option<Arc<ReadTable>>>,
}

/// Opens the database (the file at a path; in tests, a backend that can fail).
pub(super) type Opener = Box<dyn Fn() -> Result<redb::Database, redb::DatabaseError> + Send>;

type Definition<'a> = redb::TableDefinition<'a, &'static [u8], &'static [u8]>;
type ReadTable = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;
type WriteTable<'t> = redb::Table<'t, &'static [u8], &'static [u8]>;

impl Redb {
    /// Opens (or creates) the file at `path`. Another process holding it open is a clear
    /// error, never a shared, corrupting use.
    pub(crate) fn open(path: &Path, cache_bytes: Option<usize>) -> Result<Redb, Error> {
        let shown = path.display().to_string();
        // An empty file is not a new database: it is one that lost everything (a truncation,
        // a failed copy). A new database is made by opening a path where no file exists.
        if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
            return Err(Error::storage(format!(
                "{shown} is empty (0 bytes): not a database, perhaps one that was truncated; \
                     to start a new database, remove the file or open a path that does not exist"
            )));
        }
        if std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            Redb::check_ours(path, &shown)?;
        }
        let owned = path.to_owned();
        Redb::with_opener(
            shown,
            Box::new(move || match cache_bytes {
                Some(bytes) => redb::Builder::new().set_cache_size(bytes).create(&owned),
                None => redb::Database::create(&owned),
            }),
        )
    }

    /// Whether the existing file at `path` is a store of this engine, looked at without
    /// writing to it: another program's redb database (tables, but not this engine's format
    /// record) is refused untouched, byte for byte. A database that was not closed cleanly
    /// cannot be read without a repair; it is opened (and repaired) as usual, then its format
    /// is checked again before anything is written ([`Redb::check_format`]).
    fn check_ours(path: &Path, shown: &str) -> Result<(), Error> {
        // The storage engine's panics on a damaged file are errors, as at every other read.
        contained(shown, || Redb::look_at(path, shown))
    }

    fn look_at(path: &Path, shown: &str) -> Result<(), Error> {
        let db = match redb::ReadOnlyDatabase::open(path) {
            Ok(db) => db,
            Err(redb::DatabaseError::RepairAborted) => return Ok(()),
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => return Err(already_open(shown)),
            Err(other) => {
                let reason = format!(
                    "cannot open {shown} ({other}): it is not a `Db::open` store, and was left \
                     as it is"
                );
                return Err(Error::storage_caused(reason, other));
            }
        };
        let fail = |e: redb::Error| Error::storage_caused(format!("cannot read {shown}: {e}"), e);
        let read = redb::ReadableDatabase::begin_read(&db).map_err(|e| fail(e.into()))?;
        let tables: Vec<String> = read
            .list_tables()
            .map_err(|e| fail(e.into()))?
            .map(|t| t.name().to_owned())
            .collect();
        let format = match tables.iter().any(|t| t == META) {
            false => None,
            true => {
                let meta = read
                    .open_table(Definition::new(META))
                    .map_err(|e| fail(e.into()))?;
                meta.get(FORMAT_KEY)
                    .map_err(|e| fail(e.into()))?
                    .map(|v| v.value().to_vec())
            }
        };
        check_format(shown, format.as_deref(), !tables.is_empty())
    }

    /// This engine's format record, checked once the file is open: a database with tables but
    /// no record is another program's, refused before anything is written. Whether the
    /// database is new (nothing in it, not even the record).
    fn check_format(&self) -> Result<bool, Error> {
        let mut format = None;
        self.get(META, FORMAT_KEY, &mut |v| format = Some(v.to_vec()))?;
        let read = self
            .database()?
            .begin_read()
            .map_err(|e| self.error("cannot read", e))?;
        let tables = read
            .list_tables()
            .map_err(|e| self.error("cannot read", e))?
            .count();
        check_format(&self.path, format.as_deref(), tables > 0)?;
        Ok(format.is_none())
    }

    /// Opens the database with `open`, checks it whole, and migrates a file of an earlier
    /// format.
    pub(super) fn with_opener(shown: String, open: Opener) -> Result<Redb, Error> {
        let created = contained(&shown, || Ok(open()))?;
        let mut db = created.map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => already_open(&shown),
            other => Error::storage_caused(format!("cannot open {shown}: {other}"), other),
        })?;
        // Every page's checksum, once, at open: damage anywhere in the file (a key, a page of
        // the tree) is refused here rather than read as a missing or altered entity.
        let intact = contained(&shown, || Ok(db.check_integrity()))?;
        match intact {
            Ok(true) => {}
            Ok(false) => {
                return Err(Error::storage(format!(
                    "{shown} was damaged: the storage engine repaired it at open, back to its \
                         last intact commit, so recent writes may be lost; compare it with a \
                         backup, then open it again to go on"
                )));
            }
            Err(e) => {
                let reason = format!("{shown} is damaged beyond repair: {e}");
                return Err(Error::storage_caused(reason, e));
            }
        }
        let mut redb = Redb {
            db: RefCell::new(Some(db)),
            failed: false,
            failures: 0,
            open,
            path: shown,
            snapshot: RefCell::new(None),
        };
        if redb.check_format()? {
            // A new database is marked as this engine's before anything else is written.
            let mut batch = Batch::default();
            batch.put(META, FORMAT_KEY.to_vec(), FORMAT.to_vec());
            redb.apply(batch)?;
        }
        redb.migrate()?;
        Ok(redb)
    }

    /// Brings a file of an earlier format to this one, in one transaction: seals every value
    /// of format 1 (before checksums), and gives every entity of formats 1 and 2 (before
    /// entities kept their times) the time of the migration as its create and update time. A
    /// file of format 3 (before the log) or 4 (before annotations) has nothing to change but
    /// its mark.
    fn migrate(&mut self) -> Result<(), Error> {
        let mut format = None;
        self.get(META, FORMAT_KEY, &mut |v| format = Some(v.to_vec()))?;
        let sealed = match format.as_deref() {
            Some(f) if f == FORMAT_1 => false,
            Some(f) if f == FORMAT_2 => true,
            Some(f) if f == FORMAT_3 || f == FORMAT_4 => {
                let mut batch = Batch::default();
                batch.put(META, FORMAT_KEY.to_vec(), FORMAT.to_vec());
                return self.apply(batch);
            }
            _ => return Ok(()),
        };
        let now = datastore_entity_core::model::scalar::Timestamp::now().as_micros();
        let read = self
            .database()?
            .begin_read()
            .map_err(|e| self.error("cannot read", e))?;
        let tables: Vec<String> = read
            .list_tables()
            .map_err(|e| self.error("cannot read", e))?
            .map(|t| t.name().to_owned())
            .collect();
        let mut batch = Batch::default();
        for table in tables.iter().filter(|t| t.as_str() != META) {
            let t = read
                .open_table(Definition::new(table))
                .map_err(|e| self.error("cannot read", e))?;
            for entry in t.iter().map_err(|e| self.error("cannot read", e))? {
                let (k, v) = entry.map_err(|e| self.error("cannot read", e))?;
                let (key, value) = (k.value(), v.value());
                let value = match sealed {
                    true => self.unsealed(table, key, value)?,
                    false => value,
                };
                let value = match table.as_str() {
                    ENTITIES => with_times(value.to_vec(), now, now),
                    _ => value.to_vec(),
                };
                batch.put(table.clone(), key.to_vec(), value);
            }
        }
        drop(read);
        batch.put(META, FORMAT_KEY.to_vec(), FORMAT.to_vec());
        tracing::info!(
            file = %self.path,
            values = batch.ops.len(),
            from = %String::from_utf8_lossy(format.as_deref().unwrap_or_default()),
            "migrating a file to this engine's format"
        );
        self.apply(batch)
    }

    /// Unseals `value` read under `key` in `table`, or names the damage.
    fn unsealed<'v>(&self, table: &str, key: &[u8], value: &'v [u8]) -> Result<&'v [u8], Error> {
        unseal(table, key, value).ok_or_else(|| self.damaged(table, key))
    }

    /// The error of an entry read under `key` in `table` that fails its checksum.
    fn damaged(&self, table: &str, key: &[u8]) -> Error {
        let what = match table {
            ENTITIES => match keycode::Reader::new(key).key() {
                Ok(key) => format!("the entity {key:?}"),
                Err(_) => "an entity (its key is damaged too)".to_owned(),
            },
            _ => format!("an entry of table `{table}`"),
        };
        Error::storage(format!(
            "{} is damaged: {what} fails its checksum; restore the file from a backup",
            self.path
        ))
    }
}

/// Runs `call` (a call into redb), turning a panic into [`Error::Storage`]: a damaged file can
/// make redb index out of its pages.
fn already_open(shown: &str) -> Error {
    Error::storage(format!(
        "{shown} is already open (in another process, or by another `Db::open` in this \
             one); a file has one user at a time: share the `Db` handle instead"
    ))
}

/// Whether a file whose format record is `format` (and which has tables or not) is a store
/// of this engine: one of its formats, or a database with nothing in it yet.
fn check_format(shown: &str, format: Option<&[u8]>, has_tables: bool) -> Result<(), Error> {
    match format {
        Some(f) if [FORMAT, FORMAT_1, FORMAT_2, FORMAT_3, FORMAT_4].contains(&f) => Ok(()),
        None if !has_tables => Ok(()),
        Some(_) => Err(Error::storage(format!(
            "{shown} was written by another version of this engine (or another program); \
                 it was left as it is"
        ))),
        None => Err(Error::storage(format!(
            "{shown} is a redb database of another program (it has tables, but not this \
                 engine's format record), not a `Db::open` store; it was left as it is"
        ))),
    }
}

fn contained<T>(path: &str, call: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::storage(format!(
            "{path} is damaged: the storage engine failed reading it ({what})"
        )))
    })
}

impl Redb {
    /// The file, as errors name it.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    fn error(&self, what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error::storage_caused(format!("{what} {}: {e}", self.path), e)
    }

    /// The database, opened again first if a failed write closed it.
    fn database(&self) -> Result<std::cell::Ref<'_, redb::Database>, Error> {
        if self.db.borrow().is_none() {
            let reopened = contained(&self.path, || Ok((self.open)()))?.map_err(|e| {
                let reason = format!(
                    "{} cannot be opened again after a failed write: {e}; the next call \
                         tries again",
                    self.path
                );
                Error::storage_caused(reason, e)
            })?;
            tracing::info!(file = %self.path, "opened again after a failed write");
            *self.db.borrow_mut() = Some(reopened);
        }
        std::cell::Ref::filter_map(self.db.borrow(), Option::as_ref)
            .map_err(|_| Error::storage(format!("{} is not open", self.path)))
    }

    /// `name` in the current snapshot (taken now if there is none).
    fn table(&self, name: &str) -> Result<Option<Arc<ReadTable>>, Error> {
        let mut snapshot = self.snapshot.borrow_mut();
        if snapshot.is_none() {
            let read = self
                .database()?
                .begin_read()
                .map_err(|e| self.error("cannot read", e))?;
            *snapshot = Some(Snapshot {
                read,
                tables: Map::default(),
            });
        }
        let Some(snapshot) = snapshot.as_mut() else {
            return Ok(None);
        };
        if let Some(table) = snapshot.tables.get(name) {
            return Ok(table.clone());
        }
        let table = match snapshot.read.open_table(Definition::new(name)) {
            Ok(t) => Some(Arc::new(t)),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(self.error("cannot read", e)),
        };
        snapshot.tables.insert(name.to_owned(), table.clone());
        Ok(table)
    }
}

impl Store for Redb {
    fn get(&self, table: &str, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        contained(&self.path, || {
            let Some(t) = self.table(table)? else {
                return Ok(false);
            };
            let value = t.get(key).map_err(|e| self.error("cannot read", e))?;
            match value {
                Some(value) => {
                    visit(self.unsealed(table, key, value.value())?);
                    Ok(true)
                }
                None => Ok(false),
            }
        })
    }

    fn scan(
        &self,
        table: &str,
        range: Range<'_>,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        if is_empty(&range) {
            return Ok(());
        }
        // redb's cursor is put at the near bound, and the scan compares each key with the far
        // one (a cursor steps without the two ends and the checks of redb's range iterator):
        // a key between both starts with the bounds' shared prefix, so its checksum is
        // computed from where it leaves that prefix. (A key out of the tree's order, that is
        // not between them, fails its checksum.)
        let shared = shared_prefix(range);
        let far = match reverse {
            false => range.1,
            true => range.0,
        };
        let mut unsealer = Unsealer::new(table, shared);
        contained(&self.path, || {
            let Some(t) = self.table(table)? else {
                return Ok(());
            };
            let read = |e: redb::StorageError| self.error("cannot read", e);
            let mut cursor = match reverse {
                false => t.lower_bound(range.0),
                true => t.upper_bound(range.1),
            }
            .map_err(read)?;
            loop {
                let entry = match reverse {
                    false => cursor.next(),
                    true => cursor.prev(),
                };
                let Some((k, v)) = entry.map_err(read)? else {
                    return Ok(());
                };
                let key = k.value();
                if !within(key, far, reverse) {
                    return Ok(());
                }
                let value = key
                    .get(shared.len()..)
                    .and_then(|tail| unsealer.unseal(tail, v.value()))
                    .ok_or_else(|| self.damaged(table, key))?;
                if !visit(key, value) {
                    return Ok(());
                }
            }
        })
    }

    fn count(&self, table: &str, range: Range<'_>, limit: usize) -> Result<usize, Error> {
        self.count_under(table, range, limit, std::iter::empty())
    }

    fn apply(&mut self, batch: Batch) -> Result<(), Error> {
        self.apply_as(batch, redb::Durability::Immediate)
    }

    fn apply_derived(&mut self, batch: Batch) -> Result<(), Error> {
        self.apply_as(batch, redb::Durability::None)
    }

    fn failed_writes(&self) -> u64 {
        self.failures
    }
}

impl Redb {
    /// Applies `batch` in one redb transaction of `durability`.
    fn apply_as(&mut self, batch: Batch, durability: redb::Durability) -> Result<(), Error> {
        // The snapshot would pin pages the write frees; a new one is taken at the next read.
        self.snapshot.borrow_mut().take();
        if self.failed {
            // redb refuses every write after an I/O error until the database is opened
            // again: close it, and open it again below (if that fails too, the next call
            // tries again).
            self.db.borrow_mut().take();
            self.failed = false;
        }
        let this = &*self;
        let written = contained(&this.path, || this.write(batch, durability));
        if let Err(e) = &written {
            tracing::warn!(file = %self.path, error = %e, "a write failed; the file is opened again at the next write");
            self.failed = true;
            self.failures += 1;
        }
        written
    }
}

impl Redb {
    /// How many entries `range` holds, up to `limit`, with `writes` laid over the file's
    /// (each a key inside `range`, in increasing order, and whether it puts a value or
    /// deletes): what a [`Store::scan`] of the file under those writes would visit, every
    /// entry of the file in `range` checked as the scan checks it, but no call per entry and
    /// one comparison per entry (with the next write's key, or with the range's end once
    /// there is none).
    pub(crate) fn count_under<'w>(
        &self,
        table: &str,
        range: Range<'_>,
        limit: usize,
        mut writes: impl Iterator<Item = (&'w [u8], bool)>,
    ) -> Result<usize, Error> {
        if limit == 0 || is_empty(&range) {
            return Ok(0);
        }
        let mut unsealer = Unsealer::new(table, shared_prefix(range));
        let mut held = writes.next();
        let mut counted = 0;
        contained(&self.path, || {
            let Some(t) = self.table(table)? else {
                return Ok(());
            };
            let read = |e: redb::StorageError| self.error("cannot read", e);
            let mut cursor = t.lower_bound(range.0).map_err(read)?;
            while let Some((k, v)) = cursor.next().map_err(read)? {
                let key = k.value();
                let mut replaced = false;
                // Past the next write's key (the writes are inside the range), or the end.
                let further = match held {
                    Some((written, _)) => key >= written,
                    None => !within(key, range.1, false),
                };
                if further {
                    while let Some((written, put)) = held.filter(|(w, _)| *w <= key) {
                        counted += usize::from(put);
                        held = writes.next();
                        replaced = written == key;
                        if counted >= limit || replaced {
                            break;
                        }
                    }
                    if counted >= limit || !within(key, range.1, false) {
                        return Ok(());
                    }
                }
                key.get(unsealer.prefix().len()..)
                    .and_then(|tail| unsealer.unseal(tail, v.value()))
                    .ok_or_else(|| self.damaged(table, key))?;
                counted += usize::from(!replaced);
                if counted >= limit {
                    return Ok(());
                }
            }
            Ok(())
        })?;
        // The writes past the file's last entry.
        while counted < limit
            && let Some((_, put)) = held
        {
            counted += usize::from(put);
            held = writes.next();
        }
        Ok(counted.min(limit))
    }

    /// Applies `batch` in one redb transaction of `durability`, every value sealed: one table
    /// after another, each in key order (a copy-on-write B-tree then changes each page it
    /// touches in one run instead of going back to it), the writes to one key in their order.
    fn write(&self, mut batch: Batch, durability: redb::Durability) -> Result<(), Error> {
        let mut write = self
            .database()?
            .begin_write()
            .map_err(|e| self.error("cannot write", e))?;
        write
            .set_durability(durability)
            .map_err(|e| self.error("cannot write", e))?;
        batch.ops.sort_by(|a, b| a.at().cmp(&b.at()));
        {
            let mut open: Option<(&str, WriteTable<'_>)> = None;
            for op in &batch.ops {
                let (table, key) = op.at();
                let t = match &mut open {
                    Some((name, t)) if *name == table => t,
                    _ => {
                        let t = write
                            .open_table(Definition::new(table))
                            .map_err(|e| self.error("cannot write", e))?;
                        &mut open.insert((table, t)).1
                    }
                };
                match op {
                    Op::Put(table, key, value) => t
                        .insert(key.as_slice(), seal(table, key, value).as_slice())
                        .map(drop),
                    Op::Delete(..) => t.remove(key).map(drop),
                }
                .map_err(|e| self.error("cannot write", e))?;
            }
        }
        // Durability::Immediate: on disk when `commit` returns; Durability::None: once a
        // later Immediate commit returns.
        write
            .commit()
            .map_err(|e| self.error("cannot commit to", e))
    }
}
