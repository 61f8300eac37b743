//! The scale rules no type can check, watched at run time: every write that passes through a
//! [`Db`](crate::Db) (on any backend) is observed, and the patterns Google's pages warn about
//! become [`Finding`]s — logged once each through `tracing` (`warn`) and listed by
//! [`Db::diagnostics`](crate::Db::diagnostics).
//!
//! - `R-K4`: key names or ids of one kind written in increasing (or decreasing) order —
//!   `Customer1`, `Customer2`, … — which puts every write on one key range.
//! - `R-E2`: one entity group (one root key) written more than about once per second,
//!   sustained.
//! - `R-S4`: a kind written faster than 500 writes/s (measured over 10 s, one commit's burst
//!   allowed) in its first minutes, before the service has split its key ranges (the
//!   500/50/5 rule; [`RampUp`](crate::RampUp) and [`BulkWriter`](crate::BulkWriter) pace
//!   writes to it).
//! - `R-S6`: an indexed property whose written values increase (or decrease) steadily at a
//!   high rate — sequence numbers, counters — which puts every index write on one range.
//!
//! Memory is bounded (a few counters per kind and indexed property, and the entity groups
//! written in the last window, at most [`Thresholds::max_groups`]); the cost per write is a
//! lock and a few comparisons (the `diagnostics` benchmark measures it). Thresholds are
//! [`Thresholds`]; the clock is injectable ([`Diagnostics::clock`]) so tests need not sleep.
//!
//! ```
//! # use datastore_entity::prelude::*;
//! # use datastore_entity::{Diagnostics, Thresholds};
//! #[derive(Entity)]
//! struct Customer {
//!     #[key]
//!     name: KeyName,
//!     city: String,
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let db = Db::in_memory().watch(Diagnostics::new().thresholds(Thresholds {
//!     monotonic_run: 20,
//!     ..Thresholds::default()
//! }));
//! for i in 0..30 {
//!     let name = KeyName::new(format!("Customer{i:03}"))?;
//!     db.put(&Customer { name, city: "Oslo".into() }).await?;
//! }
//! let findings = db.diagnostics();
//! assert_eq!(findings[0].rule, "R-K4");
//! println!("{}", findings[0]); // names the kind and the fix: `KeyName::scattered`
//! # Ok::<(), Error>(())
//! # }).unwrap();
//! ```

use datastore_entity_core::hash::Map;
use std::fmt;
use std::hash::BuildHasher as _;

use foldhash::fast::RandomState;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use datastore_entity_core::model::key::{IdOrName, RawKey};
use datastore_entity_core::model::value::PropertyMap;
use datastore_entity_core::model::views::ValueView;

/// Writes over the ramp's rate a window tolerates: one commit of a bulk writer at the ramp's
/// start (500 mutations), which lands all at once.
const RAMP_BURST: f64 = 500.0;
use datastore_entity_core::query::write::Mutation;

/// A hash of `key`'s root (its entity group): partition and first path element.
fn root_hash(hashing: &RandomState, key: &RawKey) -> u64 {
    hashing.hash_one((key.partition(), key.path().first()))
}

/// The hasher of a map whose keys are hashes already (seeded per process by [`root_hash`]'s
/// random state): they are used as they are.
#[derive(Default)]
struct AlreadyHashed(u64);

impl std::hash::Hasher for AlreadyHashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64`s are hashed (`write_u64`); anything else is folded in, never lost.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

/// Entity groups by [`root_hash`].
type Groups = std::collections::HashMap<u64, Window, std::hash::BuildHasherDefault<AlreadyHashed>>;

/// When a pattern becomes a [`Finding`]. The defaults follow Google's pages.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// `R-K4`, `R-S6`: how many writes in a row must each move the same way (keys of one
    /// kind, or one indexed property's values) — 100 by default.
    pub monotonic_run: u32,
    /// `R-K4`, `R-S6`: … at no less than this many writes per second over the run (a slow
    /// sequence makes no hotspot) — 50 by default.
    pub monotonic_rate: f64,
    /// `R-E2`: writes per second to one entity group the service sustains — 1 by default.
    pub group_rate: f64,
    /// `R-E2`: over how long the rate is measured (it must be sustained) — 10 s by default.
    pub group_window: Duration,
    /// `R-S4`: writes per second a new kind starts with — 500 by default.
    pub ramp_rate: f64,
    /// `R-S4`: how long after its first write a kind counts as new — 5 minutes by default.
    pub ramp_window: Duration,
    /// `R-S4`: over how long the rate is measured — 10 s by default. A window may hold one
    /// commit (500 writes) more than `ramp_rate` allows: a writer paced to the rate sends
    /// each batch at once (as [`RampUp`](crate::RampUp)'s limiter lets it).
    pub ramp_measure: Duration,
    /// The most entity groups followed at once (`R-E2`): past it, the oldest are dropped.
    pub max_groups: usize,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            monotonic_run: 100,
            monotonic_rate: 50.0,
            group_rate: 1.0,
            group_window: Duration::from_secs(10),
            ramp_rate: 500.0,
            ramp_window: Duration::from_secs(300),
            ramp_measure: Duration::from_secs(10),
            max_groups: 10_000,
        }
    }
}

/// The scale rules a handle watches at run time (their ids as in the README's rules table).
///
/// Compares equal to its id as text, so `finding.rule == "R-K4"` reads as it did when the
/// rule was a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// R-K4: keys written in sequence land on one key range.
    K4,
    /// R-E2: an entity group written more than about once per second.
    E2,
    /// R-S4: a new kind's traffic not ramped up (the 500/50/5 rule).
    S4,
    /// R-S6: an indexed property whose values follow each other.
    S6,
}

impl Rule {
    /// The rule's id: `"R-K4"`, `"R-E2"`, `"R-S4"` or `"R-S6"`.
    pub const fn id(self) -> &'static str {
        match self {
            Rule::K4 => "R-K4",
            Rule::E2 => "R-E2",
            Rule::S4 => "R-S4",
            Rule::S6 => "R-S6",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl PartialEq<str> for Rule {
    fn eq(&self, id: &str) -> bool {
        self.id() == id
    }
}

impl PartialEq<&str> for Rule {
    fn eq(&self, id: &&str) -> bool {
        self.id() == *id
    }
}

/// A pattern one of Google's scale rules warns about, seen in this handle's writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// The kind written.
    pub kind: String,
    /// What is hot: the property (`R-S6`), the entity group's root key (`R-E2`), or the key
    /// range (`R-K4`: from the first key of the run to the last); empty for `R-S4`.
    pub subject: String,
    /// The observed rate, in writes per second.
    pub rate: f64,
    /// How many writes were observed in the pattern.
    pub writes: u64,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, subject, rate, writes) = (&self.kind, &self.subject, self.rate, self.writes);
        match self.rule {
            Rule::K4 => write!(
                f,
                "[R-K4] {writes} keys of kind `{kind}` written in sequence ({subject}) at \
                 {rate:.0} writes/s: they all land on one key range. Scatter the keys: \
                 `KeyName::scattered`, allocated ids, or a hash prefix"
            ),
            Rule::E2 => write!(
                f,
                "[R-E2] the entity group {subject} of kind `{kind}` is written {rate:.1} times/s \
                 ({writes} writes), more than the about once per second it sustains. Spread \
                 the writes over several groups, or shard the value (`#[sharded(n)]`)"
            ),
            Rule::S4 => write!(
                f,
                "[R-S4] kind `{kind}` is written at {rate:.0} writes/s in its first minutes: \
                 ramp new traffic up from 500 writes/s, +50 % every 5 minutes (the 500/50/5 \
                 rule), so the service can split the kind's key ranges in time: pace bulk \
                 writes with `BulkWriter` (or a `RampUp` limiter)"
            ),
            Rule::S6 => write!(
                f,
                "[R-S6] indexed property `{subject}` of kind `{kind}` takes {writes} values in \
                 sequence at {rate:.0} writes/s: every index write lands on one range. \
                 Exclude it from indexes, shard its index (`#[sharded_index(n)]`), or write \
                 values that do not follow each other"
            ),
        }
    }
}

