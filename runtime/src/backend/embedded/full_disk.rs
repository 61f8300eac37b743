//! A file whose writes fail while a flag is set, as on a full disk: the double the tests of
//! the store, the log and the engine open a file on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::store::Opener;

/// A file whose writes fail while `full` is set, as on a full disk.
#[derive(Debug)]
struct Disk {
    file: redb::backends::FileBackend,
    full: Arc<AtomicBool>,
}

impl Disk {
    fn check(&self) -> std::io::Result<()> {
        match self.full.load(Ordering::SeqCst) {
            true => Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "No space left on device",
            )),
            false => Ok(()),
        }
    }
}

impl redb::StorageBackend for Disk {
    fn len(&self) -> std::io::Result<u64> {
        self.file.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.file.read(offset, out)
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.check()?;
        self.file.set_len(len)
    }

    fn sync_data(&self) -> std::io::Result<()> {
        self.check()?;
        self.file.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.check()?;
        self.file.write(offset, data)
    }

    fn close(&self) -> std::io::Result<()> {
        self.file.close()
    }
}

/// Opens the file at `path` on a [`Disk`] that is full while `full` is set.
pub(crate) fn disk(path: std::path::PathBuf, full: Arc<AtomicBool>) -> Opener {
    Box::new(move || {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        let disk = Disk {
            file: redb::backends::FileBackend::new(file)?,
            full: full.clone(),
        };
        redb::Builder::new().create_with_backend(disk)
    })
}
