//! Opening a file: with a bounded page cache, its commits logged (`logged.rs`).

use std::path::Path;

use super::logged::{CHECKPOINT_BYTES, Logged};
use super::store::Redb;
use super::{Embedded, State};
use datastore_entity_core::error::Error;

impl Embedded {
    /// [`open`](Embedded::open), with a page cache of at most `cache_bytes` (`None`: redb's
    /// default, 1 GiB): what a long-running process over a large file holds in memory for its
    /// pages. A smaller cache reads more from the disk.
    ///
    /// ```no_run
    /// # use datastore_entity::backend::embedded::Embedded;
    /// let engine = Embedded::open_with_cache("data/app.redb", Some(64 << 20))?;
    /// # Ok::<(), datastore_entity::Error>(())
    /// ```
    pub fn open_with_cache(
        path: impl AsRef<Path>,
        cache_bytes: Option<usize>,
    ) -> Result<Embedded, Error> {
        Embedded::open_logged(path.as_ref(), cache_bytes, CHECKPOINT_BYTES)
    }

    /// [`open`](Embedded::open), applying the commits logged to the tables once
    /// `checkpoint_bytes` of them are logged, not 16 MiB: a test's few commits then reach the
    /// tables and the log together. Not a public API.
    #[doc(hidden)]
    pub fn open_checkpointing_every(
        path: impl AsRef<Path>,
        checkpoint_bytes: usize,
    ) -> Result<Embedded, Error> {
        Embedded::open_logged(path.as_ref(), None, checkpoint_bytes)
    }

    fn open_logged(
        path: &Path,
        cache_bytes: Option<usize>,
        checkpoint_bytes: usize,
    ) -> Result<Embedded, Error> {
        let store = Logged::with_checkpoint(Redb::open(path, cache_bytes)?, checkpoint_bytes)?;
        let mut state = State::new(Box::new(store));
        state.load(path)?;
        Ok(Embedded::of(state))
    }
}
