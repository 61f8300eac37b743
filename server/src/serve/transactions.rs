//! The transactions the API has issued, each bound to the project and database that began it
//! under an id no client can guess (16 bytes from the operating system's random source): a
//! client of one project can neither use, commit nor roll back another's transaction, and an
//! id never issued is refused, with the service's statuses and messages.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tonic::Status;

use super::request::invalid;
use datastore_entity::backend::TransactionId;
use datastore_entity::backend::cloud::wire::Partitions;

/// The bytes of an id the API issues.
const ID_LEN: usize = 16;

/// How long an id is remembered after it was issued: past the longest a transaction lives
/// (270 s, as the service), it names nothing.
const REMEMBERED: Duration = Duration::from_secs(300);

/// The most transactions remembered at once; past it, beginning one is refused with
/// `RESOURCE_EXHAUSTED` until some end (each costs the engine its reads' record).
pub(super) const MAX_OPEN: usize = 10_000;

/// What a request does with a transaction it names.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Use {
    /// Reads in it, or commits it.
    Read,
    /// Rolls it back.
    Rollback,
}

struct Issued {
    project_id: String,
    database_id: String,
    /// The backend's own id.
    inner: TransactionId,
    /// Committed, or rolled back.
    ended: bool,
    at: Instant,
}

/// The ids issued, to the backend's.
#[derive(Default)]
pub(super) struct Registry {
    issued: Mutex<HashMap<[u8; ID_LEN], Issued>>,
}

impl Registry {
    fn issued(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; ID_LEN], Issued>> {
        // A panic elsewhere while holding it leaves a map still whole.
        self.issued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether one more transaction may begin (forgetting what expired first).
    pub(super) fn admit(&self) -> Result<(), Status> {
        let mut issued = self.issued();
        if issued.len() >= MAX_OPEN {
            issued.retain(|_, t| t.at.elapsed() < REMEMBERED);
        }
        if issued.len() >= MAX_OPEN {
            issued.retain(|_, t| !t.ended);
        }
        match issued.len() < MAX_OPEN {
            true => Ok(()),
            false => Err(Status::resource_exhausted(format!(
                "Too many open transactions (at most {MAX_OPEN}): commit or roll back some."
            ))),
        }
    }

    /// The id a client is given for the backend's transaction `inner`, begun in `scope`.
    pub(super) fn issue(
        &self,
        scope: &Partitions,
        inner: TransactionId,
    ) -> Result<Vec<u8>, Status> {
        let mut id = [0u8; ID_LEN];
        getrandom::fill(&mut id)
            .map_err(|e| Status::internal(format!("no random source for a transaction id: {e}")))?;
        let mut issued = self.issued();
        issued.retain(|_, t| t.at.elapsed() < REMEMBERED);
        issued.insert(
            id,
            Issued {
                project_id: scope.project_id.clone(),
                database_id: scope.database_id.clone(),
                inner,
                ended: false,
                at: Instant::now(),
            },
        );
        Ok(id.to_vec())
    }

    /// The backend's transaction a request of `scope` names by `id`, for `what`: refused, as
    /// the service refuses it, when the id is malformed, was never issued, is another
    /// project's or database's, or (to read or commit in) has ended. `None`: a rollback of
    /// a transaction that has already ended, which succeeds.
    pub(super) fn resolve(
        &self,
        scope: &Partitions,
        id: &[u8],
        what: Use,
    ) -> Result<Option<TransactionId>, Status> {
        let id: [u8; ID_LEN] = id.try_into().map_err(|_| invalid("Invalid transaction."))?;
        let issued = self.issued();
        let found = issued.get(&id).filter(|t| {
            t.project_id == scope.project_id
                && t.database_id == scope.database_id
                && t.at.elapsed() < REMEMBERED
        });
        match (found, what) {
            (Some(t), _) if !t.ended => Ok(Some(t.inner.clone())),
            (Some(_), Use::Rollback) => Ok(None),
            (None, Use::Rollback) => Err(invalid("Transaction is invalid or expired.")),
            (_, Use::Read) => Err(invalid("Transaction is invalid or closed.")),
        }
    }

    /// Marks transaction `id` ended (committed or rolled back).
    pub(super) fn end(&self, id: &[u8]) {
        if let Ok(id) = <[u8; ID_LEN]>::try_from(id)
            && let Some(t) = self.issued().get_mut(&id)
        {
            t.ended = true;
        }
    }

    /// The backend's id of a transaction a retry names as its previous attempt, if it is
    /// this scope's (a retry of an unknown one is a new transaction).
    pub(super) fn previous(&self, scope: &Partitions, id: &[u8]) -> Option<TransactionId> {
        let id: [u8; ID_LEN] = id.try_into().ok()?;
        let issued = self.issued();
        issued
            .get(&id)
            .filter(|t| t.project_id == scope.project_id && t.database_id == scope.database_id)
            .map(|t| t.inner.clone())
    }
}