/// How a handle watches its writes: thresholds and clock. [`Db::watch`](crate::Db::watch).
#[derive(Clone)]
pub struct Diagnostics {
    thresholds: Thresholds,
    clock: Arc<dyn Fn() -> Duration + Send + Sync>,
    on: bool,
}

impl fmt::Debug for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Diagnostics")
            .field("thresholds", &self.thresholds)
            .field("on", &self.on)
            .finish_non_exhaustive()
    }
}

impl Default for Diagnostics {
    fn default() -> Diagnostics {
        Diagnostics::new()
    }
}

impl Diagnostics {
    /// The default thresholds, on the monotonic clock.
    pub fn new() -> Diagnostics {
        let start = Instant::now();
        Diagnostics {
            thresholds: Thresholds::default(),
            clock: Arc::new(move || start.elapsed()),
            on: true,
        }
    }

    /// Nothing watched: [`Db::diagnostics`](crate::Db::diagnostics) stays empty.
    pub fn off() -> Diagnostics {
        Diagnostics {
            on: false,
            ..Diagnostics::new()
        }
    }

    /// Other thresholds.
    pub fn thresholds(mut self, thresholds: Thresholds) -> Diagnostics {
        self.thresholds = thresholds;
        self
    }

    /// Another clock: the time since any fixed start (a test's own, moved by hand).
    pub fn clock(mut self, clock: impl Fn() -> Duration + Send + Sync + 'static) -> Diagnostics {
        self.clock = Arc::new(clock);
        self
    }
}

