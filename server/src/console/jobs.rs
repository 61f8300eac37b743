//! The imports and exports the console started: each with what it does and how far it has
//! got, kept (the last [`KEPT`]) for the page that shows them.

use std::sync::{Arc, Mutex};

use crate::export::Progress;

/// The most jobs kept, the newest first.
pub(super) const KEPT: usize = 20;

/// Where a job is.
#[derive(Debug, Clone)]
pub(super) enum State {
    Running(Progress),
    Done(String),
    Failed(String),
}

/// One import or export.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) id: u64,
    pub(super) project: String,
    /// What it does, in words: `Export of … into /path`.
    pub(super) what: String,
    pub(super) state: Mutex<State>,
}

impl Job {
    pub(super) fn state(&self) -> State {
        self.state.lock().map_or_else(
            |_| State::Failed("the job panicked".to_owned()),
            |s| s.clone(),
        )
    }

    pub(super) fn set(&self, state: State) {
        if let Ok(mut s) = self.state.lock() {
            *s = state;
        }
    }
}

/// The jobs the console started.
#[derive(Debug, Default)]
pub(super) struct Jobs {
    jobs: Mutex<(u64, Vec<Arc<Job>>)>,
}

impl Jobs {
    /// A new job of `project`, running.
    pub(super) fn start(&self, project: &str, what: String) -> Arc<Job> {
        let mut jobs = self
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        jobs.0 += 1;
        let job = Arc::new(Job {
            id: jobs.0,
            project: project.to_owned(),
            what,
            state: Mutex::new(State::Running(Progress::default())),
        });
        jobs.1.insert(0, Arc::clone(&job));
        jobs.1.truncate(KEPT);
        job
    }

    /// The jobs of `project`, the newest first.
    pub(super) fn of(&self, project: &str) -> Vec<Arc<Job>> {
        let jobs = self
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        jobs.1
            .iter()
            .filter(|j| j.project == project)
            .cloned()
            .collect()
    }
}
