//! Query Explain: how a query is (or would be) answered — the indexes read and, when it runs,
//! what it read — on every backend: the service's `explain_options` on Google Cloud, the
//! engine's own planner locally.

use std::fmt;
use std::time::Duration;

/// How a query is answered ([`Query::explain`](struct.Query.html#method.explain)) and, when it ran
/// ([`Query::explain_analyze`](struct.Query.html#method.explain_analyze)), what it read.
///
/// ```
/// # use datastore_entity::prelude::*;
/// #[derive(Entity, Debug)]
/// struct Post {
///     #[key]
///     id: Option<KeyId>,
///     author: String,
/// }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let db = Db::in_memory();
/// let plan = db.query::<Post>().filter(Post::AUTHOR.eq("ann")).explain().await?;
/// assert_eq!(plan.indexes_used, ["Post (author ASC, __key__ ASC)"]);
/// println!("{plan}");
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// How the backend answers the query, in words (the engine says which of its plans; the
    /// service gives no such summary).
    pub plan: String,
    /// Each index read, as its kind and its properties with their directions, e.g.
    /// `Post (author ASC, published DESC, __key__ DESC)`.
    pub indexes_used: Vec<String>,
    /// What running the query read; `None` when it was not run.
    pub stats: Option<ExecutionStats>,
}

/// What a query read when it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionStats {
    /// Results it returned.
    pub results_returned: u64,
    /// Index entries it read (the service reports them as part of its read operations; the
    /// engine counts them).
    pub index_entries_scanned: u64,
    /// Entities it read.
    pub entities_scanned: u64,
    /// The read operations the service billed, where it reports them.
    pub read_operations: Option<u64>,
    /// How long the service took, where it reports it.
    pub execution_duration: Option<Duration>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "plan: {}", self.plan)?;
        match self.indexes_used.as_slice() {
            [] => f.write_str("; no index")?,
            indexes => write!(f, "; indexes: {}", indexes.join(", "))?,
        }
        if let Some(stats) = &self.stats {
            write!(
                f,
                "; returned {} results, scanned {} index entries and {} entities",
                stats.results_returned, stats.index_entries_scanned, stats.entities_scanned
            )?;
            if let Some(reads) = stats.read_operations {
                write!(f, ", {reads} read operations")?;
            }
            if let Some(took) = stats.execution_duration {
                write!(f, ", in {took:?}")?;
            }
        }
        Ok(())
    }
}