/// The watcher a handle (and its clones) share.
pub(crate) struct Watch {
    config: Diagnostics,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    kinds: Map<String, KindState>,
    /// The key of [`root_hash`].
    hashing: RandomState,
    groups: Groups,
    findings: Vec<Finding>,
}

struct KindState {
    first: Duration,
    /// Which window of `ramp_measure` is current, and the writes in it (`R-S4`).
    window: u128,
    in_window: u64,
    reported_ramp: bool,
    keys: Run,
    /// One run per indexed property, by name.
    properties: Vec<(String, Run)>,
}

/// A value a run compares, kept without allocating per write (the string's buffer is
/// reused): a key's id or name, or a property's number or string.
#[derive(Debug, Clone, PartialEq, Default)]
enum Last {
    #[default]
    None,
    Integer(i64),
    Double(f64),
    String(String),
}

/// A value as [`Last`] compares it, borrowed.
#[derive(Clone, Copy)]
enum Seen<'a> {
    Integer(i64),
    Double(f64),
    String(&'a str),
}

impl Last {
    /// How `seen` compares with this one: `None` when there is none, or a number meets a
    /// string (a type change starts a new run).
    fn compare(&self, seen: Seen<'_>) -> Option<std::cmp::Ordering> {
        match (self, seen) {
            (Last::Integer(a), Seen::Integer(b)) => Some(b.cmp(a)),
            (Last::Double(a), Seen::Double(b)) => b.partial_cmp(a),
            (Last::String(a), Seen::String(b)) => Some(b.cmp(a.as_str())),
            _ => None,
        }
    }

    fn set(&mut self, seen: Seen<'_>) {
        match (self, seen) {
            (Last::String(buffer), Seen::String(s)) => {
                buffer.clear();
                buffer.push_str(s);
            }
            (last, Seen::Integer(i)) => *last = Last::Integer(i),
            (last, Seen::Double(d)) => *last = Last::Double(d),
            (last, Seen::String(s)) => *last = Last::String(s.to_owned()),
        }
    }
}

