//! Opening a file with a bounded page cache.

use std::path::Path;
use std::sync::Mutex;

use super::store::Redb;
use super::{Embedded, State};
use crate::error::Error;

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
        let store = Redb::open(path.as_ref(), cache_bytes)?;
        let mut state = State::new(Box::new(store));
        state.load(path.as_ref())?;
        Ok(Embedded {
            state: Mutex::new(state),
            released: tokio::sync::Notify::new(),
        })
    }
}