impl std::fmt::Display for Last {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Last::None => Ok(()),
            Last::Integer(i) => write!(f, "{i}"),
            Last::Double(d) => write!(f, "{d}"),
            Last::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// A run of writes each moving the same way.
#[derive(Default)]
struct Run {
    last: Last,
    first: Last,
    /// +1 increasing, -1 decreasing, 0 not yet known.
    direction: i8,
    length: u64,
    since: Duration,
    reported: bool,
}

impl Run {
    /// Adds `seen`; the run's rate and length when it reaches `thresholds` (once per run).
    fn step(
        &mut self,
        seen: Seen<'_>,
        now: Duration,
        thresholds: &Thresholds,
    ) -> Option<(f64, u64)> {
        let direction = match self.last.compare(seen) {
            Some(std::cmp::Ordering::Greater) => 1,
            Some(std::cmp::Ordering::Less) => -1,
            Some(std::cmp::Ordering::Equal) => return None,
            None => 0,
        };
        if direction == 0 || (self.direction != 0 && direction != self.direction) {
            // A new run starts at the previous value (or this one, the first).
            match direction {
                0 => self.first.set(seen),
                _ => self.first.clone_from(&self.last),
            }
            self.length = u64::from(direction != 0);
            self.since = now;
            self.reported = false;
        } else {
            self.length += 1;
        }
        self.direction = direction;
        self.last.set(seen);
        if self.reported || self.length < u64::from(thresholds.monotonic_run) {
            return None;
        }
        let rate = self.length as f64 / (now - self.since).as_secs_f64().max(1e-3);
        if rate < thresholds.monotonic_rate {
            return None;
        }
        self.reported = true;
        Some((rate, self.length))
    }
}

impl KindState {
    /// R-S4: more writes in a measured window than the ramp allows while the kind is new.
    fn unramped(&mut self, kind: &str, now: Duration, t: &Thresholds) -> Option<Finding> {
        let window = now.as_nanos() / t.ramp_measure.as_nanos().max(1);
        if window != self.window {
            self.window = window;
            self.in_window = 0;
        }
        self.in_window += 1;
        let seconds = t.ramp_measure.as_secs_f64().max(1e-9);
        if self.reported_ramp
            || now.saturating_sub(self.first) >= t.ramp_window
            || self.in_window as f64 <= t.ramp_rate * seconds + RAMP_BURST
        {
            return None;
        }
        self.reported_ramp = true;
        Some(Finding {
            rule: Rule::S4,
            kind: kind.to_owned(),
            subject: String::new(),
            rate: self.in_window as f64 / seconds,
            writes: self.in_window,
        })
    }

    /// R-K4: ids or names the caller chose, written in sequence (allocated ids are
    /// scattered; deleting in key order is a cleanup, not new keys on one range, so only
    /// writes come here).
    fn sequential_key(&mut self, key: &RawKey, now: Duration, t: &Thresholds) -> Option<Finding> {
        let seen = match key.id_or_name()? {
            IdOrName::Id(id) => Seen::Integer(id.get()),
            IdOrName::Name(name) => Seen::String(name.as_str()),
        };
        let (rate, writes) = self.keys.step(seen, now, t)?;
        Some(Finding {
            rule: Rule::K4,
            kind: key.kind().to_owned(),
            subject: format!("{} to {}", self.keys.first, self.keys.last),
            rate,
            writes,
        })
    }

    /// R-S6: indexed numbers and strings in sequence (timestamps are R-I3's, checked at
    /// compile time). Properties come in name order, so each is usually found at the
    /// position it had in the previous write.
    fn sequential_values(
        &mut self,
        kind: &str,
        properties: &PropertyMap,
        now: Duration,
        t: &Thresholds,
        found: &mut Vec<Finding>,
    ) {
        for (at, (name, excluded, value, _)) in properties.view_indexed().enumerate() {
            let seen = match value {
                _ if excluded => continue,
                ValueView::Integer(i) => Seen::Integer(i),
                ValueView::Double(d) => Seen::Double(d),
                ValueView::String(s) => Seen::String(s),
                _ => continue,
            };
            let at = match self.properties.get(at) {
                Some((n, _)) if n == name => at,
                _ => match self.properties.iter().position(|(n, _)| n == name) {
                    Some(at) => at,
                    None => {
                        self.properties.push((name.to_owned(), Run::default()));
                        self.properties.len() - 1
                    }
                },
            };
            if let Some((rate, writes)) = self.properties[at].1.step(seen, now, t) {
                found.push(Finding {
                    rule: Rule::S6,
                    kind: kind.to_owned(),
                    subject: name.to_owned(),
                    rate,
                    writes,
                });
            }
        }
    }
}

/// R-E2: one count per commit and entity group (followed by a hash of its root) in the
/// current window. The group of an incomplete key is its root (an allocated id under a
/// parent writes the parent's group); a root that is itself incomplete is a new group.
fn hot_group(
    hashing: &RandomState,
    groups: &mut Groups,
    seen_in_commit: &mut SmallVec<[u64; 8]>,
    key: &RawKey,
    now: Duration,
    t: &Thresholds,
) -> Option<Finding> {
    if key.path().len() == 1 && !key.is_complete() {
        return None;
    }
    let group = root_hash(hashing, key);
    if seen_in_commit.contains(&group) {
        return None;
    }
    seen_in_commit.push(group);
    let window = groups.entry(group).or_insert(Window {
        start: now,
        writes: 0,
        reported: false,
    });
    let mut finding = None;
    let elapsed = now.saturating_sub(window.start);
    if elapsed >= t.group_window {
        let rate = window.writes as f64 / elapsed.as_secs_f64();
        if rate > t.group_rate && !window.reported {
            window.reported = true;
            let root = key.root();
            finding = Some(Finding {
                rule: Rule::E2,
                kind: root.kind().to_owned(),
                subject: format!("{root:?}"),
                rate,
                writes: window.writes,
            });
        }
        window.start = now;
        window.writes = 0;
    }
    window.writes += 1;
    finding
}

/// Commits to one entity group in the current window.
struct Window {
    start: Duration,
    writes: u64,
    reported: bool,
}

impl Watch {
    pub(crate) fn new(config: Diagnostics) -> Watch {
        Watch {
            config,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The findings so far, oldest first.
    pub(crate) fn findings(&self) -> Vec<Finding> {
        self.state().findings.clone()
    }

    /// Observes one commit's mutations (before they are sent), each through the four
    /// rules. Allocates nothing per write once a kind and its properties are known.
    pub(crate) fn observe(&self, mutations: &[Mutation]) {
        if !self.config.on {
            return;
        }
        let now = (self.config.clock)();
        let t = &self.config.thresholds;
        let measure = t.ramp_measure.as_nanos().max(1);
        let mut state = self.state();
        let state = &mut *state;
        let mut found = Vec::new();
        let mut groups_seen: SmallVec<[u64; 8]> = SmallVec::new();
        for mutation in mutations {
            let (key, properties) = match mutation {
                Mutation::Insert(k, p, _)
                | Mutation::Update(k, p, _)
                | Mutation::Upsert(k, p, _) => (k, Some(p)),
                Mutation::Delete(k) => (k, None),
            };
            let kind = key.kind();
            let entry = match state.kinds.get_mut(kind) {
                Some(entry) => entry,
                None => state.kinds.entry(kind.to_owned()).or_insert(KindState {
                    first: now,
                    window: now.as_nanos() / measure,
                    in_window: 0,
                    reported_ramp: false,
                    keys: Run::default(),
                    properties: Vec::new(),
                }),
            };
            found.extend(entry.unramped(kind, now, t));
            if properties.is_some() {
                found.extend(entry.sequential_key(key, now, t));
            }
            if let Some(properties) = properties {
                entry.sequential_values(kind, properties, now, t, &mut found);
            }
            found.extend(hot_group(
                &state.hashing,
                &mut state.groups,
                &mut groups_seen,
                key,
                now,
                t,
            ));
        }
        if state.groups.len() > t.max_groups {
            let horizon = now.saturating_sub(t.group_window);
            state.groups.retain(|_, w| w.start >= horizon);
            if state.groups.len() > t.max_groups {
                state.groups.clear();
            }
        }
        for finding in found {
            // Keys only at `trace` (R-N8); the rule, kind and rate at `warn`, once.
            tracing::warn!(
                rule = finding.rule.id(),
                kind = %finding.kind,
                rate = finding.rate,
                writes = finding.writes,
                "this handle's writes follow a pattern Google's scale rules warn about; \
                 `db.diagnostics()` says which and how to fix it"
            );
            tracing::trace!("{finding}");
            state.findings.push(finding);
        }
    }
}
